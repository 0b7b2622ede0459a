"""Pauses that hold no worker (SPEC 25): new runs beside 200 paused ``DBOSAgent`` runs.

One worker process, the agent's queue at ``worker_concurrency=10``. A new run is one model call
that asks for ``work`` (a tool that takes ``--work`` seconds, a model's or a tool's latency),
then a final reply; a paused run asks for ``refund``, which needs approval. Two phases, each on
a fresh DBOS system database (SQLite, or Postgres with ``--postgres URL``):

- ``none paused``: enqueue ``--new`` runs, time until every one has finished;
- ``N paused``: enqueue ``--paused`` runs and wait until each has paused (its workflow ended),
  then enqueue the same ``--new`` runs and time them the same way. Then every paused run is
  approved and awaited: each finishes after its decision.

The goal (SPEC 25): the new runs finish within 1.25x their time with none paused. (Before SPEC
25 a paused run held its slot: ten paused runs would have stopped the queue for good.)

    .venv/bin/python bench/durable_pauses.py [--paused 200] [--new 50] [--work 0.2]
        [--postgres postgresql://USER@HOST:PORT] [--dir D]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from agentloop import Agent, Approve, tool
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call

WORK_SECONDS = 0.2


@tool
async def work(key: str) -> str:
    """One unit of work that takes its time."""
    await asyncio.sleep(WORK_SECONDS)
    return f"did {key}"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    return f"refunded {order}"


def plan(request: ModelRequest) -> Any:
    """``pause ...``: ask for a refund; anything else: ask for work; then say it is done."""
    if any(m.role == "tool" for m in request.messages):
        return "done"
    asked = request.messages[-1].text
    if asked.startswith("pause"):
        return [call("refund", {"order": asked})]
    return [call("work", {"key": asked})]


def launch(url: str) -> Any:
    from dbos import DBOS

    from agentloop.durable.dbos import DBOSAgent

    durable = DBOSAgent(Agent(FunctionModel(plan), tools=[work, refund]), name="bench")
    DBOS(
        config={
            "name": "agentloop-bench",
            "system_database_url": url,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.1,
        }
    )
    DBOS.launch()
    # the agent's queue, registered by the application first: its limit, polled every 0.1 s
    DBOS.register_queue(durable.queue, worker_concurrency=10, polling_interval_sec=0.1)
    return durable


def new_runs(durable: Any, count: int, tag: str) -> float:
    """Enqueue ``count`` new runs; the seconds until every one has finished."""
    started = time.perf_counter()
    queued = [durable.enqueue(f"work {n}", workflow_id=f"{tag}-{n}") for n in range(count)]
    asyncio.run(_finished(queued))
    return time.perf_counter() - started


async def _finished(queued: list[Any]) -> None:
    runs = await asyncio.gather(*(q.result(poll_seconds=0.05) for q in queued))
    assert all(r.output == "done" for r in runs)


def phase(url: str, paused: int, new: int) -> tuple[float, float, float]:
    """(seconds to park ``paused`` runs, seconds for ``new`` runs, seconds to finish the parked)."""
    from dbos import DBOS

    from agentloop.durable.dbos import DBOSAgent, DBOSRun

    durable = launch(url)
    try:
        new_runs(durable, 5, "warm")
        started = time.perf_counter()
        for n in range(paused):
            durable.enqueue(f"pause {n}", workflow_id=f"paused-{n}")
        for n in range(paused):
            while not DBOSAgent.pending(f"paused-{n}"):
                time.sleep(0.05)
        parked = time.perf_counter() - started
        elapsed = new_runs(durable, new, "new")
        started = time.perf_counter()
        for n in range(paused):
            [pending] = DBOSAgent.pending(f"paused-{n}")
            DBOSAgent.decide(f"paused-{n}", {pending.id: Approve()})
        asyncio.run(_finished([DBOSRun(f"paused-{n}") for n in range(paused)]))
        return parked, elapsed, time.perf_counter() - started
    finally:
        DBOS.destroy(destroy_registry=True)


def main() -> None:
    global WORK_SECONDS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paused", type=int, default=200)
    parser.add_argument("--new", type=int, default=50)
    parser.add_argument("--work", type=float, default=WORK_SECONDS)
    parser.add_argument("--postgres", help="a Postgres server URL (its databases are created)")
    parser.add_argument("--dir", help="where the SQLite files go (default: a temp dir)")
    args = parser.parse_args()
    WORK_SECONDS = args.work
    print(f"worker_concurrency=10, {args.new} new runs of one {args.work}s tool call each;")
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for backend in ("sqlite", "postgres"):
            if backend == "postgres" and not args.postgres:
                continue
            urls = [
                f"{args.postgres}/pauses_{n}"
                if backend == "postgres"
                else f"sqlite:///{Path(tmp) / f'pauses_{n}.sqlite'}"
                for n in range(2)
            ]
            _, base, _ = phase(urls[0], 0, args.new)
            parked, loaded, decided = phase(urls[1], args.paused, args.new)
            print(
                f"{backend}: none paused {base:.2f} s; {args.paused} paused {loaded:.2f} s "
                f"({loaded / base:.2f}x, goal <= 1.25x); parking them {parked:.1f} s; "
                f"deciding and finishing them {decided:.1f} s"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
