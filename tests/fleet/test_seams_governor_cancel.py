"""A run cancelled while the shared governor admits it frees what it was given (SPEC 25 x 5).

The SQLite and PostgreSQL backends admit a request in a worker thread. A run cancelled while
that thread works (the database busy behind another process's transaction) used to leave
the thread to write its admission anyway: a ``concurrent`` slot and an ``rpm`` row for a
request never sent, held until the lease expired (the client's timeout + connect timeout,
130 s by default), so every process sharing the governor waited behind a run that was gone.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from agentloop.fleet import RateGovernor, RateLimit
from agentloop.testing import FakeClock

pytestmark = pytest.mark.usefixtures("no_real_sleep")


async def admitting(task: asyncio.Task[object]) -> None:
    """Yield until ``task`` waits on the backend's worker thread."""
    for _ in range(1000):
        awaiting: object = task.get_coro()
        while hasattr(awaiting, "cr_code"):
            if awaiting.cr_code.co_name in ("_call", "_admit"):
                return
            awaiting = getattr(awaiting, "cr_await", None)
        await asyncio.sleep(0)
    raise AssertionError("the governor never asked its backend")


async def test_a_run_cancelled_mid_admission_leaves_no_slot_behind(tmp_path: Path) -> None:
    path = tmp_path / "governor.db"
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", concurrent=1)], backend=f"sqlite:///{path}",
                            clock=clock)  # fmt: skip
    first = await governor.acquire("openai", "m")
    assert first is not None
    await first.settle()  # the tables exist; the slot is free
    other_process = sqlite3.connect(path, isolation_level=None)
    other_process.execute("BEGIN EXCLUSIVE")  # the database busy: the admission waits
    task: asyncio.Task[object] = asyncio.get_running_loop().create_task(
        governor.acquire("openai", "m")
    )
    await admitting(task)
    task.cancel()
    other_process.execute("COMMIT")
    other_process.close()
    with pytest.raises(asyncio.CancelledError):
        await task
    lease = await governor.acquire("openai", "m")  # the slot is free at once
    assert lease is not None and clock.sleeps == []
    await lease.settle()
    governor.close()
