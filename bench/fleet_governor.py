"""The fleet goal (SPEC 25): 20 processes on one PostgreSQL governor at ``rpm=600``.

A fake provider answers 429 above 600 requests a minute (``FakeProviderServer(rate_limit=...)``,
a sliding window over arrivals). ``--processes`` workers share one ``RateGovernor`` on
PostgreSQL and send requests through a ``GovernedClient`` as fast as it lets them (no retries:
a 429 would be a failure), each with ``--concurrency`` requests at a time, for ``--seconds``.
The goal: 0 requests over (no 429), and >= 90 % of the allowed rate used, i.e. at least 90 % of
``rpm * seconds / window`` requests served in the measured span.

    .venv/bin/python bench/fleet_governor.py --postgres postgresql://postgres@127.0.0.1:5432/db
        [--processes 20] [--rpm 600] [--window 60] [--seconds 120] [--concurrency 3]

The database must exist; the governor creates its tables. Workers start together once each
has imported, connected and opened its HTTP pool; the span is measured on the server's arrivals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from agentloop.fleet import GovernedClient, RateGovernor, RateLimit
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply


async def worker(backend: str, base_url: str, rpm: int, window: float, concurrency: int) -> None:
    governor = RateGovernor([RateLimit("openai", rpm=rpm, window=window)], backend=backend)
    client = GovernedClient(
        OpenAIClient("gpt-test", api_key="sk-test", base_url=base_url), governor
    )
    await client.inner.warm()  # type: ignore[attr-defined]  # imports and a pool, before the clock
    await prepare(backend)  # the governor's connection, too
    print("ready", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)  # "START STOP" once every worker is ready
    start, stop = map(float, line.split())
    await asyncio.sleep(max(0.0, start - time.time()))
    sent = failed = 0

    async def loop() -> None:
        nonlocal sent, failed
        while time.time() < stop:
            try:
                await client.complete(ModelRequest(messages=(Message.user("hi"),)))
                sent += 1
            except Exception:
                failed += 1

    await asyncio.gather(*(loop() for _ in range(concurrency)))
    await client.aclose()
    governor.close()
    print(json.dumps({"sent": sent, "failed": failed}))


async def fleet(args: argparse.Namespace) -> dict[str, float]:
    arrivals: list[float] = []
    server = FakeProviderServer(default=FakeReply("ok"), rate_limit=(args.rpm, args.window))
    counted = server._over_rate

    def over() -> float | None:
        wait = counted()
        if wait is None:
            arrivals.append(time.time())
        return wait

    server._over_rate = over  # type: ignore[method-assign]
    await prepare(args.postgres)
    async with server:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        argv = [sys.executable, str(Path(__file__)), "--child", args.postgres, server.base_url,
                str(args.rpm), str(args.window), str(args.concurrency)]  # fmt: skip
        pipe = asyncio.subprocess.PIPE
        children = [
            await asyncio.create_subprocess_exec(*argv, stdin=pipe, stdout=pipe, env=env)
            for _ in range(args.processes)
        ]
        for child in children:  # every worker imported, connected and warm
            assert child.stdout is not None
            assert (await child.stdout.readline()).strip() == b"ready"
        start = time.time() + 1.0
        stop = start + args.seconds
        go = f"{start} {stop}\n".encode()
        outputs = await asyncio.gather(*(child.communicate(go) for child in children))
    reports = [json.loads(out.decode().strip().splitlines()[-1]) for out, _ in outputs]
    served = sum(start <= t < stop for t in arrivals)
    if os.environ.get("FLEET_HISTOGRAM"):
        seconds = [int(t - start) for t in arrivals]
        print({s: seconds.count(s) for s in sorted(set(seconds))}, [r["sent"] for r in reports])
    allowed = args.rpm * args.seconds / args.window
    return {
        "served": served,
        "over (429)": server.rate_limited,
        "worker failures": sum(r["failed"] for r in reports),
        "worker requests": sum(r["sent"] for r in reports),
        "allowed": allowed,
        "used %": 100.0 * served / allowed,
    }


async def prepare(backend: str) -> None:
    """Create the governor's tables once, before the workers race to."""
    governor = RateGovernor([RateLimit("warmup", rpm=1_000_000)], backend=backend)
    await governor.acquire("warmup", "x")
    governor.close()


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        backend, url, rpm, window, concurrency = sys.argv[2:7]
        asyncio.run(worker(backend, url, int(rpm), float(window), int(concurrency)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", required=True, help="postgresql:// URL of an existing db")
    parser.add_argument("--processes", type=int, default=20)
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--concurrency", type=int, default=3)
    args = parser.parse_args()
    result = asyncio.run(fleet(args))
    print(f"{args.processes} processes, rpm={args.rpm}, window={args.window:g}s, "
          f"{args.seconds:g}s measured")  # fmt: skip
    for name, value in result.items():
        print(f"  {name:>16}: {value:.1f}" if isinstance(value, float) else f"  {name}: {value}")


if __name__ == "__main__":
    main()
