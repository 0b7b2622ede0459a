"""One contract suite for every ``Store``: SQLite on a temp file, and PostgreSQL for real.

The PostgreSQL leg starts a throwaway server from the machine's binaries (``initdb``,
``pg_ctl``) on 127.0.0.1 for the session, or uses ``AGENTLOOP_TEST_POSTGRES_DSN``; it skips with
the reason when psycopg or a server is unavailable.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import errors
from agentloop.errors import (
    AgentLoopError,
    AttemptRecord,
    ConfigurationError,
    FailurePhase,
    InvalidInput,
    MemoryBackendError,
)
from agentloop.messages import (
    DocumentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from agentloop.run import Run, Turn
from agentloop.store import DurableStore, PostgresStore, SQLiteStore, Store, StoredRun

Opener = Callable[[], Store]

# -- a throwaway PostgreSQL server ------------------------------------------------------------

_PG_DIRS = ("/usr/local/bin", "/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin",
            "/usr/lib/postgresql/15/bin")  # fmt: skip


def _pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for directory in _PG_DIRS:
        candidate = Path(directory) / name
        if candidate.is_file():
            return str(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _as_server_user(argv: list[str]) -> list[str]:
    """initdb refuses to run as root: run the server as ``nobody`` then."""
    if os.geteuid() != 0:
        return argv
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("PostgreSQL: running as root without runuser to drop privileges")
    return [runuser, "-u", "nobody", "--", *argv]


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    pytest.importorskip("psycopg", reason="PostgresStore tests need psycopg 3 (the postgres extra)")
    if dsn := os.environ.get("AGENTLOOP_TEST_POSTGRES_DSN"):
        yield dsn
        return
    initdb, pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL: no initdb/pg_ctl binaries to start a throwaway server")
    root = Path(tempfile.mkdtemp(prefix="agentloop-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "nobody")
    data, port = root / "data", _free_port()
    options = f"-h 127.0.0.1 -p {port} -k {root} -F -c fsync=off -c full_page_writes=off"
    try:
        _server_step([initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync"])
        _server_step([pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w",
                      "-t", "30", "start"])  # fmt: skip
        yield f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    finally:
        if (data / "postmaster.pid").exists():
            _server_step([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], check=False)
        shutil.rmtree(root, ignore_errors=True)


def _server_step(argv: list[str], *, check: bool = True) -> None:
    try:
        done = subprocess.run(
            _as_server_user(argv), capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"PostgreSQL: {Path(argv[0]).name} failed: {exc}")
    if check and done.returncode != 0:
        pytest.skip(f"PostgreSQL: {Path(argv[0]).name} failed: {done.stderr.strip()[:300]}")


def _truncate(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE agentloop_runs, agentloop_turns, agentloop_history, agentloop_sessions, "
            "agentloop_steps, agentloop_resumptions"
        )


# -- the parametrized store -------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a store on the same backing data each time (a reopen); closes them all after."""
    opened: list[Store] = []
    if request.param == "sqlite":
        path = tmp_path / "agentloop.db"

        def factory() -> Store:
            return SQLiteStore(path)
    else:
        dsn = request.getfixturevalue("postgres_dsn")

        def factory() -> Store:
            return PostgresStore(dsn)

        PostgresStore(dsn).close()  # the tables exist
        _truncate(dsn)

    def opener() -> Store:
        store = factory()
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Opener) -> Store:
    return open_store()


# -- data -------------------------------------------------------------------------------------


def user(text: str) -> Message:
    return Message.user(text)


def tool_turn(n: int) -> tuple[Turn, list[Message]]:
    call = ToolCallPart(f"call_{n}", "read_file", {"path": f"src/{n}.rs", "nested": {"k": [1, 2]}})
    result = ToolResultPart(f"call_{n}", "read_file", f"contents {n} — ünïcödé \x00 [b]", n == 1)
    turn = Turn(
        index=n,
        model="m",
        tool_calls=[call],
        tool_results=[result],
        usage=Usage(10 + n, 2),
        stop_reason="tool_use",
        text=f"thinking {n}",
    )
    return turn, [Message.assistant(f"thinking {n}", [call]), Message.tool_results([result])]


def make_run(run_id: str, stop: AgentLoopError | None = None, turns: int = 2) -> Run:
    run = Run(id=run_id, input=f"task {run_id}", started_at=1000.5, ended_at=1002.25)
    run.messages.append(Message.from_input(run.input))
    for n in range(turns):
        turn, messages = tool_turn(n)
        run.turns.append(turn)
        run.messages.extend(messages)
        run.usage = run.usage + turn.usage
    run.stop_reason = stop
    run.output = "done" if stop is None else None
    run.unfinished_input = run.input if isinstance(stop, errors.ContextExceeded) else None
    return run


def provider_error() -> errors.ProviderError:
    error = errors.RateLimited(
        "429 too many requests",
        provider="openai",
        status_code=429,
        retry_after=1.5,
        request_id="req_123",
        phase=FailurePhase.STATUS,
        request_sent=True,
        redirect_host=None,
        body='{"error": "slow down"}',
    )
    error.attempts = 3
    error.retry_wait_seconds = 2.5
    error.attempt_log = (
        AttemptRecord(1, "ProviderUnavailable", None, FailurePhase.CONNECT, False, 0.01, 0.5),
        AttemptRecord(2, "RateLimited", 429, FailurePhase.STATUS, True, 0.02, 2.0),
        AttemptRecord(3, "RateLimited", 429, None, None, 0.03),
    )
    return error


STOP_REASONS: list[Any] = [
    None,
    provider_error(),
    errors.AuthError("OPENAI_API_KEY is not set", provider="openai"),
    errors.ContextLengthExceeded("prompt is too long", status_code=400),
    errors.RateLimitEscalation(5, 30.0, provider="anthropic"),
    errors.StreamError("stream broke", partial=Message.assistant("half an ans"), status_code=200),
    errors.UnexpectedRedirect("302", status_code=302, redirect_host="evil.example"),
    errors.ProviderUnreachable("dns", phase="connect", request_sent=False),
    errors.ContextExceeded(9001, 8000),
    errors.CompactionFailed(9001, 8000, cause=RuntimeError("compactor broke")),
    errors.CompactionStalled(7000, 7000),
    errors.MaxTurnsExceeded(200),
    errors.BudgetExhausted("cost", 1.25, 1.0),
    errors.LoopBudgetExceeded("deadline", 60.0, 61.5),
    errors.LoopDetected("Loop detected: read_file repeated 5 times"),
    errors.UserInputRequired("which file?"),
    errors.ToolLimitReached("Session tool limit of 100 reached"),
    errors.ToolRecoveryExhausted("flaky", 6),
    errors.FallbackExhausted(12.0),
    errors.Cancelled(),
    errors.MemoryBackendError("disk full"),
    errors.PhaseFailed("plan", "no plan"),
    errors.LockPoisoned("breaker"),
    errors.InternalError("bug"),
    errors.TranscriptError("message 3 (tool): orphan result", index=3),
    errors.ConfigurationError("bad", field="max_turns"),
    errors.ReflectionError("reflector raised"),
    errors.ToolNotFound("x", ["a", "b"]),
    errors.ToolExecutionError("x", "boom"),
    errors.InvalidInput("not a str"),
]


# -- the contract -----------------------------------------------------------------------------


def test_an_empty_store(store: Store) -> None:
    assert isinstance(store, Store)
    assert not store.has_session("s")
    assert store.load_history("s") == []
    assert store.load_runs() == [] and store.load_runs("s") == []
    assert store.load_run("nope") is None


def test_history_round_trips_and_appends(store: Store) -> None:
    _, messages = tool_turn(0)
    first = [user("hello"), *messages, Message.assistant("done")]
    store.finish_runs("s", [], keep=0, append=first)
    assert store.load_history("s") == first
    assert store.has_session("s")
    later = [user("again"), Message.assistant("sure")]
    store.finish_runs("s", [], keep=len(first), append=later)
    assert store.load_history("s") == first + later
    store.finish_runs("s", [], keep=1, append=[Message.assistant("rewritten")])
    assert store.load_history("s") == [first[0], Message.assistant("rewritten")]
    store.finish_runs("s", [], keep=0, append=[])
    assert store.load_history("s") == []


def test_keep_beyond_the_stored_history_fails_and_writes_nothing(store: Store) -> None:
    store.finish_runs("s", [], keep=0, append=[user("one")])
    with pytest.raises(MemoryBackendError, match="has 1 messages, expected at least 3"):
        store.finish_runs("s", [make_run("r1")], keep=3, append=[user("lost")])
    assert store.load_history("s") == [user("one")]
    assert store.load_run("r1") is None


@pytest.mark.parametrize(
    "stop", STOP_REASONS, ids=lambda e: "completed" if e is None else type(e).__name__
)
def test_runs_round_trip_with_every_stop_reason(store: Store, stop: AgentLoopError | None) -> None:
    run = make_run("r1", stop)
    store.begin_run("s", run)
    store.finish_runs("s", [run], keep=0, append=run.messages)
    loaded = store.load_run("r1")
    assert loaded is not None and loaded.finished and loaded.session_id == "s"
    assert loaded.run == run
    assert (loaded.run.started_at, loaded.run.ended_at) == (1000.5, 1002.25)
    assert_same_error(loaded.run.stop_reason, stop)
    assert store.load_runs("s") == [loaded]


def assert_same_error(got: AgentLoopError | None, want: AgentLoopError | None) -> None:
    if want is None:
        assert got is None
        return
    assert type(got) is type(want)
    assert str(got) == str(want) and got.args == _json_args(want.args)
    assert got.is_recoverable() == want.is_recoverable()
    assert got.recoverability == want.recoverability
    wanted = want.attributes()
    if isinstance(want, errors.CompactionFailed):
        wanted["cause"] = "RuntimeError: compactor broke"
    assert got.attributes() == wanted


def _json_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    plain = [f"{type(a).__name__}: {a}" if isinstance(a, BaseException) else a for a in args]
    return tuple(list(a) if isinstance(a, tuple) else a for a in plain)


def test_provider_error_attributes_and_attempt_log_survive(store: Store) -> None:
    run = make_run("r1", provider_error())
    store.finish_runs("s", [run], keep=0, append=[])
    loaded = store.load_run("r1")
    assert loaded is not None
    error = loaded.run.stop_reason
    assert isinstance(error, errors.RateLimited)
    assert (error.status_code, error.retry_after, error.request_id) == (429, 1.5, "req_123")
    assert error.phase is FailurePhase.STATUS and error.request_sent is True
    assert (error.attempts, error.retry_wait_seconds) == (3, 2.5)
    assert error.attempt_log[0] == AttemptRecord(
        1, "ProviderUnavailable", None, FailurePhase.CONNECT, False, 0.01, 0.5
    )
    assert [r.phase for r in error.attempt_log] == [FailurePhase.CONNECT, FailurePhase.STATUS, None]


def test_turns_append_while_a_run_has_no_recorded_end(store: Store) -> None:
    run = Run(id="r1", input="task", started_at=5.0)
    store.begin_run("s", run)
    pending = store.load_run("r1")
    assert pending == StoredRun("s", pending.run, finished=False, absorbed=0) if pending else None
    assert pending is not None and pending.run.turns == [] and pending.run.messages == []
    turn0, messages0 = tool_turn(0)
    turn1, messages1 = tool_turn(1)
    store.save_turn("r1", 0, turn0, [user("task"), *messages0])
    store.save_turn("r1", 1, turn1, messages1)
    loaded = store.load_run("r1")
    assert loaded is not None and not loaded.finished and loaded.absorbed == 0
    assert loaded.run.turns == [turn0, turn1]
    assert loaded.run.messages == [user("task"), *messages0, *messages1]
    assert loaded.run.usage == turn0.usage + turn1.usage
    assert loaded.run.stop_reason is None and loaded.run.output is None
    assert loaded.run.started_at == 5.0 and loaded.run.ended_at is None
    with pytest.raises(MemoryBackendError) as info:
        store.save_turn("r1", 1, turn1, messages1)  # a turn is written once
    assert info.value.__cause__ is not None


def test_finishing_a_run_replaces_its_turn_rows_with_the_record(store: Store) -> None:
    run = make_run("r1")
    store.begin_run("s", Run(id="r1", input=run.input, started_at=run.started_at))
    turn0, messages0 = tool_turn(0)
    store.save_turn("r1", 0, turn0, messages0)
    store.finish_runs("s", [run], keep=0, append=run.messages)
    loaded = store.load_run("r1")
    assert loaded is not None and loaded.finished and loaded.run == run
    assert store.load_runs("s") == [loaded]


def test_begin_run_twice_is_a_backend_error_from_the_driver(store: Store) -> None:
    run = Run(id="r1", input="x")
    store.begin_run("s", run)
    with pytest.raises(MemoryBackendError, match="saving the start of run r1") as info:
        store.begin_run("s", run)
    assert not isinstance(info.value.__cause__, AgentLoopError)
    assert info.value.__cause__ is not None


def test_a_compaction_commit_rewrites_history_and_records_what_it_absorbed(store: Store) -> None:
    store.finish_runs("s", [], keep=0, append=[user("old"), Message.assistant("older")])
    store.begin_run("s", Run(id="r1", input="task"))
    store.commit_compaction("s", "r1", [user("summary")], 3)
    assert store.load_history("s") == [user("summary")]
    loaded = store.load_run("r1")
    assert loaded is not None and loaded.absorbed == 3 and not loaded.finished


def test_two_sessions_are_isolated(store: Store) -> None:
    a, b = make_run("ra"), make_run("rb", errors.Cancelled())
    store.begin_run("A", a)
    store.begin_run("B", b)
    store.finish_runs("A", [a], keep=0, append=[user("for A")])
    store.finish_runs("B", [b], keep=0, append=[user("for B"), Message.assistant("b")])
    assert store.load_history("A") == [user("for A")]
    assert store.load_history("B") == [user("for B"), Message.assistant("b")]
    assert [s.run.id for s in store.load_runs("A")] == ["ra"]
    assert [s.run.id for s in store.load_runs("B")] == ["rb"]
    assert [(s.session_id, s.run.id) for s in store.load_runs()] == [("A", "ra"), ("B", "rb")]
    store.commit_compaction("A", "ra", [user("A only")], 1)
    assert store.load_history("B") == [user("for B"), Message.assistant("b")]
    assert not store.has_session("C")


def test_runs_load_in_the_order_they_started(store: Store) -> None:
    ids = ["z", "a", "m", "b"]
    for run_id in ids:
        store.begin_run("s", Run(id=run_id, input=run_id))
    store.finish_runs("s", [make_run("a"), make_run("z")], keep=0, append=[])
    assert [s.run.id for s in store.load_runs("s")] == ids
    assert [s.finished for s in store.load_runs("s")] == [True, True, False, False]


def test_reopening_finds_everything(open_store: Opener) -> None:
    first = open_store()
    run = make_run("r1", provider_error())
    store_history = [user("hi"), Message.assistant("hello")]
    first.begin_run("s", run)
    first.finish_runs("s", [run], keep=0, append=store_history)
    first.begin_run("s", Run(id="r2", input="next", started_at=7.0))
    turn, messages = tool_turn(0)
    first.save_turn("r2", 0, turn, messages)
    first.close()
    second = open_store()
    assert second.has_session("s")
    assert second.load_history("s") == store_history
    loaded = second.load_runs("s")
    assert [s.run.id for s in loaded] == ["r1", "r2"]
    assert loaded[0].run == run and loaded[0].run.started_at == 1000.5
    assert loaded[1].run.turns == [turn] and loaded[1].run.started_at == 7.0


def test_text_survives_byte_for_byte(store: Store) -> None:
    odd = ["", "emoji 🧪", "nul \x00 byte", "quote ' \" \\", "nan-ish NaN", "%s ? $1"]
    messages = [Message("user", tuple(TextPart(t) for t in odd))]
    store.finish_runs("s", [], keep=0, append=messages)
    assert store.load_history("s") == messages
    run = make_run("r1", errors.BudgetExhausted("cost", math.inf, 1.0))
    store.finish_runs("s", [run], keep=1, append=[])
    loaded = store.load_run("r1")
    assert loaded is not None and loaded.run == run


def test_a_record_that_cannot_be_encoded_is_a_memory_backend_error(store: Store) -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    turn = Turn(index=0, model="m", tool_calls=[ToolCallPart("c", "x", loop)])
    with pytest.raises(MemoryBackendError, match="cannot be written as JSON"):
        store.save_turn("r1", 0, turn, [])
    with pytest.raises(MemoryBackendError, match="cannot be written as JSON"):
        store.finish_runs("s", [Run(id="r1", input="x", turns=[turn])], keep=0, append=[])
    assert store.load_runs() == []


def test_a_closed_store_raises_memory_backend_error(open_store: Opener) -> None:
    store = open_store()
    store.close()
    store.close()  # idempotent
    with pytest.raises(MemoryBackendError, match="closed"):
        store.load_history("s")


# -- backend specifics ------------------------------------------------------------------------


def test_sqlite_uses_wal_and_validates_its_options(tmp_path: Path) -> None:
    import sqlite3

    with SQLiteStore(tmp_path / "x.db") as store:
        store.finish_runs("s", [], keep=0, append=[user("x")])
    with contextlib.closing(sqlite3.connect(tmp_path / "x.db")) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(ConfigurationError, match="synchronous"):
        SQLiteStore(tmp_path / "y.db", synchronous="SOMETIMES")


def test_sqlite_that_cannot_open_is_a_memory_backend_error(tmp_path: Path) -> None:
    with pytest.raises(MemoryBackendError, match="SQLiteStore") as info:
        SQLiteStore(tmp_path / "missing-dir" / "x.db")
    assert info.value.__cause__ is not None


def test_postgres_unreachable_is_a_memory_backend_error() -> None:
    pytest.importorskip("psycopg", reason="needs psycopg 3")
    dsn = f"host=127.0.0.1 port={_free_port()} user=nobody dbname=nothing password=hunter2"
    with pytest.raises(MemoryBackendError, match="cannot connect") as info:
        PostgresStore(dsn, connect_timeout=2)
    assert "hunter2" not in str(info.value)
    assert info.value.__cause__ is not None


def test_postgres_without_psycopg_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"agentloop\[postgres\]"):
        PostgresStore("host=127.0.0.1")


def test_import_agentloop_store_does_not_import_psycopg() -> None:
    code = "import sys, agentloop, agentloop.store; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- durability: safety state, step journal, leases, reopening ---------------------------------


def test_durable_rows_round_trip(open_store: Opener) -> None:
    store = open_store()
    assert isinstance(store, DurableStore)
    run = Run(id="r1", input="go", started_at=1.0)
    store.begin_run("s", run, safety={"format": 1, "n": [1, 2]})
    assert store.load_safety("s") == {"format": 1, "n": [1, 2]}
    store.save_step("s", "r1", "t0/reply", {"x": 1})
    store.save_step("s", "r1", "t0/reply", {"x": 2})
    assert store.load_steps("r1") == {"t0/reply": {"x": 2}}
    assert store.claim("s", "me:1", 100.0, now=50.0) is None
    assert store.claim("s", "you:2", 100.0, now=60.0) == "me:1"
    assert store.claim("s", "you:2", 200.0, now=60.0, replace="me:1") is None
    assert store.claim("s", "me:1", 300.0, now=250.0) is None  # expired
    store.release("s", "you:2")  # not the holder: nothing
    assert store.claim("s", "you:2", 400.0, now=260.0) == "me:1"
    store.release("s", "me:1")
    assert store.claim("s", "you:2", 400.0, now=260.0) is None
    turn = Turn(index=0, model="m")
    messages = [Message.user("go"), Message.assistant("hi")]
    store.save_turn("r1", 0, turn, messages, session_id="s", safety={"format": 1})
    run.turns, run.messages = [turn], messages
    store.finish_runs("s", [run], keep=0, append=messages, release="you:2")
    reopened = open_store()
    assert isinstance(reopened, DurableStore)
    reopened.reopen_run("s", run, keep=0, at=5.0)
    [stored] = reopened.load_runs("s")
    assert not stored.finished and stored.resumptions == ((5.0, 1),)
    assert stored.run.messages == messages and reopened.load_history("s") == []
    assert reopened.load_steps("r1") == {"t0/reply": {"x": 2}}  # kept for the continued run


def test_reasoning_parts_and_counts_round_trip_exactly(store: Store) -> None:
    """SPEC 16: a ThinkingPart (signature, redacted, provider, id) and reasoning tokens survive."""
    call = ToolCallPart("call_r", "read_file", {"path": "a"})
    thinking = Message(
        "assistant",
        (
            ThinkingPart("I should read a", signature="sig-" + "x" * 500, provider="anthropic"),
            ThinkingPart("", signature="opaque-data", redacted=True, provider="anthropic"),
            ThinkingPart("summary", signature="enc", provider="openai", id="rs_9"),
            ThinkingPart("", signature="g\u00e9mini", provider="gemini"),
            call,
        ),
    )
    image = ImagePart(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64)  # media too (SPEC 16)
    pdf = DocumentPart(b"%PDF-1.7\n" + bytes(range(256)))
    messages = [
        Message("user", (TextPart("go"), image)),
        thinking,
        Message.tool_results([ToolResultPart("call_r", "read_file", "a", media=(pdf,))]),
    ]
    turn = Turn(index=0, model="m", tool_calls=[call], usage=Usage(5, 9, reasoning_tokens=7))
    run = Run(id="rr", input=("go", image), turns=[turn], messages=messages, usage=turn.usage)
    store.begin_run("s", run)
    store.finish_runs("s", [run], keep=0, append=messages)
    assert store.load_history("s") == messages
    [stored] = store.load_runs("s")
    assert stored.run.messages == messages and stored.run.usage.reasoning_tokens == 7
    back = stored.run.messages[0].parts[1]
    assert isinstance(back, ImagePart) and back.data == image.data and back.sha256 == image.sha256
    assert stored.run.input == ("go", image)


def test_lone_surrogates_and_nul_are_always_writable(store: Store) -> None:
    """A provider's half emoji, a surrogate in tool arguments or a typed answer (issue 25, 4)."""
    assert isinstance(store, DurableStore)
    half = "half an emoji \ud83d"
    call = ToolCallPart("call_\udc80", "read_file", {"path": "caf\udce9.txt", "\ud800": 1})
    result = ToolResultPart("call_\udc80", "read_file", "read \udfff", False)
    turn = Turn(index=0, model="m", tool_calls=[call], tool_results=[result], text=half)
    run: Run[Any] = Run(id="r1", input="task \ud800 with a nul \x00", started_at=1.0, ended_at=2.0)
    messages = [Message.assistant(half, [call]), Message.tool_results([result])]
    run.messages.extend([Message.from_input(run.input), *messages])
    run.turns.append(turn)
    run.output = {"answer": "typed \udbff"}
    store.begin_run("s", run, safety={"note": half})
    store.save_turn("r1", 0, turn, messages, session_id="s", safety={"note": half})
    store.save_step("s", "r1", "call_\udc80", {"output": half})
    assert store.load_steps("r1") == {"call_\\udc80": {"output": half}}
    assert store.load_safety("s") == {"note": half}
    store.finish_runs("s", [run], keep=0, append=run.messages)
    loaded = store.load_run("r1")
    assert loaded is not None and loaded.run == run
    assert store.load_history("s") == run.messages


def test_postgres_read_only_creates_nothing_and_refuses_writes(postgres_dsn: str) -> None:
    import psycopg

    PostgresStore(postgres_dsn).close()
    store = PostgresStore(postgres_dsn, read_only=True)
    try:
        with pytest.raises(MemoryBackendError, match="read-only"):
            store.begin_run("s", Run(id="r-ro", input="x"))
    finally:
        store.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS foreign_app")
        conn.execute("CREATE TABLE IF NOT EXISTS foreign_app.notes (body TEXT)")
    other = psycopg.conninfo.make_conninfo(postgres_dsn, options="-csearch_path=foreign_app")
    with pytest.raises(MemoryBackendError, match="not an agentloop store"):
        PostgresStore(other, read_only=True)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'foreign_app'"
        ).fetchall()
        conn.execute("DROP SCHEMA foreign_app CASCADE")
    assert tables == [("notes",)]


# -- session ids a store cannot keep (issue 32, item 9) ----------------------------------------

BAD_SESSION_IDS = [
    ("\ud800", "U+D800, a lone surrogate"),
    ("user-\udcff", "U+DCFF, a lone surrogate"),
    ("a\x00b", "U+0000, a control character"),
    ("user-42\n", "strip() it"),
    ("", "leave it out (None) for a new id"),
    (42, "must be a str such as 'user-42', got int"),
]


@pytest.mark.parametrize(("session_id", "fix"), BAD_SESSION_IDS, ids=lambda v: ascii(v))
def test_a_session_id_the_store_cannot_keep_is_refused_before_anything_runs(
    store: Store, session_id: Any, fix: str
) -> None:
    """A lone surrogate used to end the run ``MemoryBackendError`` after the model ran."""
    from agentloop import Agent
    from agentloop.testing import ScriptedModel, reply

    model = ScriptedModel([reply("paid for")])
    agent = Agent(model, store=store)
    starts = (
        lambda: agent.session(session_id),
        lambda: Agent(model, store=store, session_id=session_id),
        lambda: Agent(model, session_id=session_id),  # no store: the same id must fit one later
        lambda: Agent.resume(session_id, store=store, client=model),
    )
    for start in starts:
        with pytest.raises(InvalidInput) as caught:
            start()
        assert fix in str(caught.value)
        str(caught.value).encode("utf-8")  # the message itself can be printed and logged
    assert model.requests == [] and store.load_runs() == []
    agent.close()


def test_ordinary_session_ids_still_round_trip(store: Store) -> None:
    from agentloop import Agent
    from agentloop.testing import ScriptedModel, reply

    ids = ["user-42", "tenant:7/thread#3", "Grüße 🎉", "550e8400-e29b-41d4-a716-446655440000"]
    agent = Agent(ScriptedModel([reply("ok")] * len(ids)), store=store)
    for session_id in ids:
        assert agent.session(session_id).run_sync("hi").output == "ok"
    agent.close()
    again = Agent(ScriptedModel([]), store=store)
    assert [len(again.session(i).history) for i in ids] == [2] * len(ids)
    again.close()
