"""Memory stores for the shared contract: in memory, SQLite on a temp file, PostgreSQL for real.

The PostgreSQL leg reuses the store contract's throwaway server (``initdb``/``pg_ctl`` on
127.0.0.1, or ``AGENTLOOP_TEST_POSTGRES_DSN``); it skips with the reason when there is none.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop.memory import InMemoryMemoryStore, PostgresMemoryStore, SQLiteMemoryStore
from agentloop.memory._store import BaseMemoryStore

HERE = Path(__file__).parent
BACKENDS = ["memory", "sqlite", "postgres"]


def _store_contract() -> Any:
    spec = importlib.util.spec_from_file_location(
        "agentloop_store_contract_memory", HERE.parent / "store" / "test_store_contract.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def memory_postgres_dsn() -> Iterator[str]:
    """The store contract's throwaway PostgreSQL server (one per test session)."""
    fixture = _store_contract().postgres_dsn.__wrapped__()
    try:
        yield next(fixture)
    finally:
        next(fixture, None)


def _empty_postgres(dsn: str) -> None:
    import psycopg

    PostgresMemoryStore(dsn)._close()  # the table exists
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE agentloop_memory")


StoreFactory = Callable[[], BaseMemoryStore]


@pytest.fixture(params=BACKENDS)
def open_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Opens a store over the same data each time (a reopen); closes them all after."""
    opened: list[BaseMemoryStore] = []
    shared = InMemoryMemoryStore()
    if request.param == "memory":

        def factory() -> BaseMemoryStore:
            return shared
    elif request.param == "sqlite":

        def factory() -> BaseMemoryStore:
            return SQLiteMemoryStore(tmp_path / "memory.db")
    else:
        dsn = request.getfixturevalue("memory_postgres_dsn")
        _empty_postgres(dsn)

        def factory() -> BaseMemoryStore:
            return PostgresMemoryStore(dsn)

    def opener() -> BaseMemoryStore:
        store = factory()
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store._close()


@pytest.fixture
async def mstore(open_memory: StoreFactory) -> AsyncIterator[BaseMemoryStore]:
    yield open_memory()
