"""An Agent with a store, end to end: every commit point persists, and resume rebuilds the agent.

Runs use ``ScriptedModel`` and an ``SQLiteStore`` on a temp file; "resume" always opens a fresh
store on the same file, as a new process would. A real crash is a subprocess that ``os._exit``s
inside a tool; the other exits (SystemExit, task cancellation, store failures) finalize.
"""

from __future__ import annotations

import asyncio
import logging
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Message, RunConfig, tool
from agentloop.cli import main
from agentloop.errors import (
    Cancelled,
    ConfigurationError,
    ContextLengthExceeded,
    FailurePhase,
    InternalError,
    MemoryBackendError,
    ProviderUnavailable,
)
from agentloop.store import SQLiteStore, Store
from agentloop.store._session import CRASHED_TEXT
from agentloop.testing import ScriptedModel, call, reply
from agentloop.tokens import TokenCounter
from agentloop.transcript import validate_transcript

ROOT = Path(__file__).resolve().parents[2]


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agentloop.db"


@pytest.fixture
def open_store(db: Path) -> Iterator[Callable[[], SQLiteStore]]:
    opened: list[SQLiteStore] = []

    def opener() -> SQLiteStore:
        opened.append(SQLiteStore(db))
        return opened[-1]

    yield opener
    for store in opened:
        store.close()


def resume(opener: Callable[[], Store], session: str = "s", *steps: Any, **kwargs: Any) -> Agent:
    """A new process's view: a fresh store on the same file."""
    return Agent.resume(
        session, store=opener(), client=ScriptedModel(list(steps)), tools=[read_file], **kwargs
    )


def reads(*paths: str) -> list[Any]:
    return [call("read_file", {"path": p}) for p in paths]


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.role + ":" + (m.text or ",".join(c.name for c in m.tool_calls)) for m in messages]


class FailingStore:
    """Delegates to a real store; the named methods raise ``MemoryBackendError`` while armed."""

    def __init__(self, inner: Store, *failing: str) -> None:
        self.inner = inner
        self.failing = set(failing)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in self.failing:
            return method

        def fail(*args: Any, **kwargs: Any) -> Any:
            raise MemoryBackendError(f"{name} failed (injected)")

        return fail


# -- every commit point persists --------------------------------------------------------------


async def test_a_completed_run_persists_and_resumes(open_store: Callable[[], SQLiteStore]) -> None:
    model = ScriptedModel([*reads("a", "b"), reply("done")])
    agent = Agent(model, tools=[read_file], store=open_store(), session_id="s")
    run = await agent.run("go")
    resumed = resume(open_store)
    assert resumed.session_id == "s" and resumed.store is not None
    assert resumed.history == agent.history and len(resumed.history) == 6
    assert resumed.runs == [run] and resumed.runs[0].output == "done"
    restored = resumed.runs[0]
    assert restored.stop_reason is None and len(restored.turns) == 3
    assert (restored.started_at, restored.ended_at) == (run.started_at, run.ended_at)


async def test_resume_continues_the_conversation(open_store: Callable[[], SQLiteStore]) -> None:
    first = Agent(ScriptedModel([*reads("a"), reply("one")]), tools=[read_file], store=open_store())
    await first.run("first task")
    model = ScriptedModel([reply("two")])
    again = Agent.resume(first.session_id, store=open_store(), client=model, tools=[read_file])
    run = await again.run("second task")
    assert run.output == "two"
    assert list(model.requests[0].messages) == [*first.history, Message.user("second task")]
    third = resume(open_store, first.session_id)
    assert texts(third.history)[-3:] == ["assistant:one", "user:second task", "assistant:two"]
    assert [r.output for r in third.runs] == ["one", "two"]


async def test_a_failed_run_keeps_its_completed_turns_and_its_error(
    open_store: Callable[[], SQLiteStore],
) -> None:
    down = ProviderUnavailable(
        "502 from upstream", status_code=502, provider="openai", phase=FailurePhase.STATUS
    )
    agent = Agent(
        ScriptedModel([*reads("a", "b"), down]),
        tools=[read_file],
        store=open_store(),
        session_id="s",
    )
    with pytest.raises(ProviderUnavailable):
        await agent.run("go")
    resumed = resume(open_store)
    assert resumed.history == agent.history and len(resumed.history) == 5
    validate_transcript(resumed.history)
    error = resumed.runs[0].stop_reason
    assert type(error) is ProviderUnavailable and str(error) == "502 from upstream"
    assert (error.status_code, error.provider, error.phase) == (502, "openai", FailurePhase.STATUS)
    assert error.attempt_log and error.attempt_log[0].error_type == "ProviderUnavailable"
    assert resumed.runs == agent.runs


async def test_cannot_fit_commits_nothing_and_keeps_unfinished_input(
    open_store: Callable[[], SQLiteStore],
) -> None:
    model = ScriptedModel([reply("first"), *reads("a"), ContextLengthExceeded("too long")])
    agent = Agent(
        model,
        tools=[read_file],
        store=open_store(),
        session_id="s",
        config=RunConfig(context_window=0),
    )
    await agent.run("short")
    with pytest.raises(ContextLengthExceeded):
        await agent.run("a very long task")
    resumed = resume(open_store)
    assert texts(resumed.history) == ["user:short", "assistant:first"]
    last = resumed.runs[-1]
    assert isinstance(last.stop_reason, ContextLengthExceeded)
    assert last.unfinished_input == "a very long task"


class CharCounter:
    def count_text(self, text: str) -> int:
        return len(text)

    def count_message(self, message: Message) -> int:
        return len(message.text) + sum(len(r.content) for r in message.tool_results_parts)


class Shrinker:
    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        return [Message.user("summary")]


def compacting() -> RunConfig:
    return RunConfig(context_window=8000, token_counter=CharCounter(), compactor=Shrinker())


async def test_the_compaction_commit_point_persists(open_store: Callable[[], SQLiteStore]) -> None:
    model = ScriptedModel([ProviderUnavailable("down")])
    agent = Agent(model, config=compacting(), store=open_store(), session_id="s")
    with pytest.raises(ProviderUnavailable):
        await agent.run("x" * 7000)
    assert texts(agent.history) == ["user:summary"]
    assert texts(resume(open_store).history) == ["user:summary"]


# -- crashes ----------------------------------------------------------------------------------

CRASH_SCRIPT = '''
import asyncio, os, sys
from agentloop import Agent, tool
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"

@tool
async def crash() -> str:
    """Die the way a killed process dies: no finalize, no cleanup."""
    os._exit(3)

steps = [call("read_file", {"path": "a"}), call("read_file", {"path": "b"}), call("crash")]
agent = Agent(ScriptedModel(steps), tools=[read_file, crash], store=SQLiteStore(sys.argv[1]),
              session_id="crashy")
asyncio.run(agent.run("go"))
'''


def test_a_real_crash_loses_at_most_the_in_flight_turn(
    tmp_path: Path, db: Path, open_store: Callable[[], SQLiteStore]
) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(db)], capture_output=True, timeout=60)
    assert done.returncode == 3, done.stderr
    agent = resume(open_store, "crashy", reply("resumed"))
    assert texts(agent.history) == [
        "user:go",
        "assistant:read_file",
        "tool:",
        "assistant:read_file",
        "tool:",
    ]
    validate_transcript(agent.history)
    crashed = agent.runs[0]
    assert type(crashed.stop_reason) is InternalError
    assert str(crashed.stop_reason).startswith(CRASHED_TEXT)
    assert len(crashed.turns) == 2 and crashed.ended_at is None
    again = resume(open_store, "crashy")  # the closure was written back: nothing added twice
    assert again.history == agent.history and again.runs == agent.runs
    run = agent.run_sync("carry on")
    assert run.output == "resumed"


def test_system_exit_in_a_tool_finalizes_and_persists(
    open_store: Callable[[], SQLiteStore],
) -> None:
    @tool
    async def leave() -> str:
        """Exit."""
        raise SystemExit(1)

    model = ScriptedModel([*reads("a"), call("leave"), reply("never")])
    agent = Agent(model, tools=[read_file, leave], store=open_store(), session_id="s")
    with pytest.raises(SystemExit):
        agent.run_sync("go")
    resumed = resume(open_store)
    assert texts(resumed.history) == ["user:go", "assistant:read_file", "tool:"]
    assert isinstance(resumed.runs[0].stop_reason, Cancelled)


async def test_cancelling_the_task_persists_the_completed_turns(
    open_store: Callable[[], SQLiteStore],
) -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never returns."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    model = ScriptedModel([*reads("a"), call("hang")])
    agent = Agent(model, tools=[read_file, hang], store=open_store(), session_id="s")
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    resumed = resume(open_store, "s", reply("ok"))
    assert texts(resumed.history) == ["user:go", "assistant:read_file", "tool:"]
    assert isinstance(resumed.runs[0].stop_reason, Cancelled)
    assert resumed.runs[0].messages[-1].tool_results_parts[0].is_error  # the interrupted call


async def test_a_run_whose_end_was_never_recorded_is_closed_on_resume(
    open_store: Callable[[], SQLiteStore],
) -> None:
    # finish_runs never lands: to the store this is a process that died before finalize
    store = FailingStore(open_store(), "finish_runs")
    agent = Agent(ScriptedModel([*reads("a"), reply("done")]), tools=[read_file], store=store)
    await agent.run("go")
    loaded = open_store().load_runs(agent.session_id)
    assert [s.finished for s in loaded] == [False]
    resumed = resume(open_store, agent.session_id)
    assert resumed.history == agent.history  # its final reply was saved: it had completed
    assert resumed.runs[0].output == "done" and resumed.runs[0].stop_reason is None


async def test_a_crash_after_a_compaction_adds_only_what_came_after_it(
    open_store: Callable[[], SQLiteStore],
) -> None:
    store = FailingStore(open_store(), "finish_runs")
    model = ScriptedModel([*reads("a"), ProviderUnavailable("down")])
    agent = Agent(model, tools=[read_file], config=compacting(), store=store, session_id="s")
    with pytest.raises(ProviderUnavailable):
        await agent.run("x" * 7000)
    resumed = resume(open_store)
    assert texts(resumed.history) == ["user:summary", "assistant:read_file", "tool:"]
    assert resumed.history == agent.history
    assert type(resumed.runs[0].stop_reason) is InternalError


# -- store failures ---------------------------------------------------------------------------


async def test_a_store_failure_at_run_start_fails_the_run(
    open_store: Callable[[], SQLiteStore],
) -> None:
    model = ScriptedModel([reply("never")])
    agent = Agent(model, store=FailingStore(open_store(), "begin_run", "finish_runs"))
    with pytest.raises(MemoryBackendError, match="begin_run failed"):
        await agent.run("go")
    assert model.requests == []
    assert agent.current_run is not None
    assert isinstance(agent.current_run.stop_reason, MemoryBackendError)


async def test_a_store_failure_after_a_turn_ends_the_run_and_keeps_the_turn(
    open_store: Callable[[], SQLiteStore],
) -> None:
    store = FailingStore(open_store(), "save_turn")
    model = ScriptedModel([*reads("a"), reply("never")])
    agent = Agent(model, tools=[read_file], store=store, session_id="s")
    with pytest.raises(MemoryBackendError, match="save_turn failed"):
        await agent.run("go")
    assert texts(agent.history) == ["user:go", "assistant:read_file", "tool:"]
    assert resume(open_store).history == agent.history  # finalize still saved it


async def test_a_store_failure_at_the_compaction_commit_ends_the_run_uncompacted(
    open_store: Callable[[], SQLiteStore],
) -> None:
    store = FailingStore(open_store(), "commit_compaction")
    agent = Agent(ScriptedModel([]), config=compacting(), store=store, session_id="s")
    with pytest.raises(MemoryBackendError, match="commit_compaction failed"):
        await agent.run("x" * 7000)
    assert agent.history == []  # nothing completed, nothing compacted
    assert isinstance(resume(open_store).runs[0].stop_reason, MemoryBackendError)


async def test_a_store_failure_at_finalize_is_logged_and_healed_by_the_next_commit(
    open_store: Callable[[], SQLiteStore], caplog: pytest.LogCaptureFixture
) -> None:
    store = FailingStore(open_store(), "finish_runs")
    model = ScriptedModel([*reads("a"), reply("one"), reply("two")])
    agent = Agent(model, tools=[read_file], store=store, session_id="s")
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        run = await agent.run("first")
    assert run.output == "one"  # the run's own outcome stands
    assert isinstance(agent.persistence_error, MemoryBackendError)
    assert "could not persist run" in caplog.text
    store.failing.clear()
    await agent.run("second")
    assert agent.persistence_error is None
    resumed = resume(open_store)
    assert resumed.history == agent.history
    assert resumed.runs == agent.runs
    assert [s.finished for s in open_store().load_runs("s")] == [True, True]


# -- construction -----------------------------------------------------------------------------


async def test_a_named_session_that_exists_needs_resume(
    open_store: Callable[[], SQLiteStore],
) -> None:
    await Agent(ScriptedModel([reply("hi")]), store=open_store(), session_id="s").run("hello")
    with pytest.raises(ConfigurationError, match=r"Agent\.resume") as info:
        Agent(ScriptedModel([]), store=open_store(), session_id="s")
    assert info.value.field == "session_id"


def test_a_store_must_implement_the_protocol() -> None:
    with pytest.raises(ConfigurationError) as info:
        Agent(ScriptedModel([]), store="agentloop.db")  # type: ignore[call-overload]
    assert info.value.field == "store"


def test_resuming_an_unknown_session_starts_it(open_store: Callable[[], SQLiteStore]) -> None:
    agent = resume(open_store, "new", reply("hi"))
    assert agent.history == [] and agent.runs == []
    agent.run_sync("hello")
    assert texts(resume(open_store, "new").history) == ["user:hello", "assistant:hi"]


async def test_two_sessions_in_one_file_are_isolated(open_store: Callable[[], SQLiteStore]) -> None:
    store = open_store()
    a = Agent(ScriptedModel([reply("for a")]), store=store, session_id="a")
    b = Agent(ScriptedModel([reply("for b")]), store=store, session_id="b")
    await a.run("to a")
    await b.run("to b")
    assert texts(resume(open_store, "a").history) == ["user:to a", "assistant:for a"]
    assert texts(resume(open_store, "b").history) == ["user:to b", "assistant:for b"]


# -- CLI --------------------------------------------------------------------------------------


@pytest.fixture
def stored(open_store: Callable[[], SQLiteStore]) -> list[str]:
    """Two runs in session 'cli': one completed, one ended by a provider error."""
    down = ProviderUnavailable(
        "502 [from] upstream", status_code=502, provider="openai", request_id="req_9"
    )
    model = ScriptedModel([*reads("a"), reply("all done"), down])
    agent = Agent(model, tools=[read_file], store=open_store(), session_id="cli")
    asyncio.run(agent.run("first"))
    with pytest.raises(ProviderUnavailable):
        asyncio.run(agent.run("second"))
    return [r.id for r in agent.runs]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_lists_stored_runs(
    db: Path, stored: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = cli(capsys, "runs", "--store", str(db))
    assert code == 0
    assert stored[0][:12] in out and stored[1][:12] in out
    assert "all done" in out and "'all done'" not in out
    assert "ProviderUnavailable: 502 [from] upstream" in out
    assert re.search(r"cli\s+│\s+" + stored[0][:12], out)
    assert "2 runs" in out
    code, out, _ = cli(capsys, "runs", "--store", str(db), "--session", "other")
    assert code == 0 and "0 runs" in out


def test_cli_shows_one_run_with_its_error(
    db: Path, stored: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = cli(capsys, "runs", "show", stored[1], "--store", str(db))
    assert code == 0
    assert f"run {stored[1]}" in out
    assert "stop_reason: ProviderUnavailable" in out
    assert "502 [from] upstream" in out
    for attribute, value in [
        ("status_code", "502"),
        ("provider", "openai"),
        ("request_id", "req_9"),
    ]:
        assert re.search(rf"{attribute}\s+│ {value}", out), attribute
    assert "#1 ProviderUnavailable status=502" in out  # the attempt log
    code, out, _ = cli(capsys, "runs", "--store", str(db), "show", stored[0][:6])
    assert code == 0 and "all done" in out and "'all done'" not in out and "stop_reason:" not in out


def test_cli_runs_errors(
    tmp_path: Path, db: Path, stored: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "runs", "--store", str(tmp_path / "missing.db"))
    assert code == 2 and "no store at" in err
    assert not (tmp_path / "missing.db").exists()
    code, _, err = cli(capsys, "runs", "show", "zzzz", "--store", str(db))
    assert code == 2 and "no stored run with an id starting 'zzzz'" in err


# -- docs -------------------------------------------------------------------------------------


def test_the_persistence_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ast
    import inspect

    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "persistence.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert blocks
    namespace: dict[str, Any] = {"__name__": "persistence_docs"}
    for source in blocks:
        code = compile(source, "persistence.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if code.co_flags & inspect.CO_COROUTINE:
            asyncio.run(eval(code, namespace))
        else:
            exec(code, namespace)
    for value in namespace.values():
        if isinstance(value, SQLiteStore):
            value.close()
