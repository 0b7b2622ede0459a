"""A finalize reuses the JSON its turn rows were written with; the one boundary of a store call.

``SQLStore`` encodes each message and turn of a run in flight once (``store._encoded``); the run
record and the history rows of its finalize splice those texts in. What is stored must be what
``to_json(run.to_dict())`` and each ``message.to_dict()`` would have written, also when a turn
changed after its row. Every store call runs in one ``Opened`` transaction (``_boundary``): a
driver error or an unreadable record becomes ``MemoryBackendError``, anything else passes.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentloop.errors import MemoryBackendError
from agentloop.messages import Message
from agentloop.run import Run
from agentloop.store import PostgresStore, SQLiteStore
from agentloop.store._encoded import RunTexts, record_json

_CONTRACT = Path(__file__).with_name("test_store_contract.py")
_spec = importlib.util.spec_from_file_location("_store_contract_encoded", _CONTRACT)
assert _spec is not None and _spec.loader is not None
_contract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_contract)
postgres_dsn = _contract.postgres_dsn  # the same throwaway PostgreSQL server
open_store = _contract.open_store
store = _contract.store
make_run = _contract.make_run

Backend = SQLiteStore | PostgresStore


def _rows(store: Backend, sql: str, *params: object) -> list[tuple[object, ...]]:
    with store.transaction("reading") as tx:
        return tx.rows(sql, params)


def _written(store: Backend, run: Run) -> None:
    """``run`` goes through its turn rows and its finalize as the engine writes it."""
    store.begin_run("s", run)
    store.save_turn(run.id, 0, run.turns[0], run.messages[:3])
    store.save_turn(run.id, 1, run.turns[1], run.messages[3:])


def test_the_record_and_the_history_are_the_values_to_dict_gives(store: Backend) -> None:
    run = make_run("r1")
    _written(store, run)
    store.finish_runs("s", [run], keep=0, append=run.messages)
    (record,) = _rows(store, "SELECT record FROM agentloop_runs WHERE run_id = ?", run.id)[0]
    assert isinstance(record, str) and json.loads(record) == json.loads(json.dumps(run.to_dict()))
    history = _rows(store, "SELECT message FROM agentloop_history ORDER BY seq")
    assert [json.loads(str(m)) for (m,) in history] == [m.to_dict() for m in run.messages]
    (loaded,) = store.load_runs("s")
    assert loaded.run.to_dict() == run.to_dict()
    assert store.load_history("s") == run.messages
    assert not store._texts  # the run's texts go with its finalize


def test_a_turn_changed_after_its_row_is_written_as_it_is_now(store: Backend) -> None:
    run = make_run("r2")
    _written(store, run)
    run.turns[1].warnings = ["budget: 80 % of tokens spent"]  # noted after the turn's row
    extra = Message.user("a message no turn row holds")
    store.finish_runs("s", [run], keep=0, append=[*run.messages, extra])
    (loaded,) = store.load_runs("s")
    assert loaded.run.turns[1].warnings == ["budget: 80 % of tokens spent"]
    assert store.load_history("s") == [*run.messages, extra]


def test_a_session_s_next_run_drops_the_texts_of_a_run_that_never_ended(store: Backend) -> None:
    run = make_run("r3")
    _written(store, run)
    assert set(store._texts) == {"r3"}
    store.begin_run("s", make_run("r4"))
    assert set(store._texts) == {"r4"}


def test_a_record_without_texts_and_with_them_are_the_same_json_value() -> None:
    run = make_run("r5")
    texts = RunTexts("s")
    for message in run.messages:
        texts.message(message)
    for turn in run.turns:
        texts.turn(turn)
    assert json.loads(record_json(run, texts)) == json.loads(record_json(run, None))
    empty = Run(id="r6", input="x")
    assert json.loads(record_json(empty, RunTexts(None))) == json.loads(record_json(empty, None))


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (sqlite3.OperationalError("disk I/O error"), "writing failed: OperationalError"),
        (KeyError("record"), "writing: a stored record is unreadable: KeyError"),
    ],
)
def test_the_boundary_turns_foreign_errors_into_memory_backend_errors(
    tmp_path: Path, raised: Exception, said: str
) -> None:
    store = SQLiteStore(tmp_path / "b.db")
    with pytest.raises(MemoryBackendError, match=said) as caught:
        with store.transaction("writing") as tx:
            tx.run("INSERT INTO agentloop_meta VALUES ('k', 'v')")
            raise raised
    assert caught.value.__cause__ is raised
    with store.transaction("reading") as tx:  # rolled back, and the lock is free again
        assert tx.rows("SELECT value FROM agentloop_meta WHERE key = 'k'") == []
    store.close()


def test_an_interrupt_passes_through_the_boundary_as_it_is(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "b.db")
    with pytest.raises(KeyboardInterrupt):
        with store.transaction("writing") as tx:
            tx.run("INSERT INTO agentloop_meta VALUES ('k', 'v')")
            raise KeyboardInterrupt
    with pytest.raises(MemoryBackendError, match="writing failed: IntegrityError"):
        with store.transaction("writing") as tx:  # a driver error inside the statement
            tx.run("INSERT INTO agentloop_meta VALUES ('schema_version', 'x')")
    store.close()
    with pytest.raises(MemoryBackendError, match="reading: the store is closed"):
        with store.transaction("reading"):
            pass


def test_a_journaled_reply_is_encoded_once_and_reads_back_as_plain_data(store: Backend) -> None:
    run = make_run("r7")
    store.begin_run("s", run)
    reply = run.messages[1]
    value = {"message": reply, "usage": {"input_tokens": 3}, "model": "m", "stop_reason": None}
    store.save_step("s", run.id, "t0/reply", value)
    assert store.load_steps(run.id)["t0/reply"] == {**value, "message": reply.to_dict()}
    texts = store._texts[run.id]
    assert texts.messages[id(reply)][0] is reply  # the turn's row reuses it
    store.save_step("s", run.id, "t0/only", {"message": reply})
    assert store.load_steps(run.id)["t0/only"] == {"message": reply.to_dict()}


def test_a_store_of_its_own_gets_a_journaled_reply_as_plain_data(tmp_path: Path) -> None:
    from agentloop.store._session import SessionRecorder

    steps: list[object] = []

    class OwnStore:  # a DurableStore of its own: an SQLiteStore's calls, the steps recorded
        def __init__(self, inner: SQLiteStore) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def save_step(self, session_id: str, run_id: str, key: str, value: Any) -> None:
            steps.append(json.loads(json.dumps(value)))  # plain JSON data, or it raises

    recorder = SessionRecorder(OwnStore(SQLiteStore(tmp_path / "o.db")), "s")
    assert recorder.durable is not None
    message = Message.user("hi")
    recorder.step("r", "t0/reply", {"message": message, "model": "m"})
    assert steps == [{"message": message.to_dict(), "model": "m"}]
