"""The fleet suite's PostgreSQL: the store contract's throwaway server, one database per test."""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
_numbers = itertools.count(1)


def _store_contract() -> Any:
    spec = importlib.util.spec_from_file_location(
        "agentloop_store_contract_fleet", HERE.parent / "store" / "test_store_contract.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A libpq DSN of a throwaway server (or ``AGENTLOOP_TEST_POSTGRES_DSN``)."""
    fixture = _store_contract().postgres_dsn.__wrapped__()
    try:
        yield next(fixture)
    finally:
        next(fixture, None)


@pytest.fixture
def postgres_governor_url(postgres_server: str) -> str:
    """A ``postgresql://`` URL of a fresh database on that server."""
    import psycopg

    params = psycopg.conninfo.conninfo_to_dict(postgres_server)
    name = f"fleet_{next(_numbers)}_{id(params) % 10_000}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    user, host, port = params.get("user", "postgres"), params["host"], params["port"]
    return f"postgresql://{user}@{host}:{port}/{name}"
