"""Tables created once per version, on a real PostgreSQL: the store, the governor and the memory
store (``store._ddl``).

Opening a store or a governor whose tables are current runs no DDL, so it never waits behind
(or deadlocks with) the write transactions of the processes already using them; many opening a
fresh database at once take turns on one advisory lock instead of racing on the catalog.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agentloop.errors import MemoryBackendError
from agentloop.fleet import RateGovernor, RateLimit

psycopg = pytest.importorskip("psycopg", reason="PostgreSQL tests need psycopg 3")

LOCK_TIMEOUT = "options=-c%20lock_timeout%3D2000"  # a blocked open fails in 2 s, never hangs


def open_store(url: str) -> None:
    from agentloop.store.postgres import PostgresStore

    PostgresStore(url).close()


def open_memory(url: str) -> None:
    from agentloop.memory.postgres import PostgresMemoryStore

    PostgresMemoryStore(url)._close()


def open_governor(url: str) -> None:
    import asyncio

    async def first_request() -> None:
        governor = RateGovernor([RateLimit("warmup", rpm=1000)], backend=url)
        try:
            assert await governor.acquire("warmup", "x") is not None
        finally:
            governor.close()

    asyncio.run(first_request())


@contextmanager
def writing(url: str, table: str) -> Iterator[None]:
    """Another process's write transaction on ``table``, open for the block."""
    with psycopg.connect(url) as holder:
        holder.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")
        try:
            yield
        finally:
            holder.rollback()


@pytest.mark.parametrize(
    ("opener", "table"),
    [
        (open_store, "agentloop_runs"),
        (open_governor, "agentloop_rate_sent"),
        (open_memory, "agentloop_memory"),
    ],
    ids=["store", "governor", "memory"],
)
def test_an_open_runs_no_ddl_beside_running_writes(
    postgres_governor_url: str, opener: Callable[[str], None], table: str
) -> None:
    opener(postgres_governor_url)  # the first open creates the tables
    with writing(postgres_governor_url, table):
        opener(f"{postgres_governor_url}?{LOCK_TIMEOUT}")  # a CREATE INDEX would wait here


@pytest.mark.parametrize(
    ("opener", "key"),
    [
        (open_store, "schema_version"),
        (open_governor, "rate_schema_version"),
        (open_memory, "memory_schema_version"),
    ],
    ids=["store", "governor", "memory"],
)
def test_many_opening_a_fresh_database_at_once_all_succeed(
    postgres_governor_url: str, opener: Callable[[str], None], key: str
) -> None:
    failures: list[BaseException] = []
    start = threading.Barrier(8)

    def one() -> None:
        start.wait()
        try:
            opener(postgres_governor_url)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    with psycopg.connect(postgres_governor_url) as conn:
        rows = conn.execute("SELECT value FROM agentloop_meta WHERE key = %s", (key,)).fetchall()
    assert len(rows) == 1


def test_a_newer_governor_schema_is_refused(postgres_governor_url: str) -> None:
    open_governor(postgres_governor_url)
    with psycopg.connect(postgres_governor_url, autocommit=True) as conn:
        conn.execute("UPDATE agentloop_meta SET value = '9' WHERE key = 'rate_schema_version'")
    from agentloop.fleet._sql import SQLBackend
    from agentloop.store.postgres import PostgresStore

    backend: Any = SQLBackend(
        "pg", lambda: PostgresStore(postgres_governor_url), postgres=True, clock=lambda: 0.0
    )
    with pytest.raises(MemoryBackendError, match="schema version 9, newer than"):
        backend._connected()
