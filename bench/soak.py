"""Soak: many agent runs against a server that injects random faults and garbage.

A fake OpenAI-compatible server runs in its own process on 127.0.0.1 (this script with
``--serve``): ``FakeProviderServer`` with one seeded random step per request. About half the
requests get a valid reply (a tool call, an unknown tool, arguments that are not JSON, or the
final text); the rest get a fault: 429 with ``Retry-After: 0``, 500, 503, 529, 401, 400, a
connection reset, a truncated stream, a malformed body, a 200 whose JSON breaks the schema
(``choices`` a number, ``usage`` strings, a body nested 100,000 deep, an empty array...), a body
that is not JSON, or (rarely) a hang past the client's read timeout.

The client side is what an application holds: ``Agent(RetryingClient(OpenAIClient(...)))``
with an async and a sync tool, half the runs through ``run()`` and half through ``stream()``.
Every run must end in a ``Run`` or an ``AgentLoopError``; anything else is an escape, counted,
printed and a non-zero exit. At run 1,000 and at the end (and every ``--every`` runs) it prints
RSS, tracemalloc's current and peak, and open file descriptors (``/proc/self/fd``), after a
``gc.collect()``, so a reader can see they are flat.

    python bench/soak.py                       # 10,000 runs, 8 at a time
    python bench/soak.py --runs 2000 --concurrency 16 --no-tracemalloc

A benchmark, not a test. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Mapping
from typing import Any

HOST = "127.0.0.1"

# --- the fault-injecting server (its own process) -------------------------------------------

_GARBAGE = [
    '{"choices": 5}',
    '{"choices": []}',
    "[]",
    "null",
    '"just a string"',
    '{"choices": [{"message": {"role": "assistant", "content": 7}}]}',
    '{"choices": [{"message": {"role": "assistant", "content": "x"}, "finish_reason": {}}],'
    ' "usage": {"prompt_tokens": "abc", "completion_tokens": [1]}}',
    '{"choices": [{"message": {"role": "assistant", "content": "x"}}],'
    ' "usage": {"prompt_tokens": 1e400}}',
    '{"choices": [{"message": {"tool_calls": [{"id": 1, "function": {"name": null}}]}}]}',
    "[" * 100_000 + "]" * 100_000,
    "\x00\xff not json at all",
]


def _step(rng: random.Random) -> Any:
    from agentloop.testing import FakeReply, FakeToolCall, Fault

    roll = rng.random()
    if roll < 0.22:
        return FakeReply(tool_calls=[FakeToolCall("lookup", {"key": f"k{rng.randrange(50)}"})])
    if roll < 0.30:
        return FakeReply(tool_calls=[FakeToolCall("count", {"text": "a b c"})])
    if roll < 0.33:
        return FakeReply(tool_calls=[FakeToolCall("no_such_tool", {})])
    if roll < 0.36:
        return FakeReply(tool_calls=[FakeToolCall("lookup", "{not json")])
    if roll < 0.52:
        return FakeReply("All done.")
    faults = [
        lambda: Fault.http(429, {"error": {"message": "slow"}}, {"Retry-After": "0"}),
        lambda: Fault.server_error(rng.choice([500, 503, 529])),
        lambda: Fault.auth(),
        lambda: Fault.context_overflow(),
        lambda: Fault.http(400, "bad request"),
        lambda: Fault.reset(),
        lambda: Fault.truncate(),
        lambda: Fault.malformed(),
        lambda: Fault.http(200, rng.choice(_GARBAGE)),
        lambda: Fault.http(200, rng.choice(_GARBAGE)),
    ]
    if rng.random() < 0.004:
        return Fault.hang(seconds=0.6)
    return rng.choice(faults)()


async def _serve(seed: int) -> None:
    from agentloop.testing import FakeProviderServer

    rng = random.Random(seed)

    def answer(body: Mapping[str, Any]) -> Any:
        return _step(rng)

    async with FakeProviderServer(default=answer, host=HOST) as server:
        print(server.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


# --- the client side --------------------------------------------------------------------------


def _rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _measure(done: int, started: float, tracing: bool) -> str:
    gc.collect()
    traced = ""
    if tracing:
        current, peak = tracemalloc.get_traced_memory()
        traced = f"  tracemalloc {current / 1024:8.0f} KiB (peak {peak / 1024:8.0f} KiB)"
    rate = done / (time.perf_counter() - started)
    return f"run {done:6d}: RSS {_rss_kib():7d} KiB{traced}  fds {_fds():3d}  ({rate:.0f} runs/s)"


def _client(port: int) -> Any:
    from agentloop.providers.openai import OpenAIClient
    from agentloop.providers.retrying import RetryingClient

    inner = OpenAIClient(
        "soak-model", api_key="soak-key", base_url=f"http://{HOST}:{port}/v1", timeout=0.3
    )
    return RetryingClient(
        inner, max_retries=2, base_delay=0.001, max_delay=0.005, rate_limit_default_delay=0.001,
        rate_limit_max_delay=0.005, rate_limit_retries=2,
    )  # fmt: skip


def _tools() -> list[Any]:
    from agentloop import tool

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return f"{key} = {len(key)}"

    @tool
    def count(text: str) -> int:
        """Count the words of a text."""
        return len(text.split())

    return [lookup, count]


async def _one(n: int, client: Any, tools: list[Any], outcomes: Counter[str]) -> str | None:
    """One run; returns a description of an escape, None when it ended as promised."""
    from agentloop import Agent, RunConfig
    from agentloop.errors import AgentLoopError

    agent = Agent(client, tools=tools, config=RunConfig(max_turns=12))
    try:
        if n % 2:
            async with agent.stream(f"task {n}") as events:
                async for _ in events:
                    pass
        else:
            await agent.run(f"task {n}")
    except AgentLoopError as error:
        outcomes[type(error).__name__] += 1
        return None
    except BaseException as escaped:  # what the soak exists to find
        if isinstance(escaped, KeyboardInterrupt | SystemExit | asyncio.CancelledError):
            raise
        outcomes["ESCAPED " + type(escaped).__name__] += 1
        return f"run {n}: {type(escaped).__name__}: {escaped!r}"[:300]
    outcomes["completed"] += 1
    return None


async def _soak(args: argparse.Namespace, port: int) -> int:
    client, tools = _client(port), _tools()
    outcomes: Counter[str] = Counter()
    escapes: list[str] = []
    checkpoints = {min(1000, args.runs), args.runs}
    checkpoints.update(range(args.every, args.runs, args.every) if args.every else ())
    next_run = 0
    done = 0
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal next_run, done
        while next_run < args.runs:
            n, next_run = next_run, next_run + 1
            escape = await _one(n, client, tools, outcomes)
            if escape is not None:
                escapes.append(escape)
            done += 1
            if done in checkpoints:
                print(_measure(done, started, args.tracemalloc), flush=True)

    try:
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    finally:
        await client.aclose()
    print(f"\n{args.runs} runs in {time.perf_counter() - started:.1f}s; outcomes:")
    for name, count in outcomes.most_common():
        print(f"  {count:6d}  {name}")
    for escape in escapes[:20]:
        print("ESCAPE", escape)
    print(f"non-AgentLoopError escapes: {len(escapes)}")
    return 1 if escapes else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--every", type=int, default=0, help="also measure every N runs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-tracemalloc", dest="tracemalloc", action="store_false")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.seed))
        return 0
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--seed", str(args.seed)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        if args.tracemalloc:
            tracemalloc.start()
        return asyncio.run(_soak(args, port))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)


if __name__ == "__main__":
    sys.exit(main())
