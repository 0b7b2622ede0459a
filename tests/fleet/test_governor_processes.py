"""One governor across real processes, on SQLite and on a real PostgreSQL: never over.

Four child processes (``_governed_child.py``) send requests, without retries, to one fake
provider that answers 429 above its rate. Sharing the governor's backend, none of them is ever
refused, and the server saw every request: the limit held across processes, and it was used.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from pathlib import Path

from agentloop.fleet import RateGovernor, RateLimit
from agentloop.testing import FakeProviderServer, FakeReply

HERE = Path(__file__).parent
CHILD = HERE / "_governed_child.py"
PROCESSES, REQUESTS, RPM, WINDOW = 4, 5, 8, 1.5


async def prepare(backend: str) -> None:
    """Create the governor's tables once (a key of its own, so nothing is counted)."""
    governor = RateGovernor([RateLimit("warmup", rpm=1)], backend=backend)
    assert await governor.acquire("warmup", "x") is not None
    governor.close()


async def fleet(backend: str) -> tuple[list[dict[str, object]], FakeProviderServer, float]:
    await prepare(backend)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # the server counts a request when it arrives, the governor when it admits it: on a loaded
    # machine one admitted early may arrive late, so the server's window is a little shorter
    # (still RPM a window: a governor that let more through is refused; one that held less than
    # WINDOW fails the elapsed check)
    limit = (RPM, WINDOW * 0.8)
    async with FakeProviderServer(default=FakeReply("ok"), rate_limit=limit) as server:
        started = time.monotonic()
        children = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(CHILD),
                backend,
                server.base_url,
                str(REQUESTS),
                str(RPM),
                str(WINDOW),
                stdout=asyncio.subprocess.PIPE,
                env=env,
            )
            for _ in range(PROCESSES)
        ]
        outputs = await asyncio.wait_for(asyncio.gather(*(c.communicate() for c in children)), 120)
        elapsed = time.monotonic() - started
    reports = [json.loads(out.decode().strip().splitlines()[-1]) for out, _ in outputs]
    return reports, server, elapsed


def check(reports: list[dict[str, object]], server: FakeProviderServer, elapsed: float) -> None:
    total = PROCESSES * REQUESTS
    assert [r["failed"] for r in reports] == [0] * PROCESSES, reports
    assert server.rate_limited == 0
    assert len(server.received) == total
    # the rate was really held (not luck): the last batch waited for its windows
    assert elapsed >= (math.ceil(total / RPM) - 1) * WINDOW


async def test_processes_sharing_a_sqlite_governor_never_go_over(tmp_path: Path) -> None:
    check(*await fleet(f"sqlite:///{tmp_path / 'governor.db'}"))


async def test_processes_sharing_a_postgres_governor_never_go_over(
    postgres_governor_url: str,
) -> None:
    check(*await fleet(postgres_governor_url))
