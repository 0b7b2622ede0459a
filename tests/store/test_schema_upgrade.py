"""A store written by the schema-2 code opens as schema 3, upgraded in place (SQLite, PostgreSQL).

The fixture store is built with schema 2's own DDL and writes (frozen below as that code had
them, not taken from today's ``_tables``): a completed, a failed, a paused, a waiting, a running
and a damaged run. Opening it with today's store adds the ``status``, ``batch_id`` and
``request_id`` columns and their index in one transaction, each status back-filled from its
record; a read-only open refuses it until then, naming the writing open that upgrades it.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop.batching import BatchWait
from agentloop.errors import Cancelled, InvalidInput, MemoryBackendError
from agentloop.messages import ToolCallPart
from agentloop.pausing import PendingCall
from agentloop.run import Run
from agentloop.store import PostgresStore, SQLiteStore
from agentloop.store._status import STATUSES

_CONTRACT = Path(__file__).with_name("test_store_contract.py")
_spec = importlib.util.spec_from_file_location("_store_contract_upgrade", _CONTRACT)
assert _spec is not None and _spec.loader is not None
_contract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_contract)
postgres_dsn = _contract.postgres_dsn  # the same throwaway PostgreSQL server
open_store = _contract.open_store
make_run = _contract.make_run

Execute = Callable[..., object]


def schema_2(seq: str, real: str) -> list[str]:
    """Schema 2's DDL as ``agentloop.store._tables`` had it (agentloop_meta from ``_ddl``)."""
    return [
        "CREATE TABLE agentloop_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"CREATE TABLE agentloop_sessions (session_id TEXT PRIMARY KEY, safety TEXT, "
        f"lease_owner TEXT, lease_until {real})",
        "CREATE TABLE agentloop_steps (session_id TEXT NOT NULL, run_id TEXT NOT NULL, "
        "key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (run_id, key))",
        "CREATE INDEX agentloop_steps_session ON agentloop_steps (session_id)",
        f"CREATE TABLE agentloop_resumptions (run_id TEXT NOT NULL, at {real} NOT NULL, "
        "from_turn INTEGER NOT NULL)",
        "CREATE INDEX agentloop_resumptions_run ON agentloop_resumptions (run_id)",
        f"CREATE TABLE agentloop_runs (seq {seq}, run_id TEXT NOT NULL UNIQUE, "
        f"session_id TEXT NOT NULL, input TEXT NOT NULL, started_at {real}, ended_at {real}, "
        "absorbed INTEGER NOT NULL DEFAULT 0, record TEXT)",
        "CREATE INDEX agentloop_runs_session ON agentloop_runs (session_id, seq)",
        "CREATE TABLE agentloop_turns (run_id TEXT NOT NULL, number INTEGER NOT NULL, "
        "turn TEXT NOT NULL, messages TEXT NOT NULL, PRIMARY KEY (run_id, number))",
        "CREATE TABLE agentloop_history (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "message TEXT NOT NULL, PRIMARY KEY (session_id, seq))",
    ]


WAIT = BatchWait("openai", "batch_abc", "w_0_0", 1000.0)
EXPECTED = {
    "done": ("completed", None, None),
    "broke": ("failed", None, None),
    "cancelled": ("failed", None, None),
    "asks": ("paused", None, None),
    "waits": ("waiting", "batch_abc", "w_0_0"),
    "live": ("running", None, None),
    "damaged": ("failed", None, None),
}


def runs() -> list[tuple[str, Run | None]]:
    """The runs the schema-2 store holds (None: no record yet, the run is in flight)."""
    asks = make_run("asks")
    asks.pending = (PendingCall(ToolCallPart("c1", "refund", {}), "approval", None),)
    waits = make_run("waits")
    waits.output, waits.waiting = None, WAIT
    return [
        ("done", make_run("done")),
        ("broke", make_run("broke", MemoryBackendError("disk full"))),
        ("cancelled", make_run("cancelled", Cancelled())),
        ("asks", asks),
        ("waits", waits),
        ("live", None),
    ]


def write_schema_2(execute: Execute, seq: str, real: str, mark: str = "?") -> None:
    """The fixture store, written as the schema-2 ``begin_run`` / ``finish_runs`` wrote it."""
    for statement in schema_2(seq, real):
        execute(statement, ())
    execute(f"INSERT INTO agentloop_meta VALUES ('schema_version', {mark})", ("2",))
    insert = (
        "INSERT INTO agentloop_runs (run_id, session_id, input, started_at, ended_at, absorbed, "
        f"record) VALUES ({', '.join([mark] * 7)})"
    )
    for run_id, run in [*runs(), ("damaged", None)]:
        record = None if run is None else json.dumps(run.to_dict())
        record = "{not json" if run_id == "damaged" else record
        ended = None if run is None else 2.0
        execute(insert, (run_id, f"s-{run_id}", f"task {run_id}", 1.0, ended, 0, record))


def check_upgraded(store: SQLiteStore | PostgresStore, rows: list[tuple[Any, ...]]) -> None:
    assert {r[0]: tuple(r[1:]) for r in rows} == EXPECTED
    for run_id, run in runs():
        stored = store.load_run(run_id)
        assert stored is not None and stored.status == EXPECTED[run_id][0]
        if run is not None:
            assert stored.run.to_dict() == run.to_dict()  # every record reads as it was
    assert [s.run.id for s in store.load_runs(status="waiting")] == ["waits"]
    page = store.page_runs(status="failed")
    assert [r for r, _ in page.runs] == ["damaged", "cancelled", "broke"] and page.total == 3
    with pytest.raises(InvalidInput, match="one of running, waiting, paused, completed, failed"):
        store.page_runs(status="cancelled")


def test_a_schema_2_sqlite_store_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        write_schema_2(conn.execute, "INTEGER PRIMARY KEY", "REAL")
    with pytest.raises(MemoryBackendError, match=r"older agentloop.*to upgrade it in place"):
        SQLiteStore(db, read_only=True)  # reading never writes: it says how to upgrade
    store = SQLiteStore(db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT run_id, status, batch_id, request_id FROM agentloop_runs")
        check_upgraded(store, rows.fetchall())
        assert conn.execute("SELECT value FROM agentloop_meta").fetchall() == [("3",)]
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT seq FROM agentloop_runs WHERE status = ? AND seq < ? "
            "ORDER BY seq DESC LIMIT 5",
            ("failed", 99),
        ).fetchall()
    assert "agentloop_runs_status" in str(plan) and "TEMP B-TREE" not in str(plan)
    store.close()
    SQLiteStore(db, read_only=True).close()  # upgraded: a reader opens it
    SQLiteStore(db).close()  # current: nothing runs again


def test_a_schema_1_store_gets_the_status_columns_too(tmp_path: Path) -> None:
    db = tmp_path / "older.db"
    with sqlite3.connect(db) as conn:
        write_schema_2(conn.execute, "INTEGER PRIMARY KEY", "REAL")
        for table in ("agentloop_meta", "agentloop_sessions", "agentloop_steps",
                      "agentloop_resumptions"):  # fmt: skip
            conn.execute(f"DROP TABLE {table}")  # schema 1: the runs, turns and history only
    store = SQLiteStore(db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT run_id, status, batch_id, request_id FROM agentloop_runs")
        check_upgraded(store, rows.fetchall())
    store.close()


@pytest.fixture
def fresh_database(postgres_dsn: str) -> Iterator[str]:
    """A database of its own on the throwaway server, dropped after the test."""
    import psycopg

    name = f"schema2_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres_dsn.replace("dbname=postgres", f"dbname={name}")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_a_schema_2_postgres_store_is_upgraded_in_place(fresh_database: str) -> None:
    import psycopg

    seq = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        write_schema_2(conn.execute, seq, "DOUBLE PRECISION", "%s")
    with pytest.raises(MemoryBackendError, match="older agentloop"):
        PostgresStore(fresh_database, read_only=True)
    store = PostgresStore(fresh_database)
    with psycopg.connect(fresh_database) as conn:
        rows = conn.execute("SELECT run_id, status, batch_id, request_id FROM agentloop_runs")
        check_upgraded(store, rows.fetchall())
        assert conn.execute("SELECT value FROM agentloop_meta").fetchall() == [("3",)]
    store.close()
    PostgresStore(fresh_database, read_only=True).close()


def test_processes_opening_a_schema_2_store_at_once_upgrade_it_once(fresh_database: str) -> None:
    import threading

    import psycopg

    seq = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        write_schema_2(conn.execute, seq, "DOUBLE PRECISION", "%s")
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            PostgresStore(fresh_database).close()
        except BaseException as error:  # collected: the test fails naming it
            errors.append(error)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []  # the advisory lock serialised them; the later ones found version 3
    store = PostgresStore(fresh_database)
    with psycopg.connect(fresh_database) as conn:
        rows = conn.execute("SELECT run_id, status, batch_id, request_id FROM agentloop_runs")
        check_upgraded(store, rows.fetchall())
    store.close()


def test_the_statuses_are_the_five_of_spec_9() -> None:
    assert STATUSES == ("running", "waiting", "paused", "completed", "failed")


def test_each_commit_point_writes_the_status_it_leaves(open_store: Any) -> None:
    store = open_store()
    run = make_run("r1")
    run.output, run.stop_reason = None, None
    store.begin_run("s", run)
    assert [s.status for s in store.load_runs(status="running")] == ["running"]
    run.waiting = WAIT
    store.finish_runs("s", [run], keep=0, append=[])
    (waiting,) = store.load_runs(status="waiting")
    assert waiting.run.waiting == WAIT and store.page_runs(status="running").total == 0
    store.reopen_run("s", run, keep=0, at=5.0)  # continue_run picks it up again
    assert [s.run.id for s in store.load_runs(status="running")] == ["r1"]
    run.waiting, run.output = None, "done"
    store.finish_runs("s", [run], keep=0, append=[])
    assert [s.status for s in store.load_runs("s")] == ["completed"]
    assert store.load_runs(status="waiting") == []
