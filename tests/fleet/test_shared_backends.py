"""The shared backends (SQLite, PostgreSQL) hold every line the in-process one does.

Two governors on one backend stand for two processes (each has its own connection): tokens
are reconciled with the reported usage for both, a ``concurrent`` slot taken by one holds the
other back until it is settled, a 429 seen by one closes the key for the other, and a waiter
that gave up leaves the queue. Then a 429 across real processes: a worker that starts after
another was refused waits out the ``Retry-After`` before its first request.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentloop.errors import Cancelled
from agentloop.fleet import RateGovernor, RateLimit
from agentloop.messages import Usage
from agentloop.testing import FakeProviderServer, FakeReply, Fault

HERE = Path(__file__).parent


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'governor.db'}"
    else:
        yield request.getfixturevalue("postgres_governor_url")


def pair(backend: str, limit: RateLimit) -> tuple[RateGovernor, RateGovernor]:
    return RateGovernor([limit], backend=backend), RateGovernor([limit], backend=backend)


class Run:
    def __init__(self) -> None:
        self.waits: list[tuple[str, str, float]] = []
        self.waiting = asyncio.Event()
        self.cancel = False

    def on_rate_limit_wait(self, key: str, limit: str, wait_seconds: float) -> None:
        self.waits.append((key, limit, wait_seconds))
        self.waiting.set()

    def wall_clock(self) -> tuple[float, float] | None:
        return None

    def check_cancel(self) -> None:
        if self.cancel:
            raise Cancelled()


async def test_tokens_are_reconciled_across_governors(backend: str) -> None:
    first, second = pair(backend, RateLimit("openai", tpm=1000, window=600))
    lease = await first.acquire("openai", "m", 900)
    assert lease is not None
    await lease.settle(Usage(60, 40))  # 100, not 900
    run = Run()
    assert await second.acquire("openai", "m", 800, run=run) is not None
    assert run.waits == []
    first.close()
    second.close()


async def test_a_concurrent_slot_holds_the_other_governor_until_settled(backend: str) -> None:
    first, second = pair(backend, RateLimit("openai", concurrent=1))
    lease = await first.acquire("openai", "m")
    assert lease is not None
    run = Run()
    waiting = asyncio.create_task(second.acquire("openai", "m", run=run))
    await asyncio.wait_for(run.waiting.wait(), 30)
    assert not waiting.done() and run.waits[0][:2] == ("openai:*", "concurrent")
    await lease.settle()
    assert await asyncio.wait_for(waiting, 30) is not None
    first.close()
    second.close()


async def test_a_429_on_one_closes_the_key_for_the_other(backend: str) -> None:
    first, second = pair(backend, RateLimit("openai", rpm=1000))
    lease = await first.acquire("openai", "m")
    assert lease is not None
    await lease.rate_limited(0.5)
    run = Run()
    started = time.monotonic()
    assert await second.acquire("openai", "m", run=run) is not None
    assert time.monotonic() - started >= 0.3
    assert [w[:2] for w in run.waits] == [("openai:*", "retry_after")]
    first.close()
    second.close()


async def test_a_waiter_that_gives_up_leaves_the_queue(backend: str) -> None:
    first, second = pair(backend, RateLimit("openai", rpm=1, window=1.0))
    assert await first.acquire("openai", "m") is not None
    quitter = Run()
    quitter.cancel = True
    with pytest.raises(Cancelled):
        await second.acquire("openai", "m", run=quitter)
    # the quitter is not at the head of the queue: the next waiter goes when the window allows
    assert await asyncio.wait_for(first.acquire("openai", "m"), 30) is not None
    first.close()
    second.close()


async def test_a_429_in_one_process_holds_back_a_process_that_starts_later(backend: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = str(HERE / "_governed_child.py")
    script = [Fault.rate_limit(retry_after=6)]
    async with FakeProviderServer(script, default=FakeReply("ok")) as server:
        reports = []
        for _ in range(2):  # one after the other: the second starts after the 429
            process = await asyncio.create_subprocess_exec(
                sys.executable, child, backend, server.base_url, "1", "1000", "60", "1",
                stdout=asyncio.subprocess.PIPE, env=env,
            )  # fmt: skip
            out, _ = await asyncio.wait_for(process.communicate(), 120)
            reports.append(json.loads(out.decode().strip().splitlines()[-1]))
    assert reports[0]["failed"] == 1 and "429" in reports[0]["errors"][0]
    assert reports[1]["ok"] == 1 and reports[1]["waited"] >= 1.0
