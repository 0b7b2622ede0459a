"""Damaged store records: each one a ``MemoryBackendError`` naming the run and the field.

Rows are damaged behind the store's back (``sqlite3`` and ``psycopg`` directly), the way a disk,
a hand edit or a foreign writer would, then read through every public reader: ``Agent.resume``,
``store.load_runs``/``load_run``/``scan_runs``, ``agentloop runs`` and ``agentloop runs show``.
Nothing escapes as a bare ``AttributeError``/``KeyError``/``TypeError``; the CLI prints one
line per damaged record and still lists the readable runs.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, tool
from agentloop.cli import main
from agentloop.errors import InvalidInput, MemoryBackendError, ProviderUnavailable
from agentloop.run import Run, Turn, error_from_dict
from agentloop.store import PostgresStore, SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

_CONTRACT = Path(__file__).with_name("test_store_contract.py")
_spec = importlib.util.spec_from_file_location("_store_contract_fixtures", _CONTRACT)
assert _spec is not None and _spec.loader is not None
_contract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_contract)
postgres_dsn = _contract.postgres_dsn  # the same throwaway PostgreSQL server


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


Execute = Callable[[str, tuple[Any, ...]], None]
Backend = SQLiteStore | PostgresStore  # both scan_runs, which the Store protocol does not ask for


@pytest.fixture(params=["sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Callable[[], Backend], Execute]]:
    """Opens the store, and runs raw SQL on its backing data (``?`` placeholders)."""
    opened: list[Backend] = []
    if request.param == "sqlite":
        path = tmp_path / "agentloop.db"

        def factory() -> Backend:
            return SQLiteStore(path)

        def execute(sql: str, params: tuple[Any, ...]) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(sql, params)
    else:
        import psycopg

        dsn = request.getfixturevalue("postgres_dsn")
        PostgresStore(dsn).close()
        _contract._truncate(dsn)

        def factory() -> Backend:
            return PostgresStore(dsn)

        def execute(sql: str, params: tuple[Any, ...]) -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.replace("?", "%s"), params)

    def opener() -> Backend:
        opened.append(factory())
        return opened[-1]

    yield opener, execute
    for store in opened:
        store.close()


def two_runs(opener: Callable[[], Backend]) -> tuple[str, str]:
    """Session ``s``: a completed run with a tool call, then one that failed with a 502."""
    store = opener()
    agent = Agent(
        ScriptedModel(
            [call("read_file", {"path": "a"}), reply("all done"), ProviderUnavailable("502")]
        ),
        tools=[read_file],
        store=store,
        session_id="s",
    )
    first = agent.run_sync("read a")
    with pytest.raises(ProviderUnavailable):
        agent.run_sync("again")
    return first.id, agent.runs[-1].id


def record_of(execute: Execute, opener: Callable[[], Backend], run_id: str) -> dict[str, Any]:
    stored = opener().load_run(run_id)
    assert stored is not None
    return stored.run.to_dict()


def damage_record(execute: Execute, run_id: str, record: object) -> None:
    text = record if isinstance(record, str) else json.dumps(record)
    execute("UPDATE agentloop_runs SET record = ? WHERE run_id = ?", (text, run_id))


# Each damage: how to change the second run's record, and the field the error must name.
def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], Any]:
    def change(record: dict[str, Any]) -> Any:
        target: Any = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return record

    return change


RECORD_DAMAGE: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("an array", lambda r: "[]", "record: expected an object, got an array"),
    ("a number", lambda r: "5", "record: expected an object, got an integer"),
    ("a string", lambda r: '"text"', "record: expected an object, got a string"),
    ("not JSON", lambda r: "{not json", "record: not JSON"),
    ("deep JSON", lambda r: "[" * 100_000 + "]" * 100_000, "record: not JSON"),
    ("usage a string", _set(("usage",), "abc"), "record: usage: expected an object"),
    ("tokens a string", _set(("usage", "input_tokens"), "abc"), "usage.input_tokens"),
    ("tokens huge", _set(("usage", "output_tokens"), 1e300), "usage.output_tokens"),
    ("tokens negative", _set(("usage", "output_tokens"), -1), "usage.output_tokens"),
    ("stop_reason a string", _set(("stop_reason",), "boom"), "stop_reason: expected an"),
    ("stop_reason no type", _set(("stop_reason",), {"message": "x"}), "stop_reason.type: missing"),
    ("stop_reason type 5", _set(("stop_reason", "type"), 5), "stop_reason.type: expected a str"),
    ("args an object", _set(("stop_reason", "args"), {}), "stop_reason.args"),
    ("attributes a list", _set(("stop_reason", "attributes"), []), "stop_reason.attributes"),
    ("status a string", _set(("stop_reason", "attributes", "status_code"), "x"),
     "stop_reason.attributes.status_code"),
    ("a method replaced", _set(("stop_reason", "attributes", "is_recoverable"), 1),
     "stop_reason.attributes.is_recoverable: would replace"),
    ("phase unknown", _set(("stop_reason", "attributes", "phase"), "moon"),
     "stop_reason.attributes.phase: expected one of"),
    ("attempt_log a dict", _set(("stop_reason", "attributes", "attempt_log"), {}),
     "stop_reason.attributes.attempt_log"),
    ("attempt bad", _set(("stop_reason", "attributes", "attempt_log"), [{"attempt": "x"}]),
     "stop_reason.attributes.attempt_log[0].attempt"),
    ("turns a string", _set(("turns",), "abc"), "turns: expected an array"),
    ("turn a number", _set(("turns",), [5]), "turns[0]: expected an object"),
    ("turn usage", _set(("turns",), [{"index": 0, "model": "m", "tool_calls": [],
                                      "tool_results": [], "usage": []}]), "turns[0].usage"),
    ("turn stop_reason", _set(("turns",), [{"index": 0, "model": "m", "tool_calls": [],
                                            "tool_results": [], "stop_reason": {"a": 1}}]),
     "turns[0].stop_reason: expected a string"),
    ("tool call args", _set(("turns",), [{"index": 0, "model": "m", "tool_results": [],
                                          "tool_calls": [{"id": "c", "name": "t",
                                                          "arguments": 3}]}]),
     "turns[0].tool_calls[0].arguments"),
    ("message not one", _set(("messages",), ["hello"]), "messages[0]: expected an object"),
    ("message role", _set(("messages",), [{"role": "robot", "parts": []}]),
     "messages[0]: not a message"),
    ("message parts", _set(("messages",), [{"role": "user", "parts": "abc"}]),
     "messages[0]: not a message"),
    ("message part kind", _set(("messages",), [{"role": "user", "parts": [{"type": "image"}]}]),
     "messages[0]: not a message"),
    ("id not a string", _set(("id",), 7), "record: id: expected a string"),
    ("another run's id", _set(("id",), "someone-else"), "record: id: 'someone-else'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "field"),
    [pytest.param(change, field, id=name) for name, change, field in RECORD_DAMAGE],
)
def test_a_damaged_run_record_names_the_run_and_the_field(
    backend: tuple[Callable[[], Backend], Execute],
    change: Callable[[dict[str, Any]], Any],
    field: str,
) -> None:
    opener, execute = backend
    good, bad = two_runs(opener)
    damage_record(execute, bad, change(record_of(execute, opener, bad)))
    store = opener()
    for read in (
        lambda: Agent.resume("s", store=store, client=ScriptedModel([])),
        lambda: store.load_runs("s"),
        lambda: store.load_runs(),
        lambda: store.load_run(bad),
    ):
        with pytest.raises(MemoryBackendError) as caught:
            read()
        assert f"run {bad} is damaged" in str(caught.value)
        assert field in str(caught.value)
    scanned = dict(store.scan_runs())
    assert isinstance(scanned[bad], MemoryBackendError)
    readable = scanned[good]
    assert not isinstance(readable, MemoryBackendError) and readable.run.output == "all done"
    stored = store.load_run(good)
    assert stored is not None and stored.run.output == "all done"


def test_a_damaged_history_row_names_the_session_and_the_message(
    backend: tuple[Callable[[], Backend], Execute],
) -> None:
    opener, execute = backend
    two_runs(opener)
    for text, field in [
        ("5", "message 1: expected an object, got an integer"),
        ('{"role": "user", "parts": "abc"}', "message 1: not a message"),
        ('{"parts": []}', "message 1: not a message (KeyError: 'role')"),
        ("{", "message 1: not JSON"),
    ]:
        execute("UPDATE agentloop_history SET message = ? WHERE seq = 1", (text,))
        with pytest.raises(MemoryBackendError) as caught:
            Agent.resume("s", store=opener(), client=ScriptedModel([]))
        assert "the history of session s is damaged" in str(caught.value)
        assert field in str(caught.value)


def test_damaged_turn_rows_of_an_unfinished_run(
    backend: tuple[Callable[[], Backend], Execute],
) -> None:
    opener, execute = backend
    store = opener()
    run = Run(id="r1", input="go", started_at=1.0)
    store.begin_run("s", run)
    good = Turn(index=0, model="m", text="hi")
    store.save_turn("r1", 0, good, [])
    assert store.load_runs("s")[0].run.turns == [good]
    for turn, messages, field in [
        ('{"index": "a", "model": "m", "tool_calls": [], "tool_results": []}', "[]",
         "turn 0: index: expected an integer, got a string"),
        ("[1]", "[]", "turn 0: expected an object, got an array"),
        (json.dumps(good.to_dict()), "{}", "turn 0 messages: expected an array"),
        (json.dumps(good.to_dict()), "[3]", "turn 0 messages[0]: expected an object"),
        (json.dumps(good.to_dict()), "nope", "turn 0 messages: not JSON"),
    ]:  # fmt: skip
        execute("UPDATE agentloop_turns SET turn = ?, messages = ?", (turn, messages))
        with pytest.raises(MemoryBackendError) as caught:
            Agent.resume("s", store=opener(), client=ScriptedModel([]))
        assert "run r1 is damaged" in str(caught.value) and field in str(caught.value)


def test_a_damaged_step_journal_names_the_run_and_the_step(
    backend: tuple[Callable[[], Backend], Execute],
) -> None:
    opener, execute = backend
    store = opener()
    assert isinstance(store, SQLiteStore | PostgresStore)
    store.save_step("s", "r1", "reply:0", {"ok": 1})
    execute("UPDATE agentloop_steps SET value = ?", ("{broken",))
    with pytest.raises(
        MemoryBackendError, match=r"step journal of run r1 is damaged: step reply:0"
    ):
        store.load_steps("r1")


def test_sqlite_columns_of_the_wrong_type(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    _, bad = two_runs(lambda: SQLiteStore(path))
    for sql, field in [
        (
            "UPDATE agentloop_runs SET started_at = 'yesterday' WHERE run_id = ?",
            "column started_at",
        ),
        ("UPDATE agentloop_runs SET absorbed = 'x' WHERE run_id = ?", "column absorbed"),
        ("UPDATE agentloop_runs SET record = x'00ff' WHERE run_id = ?", "record: not JSON"),
        ("UPDATE agentloop_runs SET record = 5 WHERE run_id = ?", "record: expected an object"),
    ]:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE agentloop_runs SET started_at = 1.0, absorbed = 0")
            conn.execute(sql, (bad,))
        store = SQLiteStore(path)
        with pytest.raises(MemoryBackendError) as caught:
            store.load_runs()
        store.close()
        assert f"run {bad} is damaged" in str(caught.value) and field in str(caught.value)


# -- the command line -------------------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_lists_the_readable_runs_and_one_line_per_damaged_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "agentloop.db"
    good, bad = two_runs(lambda: SQLiteStore(path))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE agentloop_runs SET record = '[]' WHERE run_id = ?", (bad,))
    code, out, err = cli(capsys, "runs", "--store", str(path))
    assert code == 1
    assert good[:12] in out and bad[:12] not in out
    assert "all done" in out and "'all done'" not in out
    assert "1 run, 1 damaged record" in out
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("agentloop: MemoryBackendError: ")
    assert f"run {bad} is damaged: record: expected an object" in err
    code, out, err = cli(capsys, "runs", "show", bad, "--store", str(path))
    assert (code, out) == (1, "") and err.count("\n") == 1 and f"run {bad} is damaged" in err
    code, out, err = cli(capsys, "runs", "show", bad[:8], "--store", str(path))
    assert (code, out) == (1, "") and f"run {bad} is damaged" in err
    code, out, err = cli(capsys, "runs", "show", good[:8], "--store", str(path))
    assert code == 0 and "all done" in out and "'all done'" not in out and err == ""


def test_cli_on_postgres_lists_the_readable_runs(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    monkeypatch.setenv("COLUMNS", "200")
    PostgresStore(postgres_dsn).close()
    _contract._truncate(postgres_dsn)
    good, bad = two_runs(lambda: PostgresStore(postgres_dsn))
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE agentloop_runs SET record = '5' WHERE run_id = %s", (bad,))
    params = dict(item.split("=", 1) for item in postgres_dsn.split())
    url = f"postgresql://{params['user']}@{params['host']}:{params['port']}/{params['dbname']}"
    code, out, err = cli(capsys, "runs", "--store", url)
    assert code == 1 and good[:12] in out and "1 run, 1 damaged record" in out
    assert f"run {bad} is damaged" in err and err.count("\n") == 1


# -- from_dict on its own ---------------------------------------------------------------------


def test_from_dict_raises_invalid_input_naming_the_field() -> None:
    for data, field in [
        ([], "expected an object, got an array"),
        ({"input": "x"}, "id: missing"),
        ({"id": "r", "input": "x", "unfinished_input": 3}, "unfinished_input: expected a string"),
        ({"id": "r", "input": "x", "turns": [{"index": 0}]}, "turns[0].model: missing"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            Run.from_dict(data)  # type: ignore[arg-type]
        assert field in str(caught.value)
    with pytest.raises(InvalidInput, match=r"usage\.output_tokens: expected a non-negative"):
        Turn.from_dict({"index": 0, "model": "m", "tool_calls": [], "tool_results": [],
                        "usage": {"output_tokens": True}})  # fmt: skip
    with pytest.raises(InvalidInput, match="type: expected a string, got null"):
        error_from_dict({"type": None})
    unknown = error_from_dict({"type": "FromTheFuture", "message": "new"})
    assert type(unknown).__name__ == "InternalError" and str(unknown) == "new"


def test_a_safety_state_missing_its_parts_is_a_memory_backend_error(tmp_path: Path) -> None:
    import sqlite3

    from agentloop import Agent
    from agentloop.errors import MemoryBackendError
    from agentloop.store import SQLiteStore
    from agentloop.testing import ScriptedModel, reply

    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    agent = Agent(ScriptedModel([reply("ok")]), store=store)
    agent.run_sync("go")
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(agentloop_sessions)")]
        safety = next(c for c in columns if "safety" in c)
        db.execute(f"UPDATE agentloop_sessions SET {safety} = ?", ('{"format": 1}',))
    with pytest.raises(MemoryBackendError, match="stored safety state is unreadable: KeyError"):
        Agent.resume(agent.session_id, store=SQLiteStore(path), client=ScriptedModel([]))
