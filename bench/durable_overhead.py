"""What durability costs per turn: DBOS on SQLite and on Postgres against the plain SQLiteStore.

Each run has ``--turns`` turns of one tool call, then a final reply (a local ``FunctionModel``
and a trivial tool, so only the bookkeeping is measured). Modes:

- ``sqlite-store``: ``Agent(store=SQLiteStore(...))``, the plain store's commit per turn and
  journal entry per tool call (the baseline);
- ``dbos-sqlite``: ``DBOSAgent`` on a DBOS SQLite system database (a model step and a tool step
  per turn, plus the workflow's own rows);
- ``dbos-postgres``: the same on Postgres (``--postgres postgresql://...``; skipped without).

    .venv/bin/python bench/durable_overhead.py [--runs 20] [--turns 10] [--postgres URL] [--dir D]

DBOS's SQLite commits are synced to disk (the plain store's WAL commits are not), so on a disk
with slow fsync most of ``dbos-sqlite``'s cost is the disk: ``--dir /dev/shm`` shows the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from agentloop import Agent, tool
from agentloop.model import ModelRequest
from agentloop.store import SQLiteStore
from agentloop.testing import FunctionModel, call


@tool
def bump(n: int) -> int:
    """Add one."""
    return n + 1


def planner(turns: int) -> Any:
    def step(request: ModelRequest) -> Any:
        done = sum(1 for m in request.messages if m.role == "tool")
        return [call("bump", {"n": done})] if done < turns else "done"

    return step


async def plain_store(tmp: Path, runs: int, turns: int) -> float:
    agent = Agent(FunctionModel(planner(turns)), tools=[bump], store=SQLiteStore(tmp / "store.db"))
    await agent.run("warm up")
    started = time.perf_counter()
    for _ in range(runs):
        await agent.run("go")
    return time.perf_counter() - started


async def dbos(url: str, runs: int, turns: int) -> float:
    from dbos import DBOS

    from agentloop.durable.dbos import DBOSAgent

    durable = DBOSAgent(Agent(FunctionModel(planner(turns)), tools=[bump]), name="bench")
    DBOS(config={"name": "agentloop-bench", "system_database_url": url, "log_level": "WARNING"})
    DBOS.launch()
    try:
        await durable.run("warm up")
        started = time.perf_counter()
        for _ in range(runs):
            await durable.run("go")
        return time.perf_counter() - started
    finally:
        DBOS.destroy(destroy_registry=True)


def report(name: str, seconds: float, runs: int, turns: int, base: float | None) -> float:
    per_turn = seconds / (runs * (turns + 1)) * 1000
    added = "" if base is None else f"   (+{per_turn - base:.2f} ms per turn)"
    print(f"{name:15} {seconds / runs * 1000:8.1f} ms per run  {per_turn:6.2f} ms per turn{added}")
    return per_turn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--postgres", help="a Postgres URL for DBOS (its database is created)")
    parser.add_argument("--dir", help="where the SQLite files go (default: a temp dir)")
    args = parser.parse_args()
    runs, turns = args.runs, args.turns
    print(f"{runs} runs of {turns} tool turns + 1 final turn each")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = report(
            "sqlite-store", asyncio.run(plain_store(Path(tmp), runs, turns)), runs, turns, None
        )
        url = f"sqlite:///{Path(tmp) / 'dbos.sqlite'}"
        report("dbos-sqlite", asyncio.run(dbos(url, runs, turns)), runs, turns, base)
    if args.postgres:
        report("dbos-postgres", asyncio.run(dbos(args.postgres, runs, turns)), runs, turns, base)


if __name__ == "__main__":
    main()
