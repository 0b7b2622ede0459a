"""``agentloop runs`` / ``runs show`` (SPEC 11) on runs of the newest features, as a subprocess.

A run that handed off shows which agent ruled each turn; a batch turn says so; a run paused in a
receiver lists its call and how to continue. Whatever was stored (a tool's result, the model's
text, an error's message) reaches the terminal with secrets redacted and control characters
shown, never obeyed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.batch import poll
from agentloop.errors import ProviderUnavailable
from agentloop.providers.openai import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import (
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
    ScriptedModel,
    call,
    reply,
)

KEY = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"


@tool
def read_env(name: str) -> str:
    """Read a settings file (it holds a key and a terminal escape)."""
    return f"OPENAI_API_KEY={KEY}\x1b]52;c;Y2xpcA==\x07 loaded {name}"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def agentloop(*args: str, env: dict[str, str] | None = None) -> str:
    extra = dict(env or {})
    paths = [extra.pop("PYTHONPATH", ""), *sys.path]
    env = {**os.environ, **extra, "PYTHONPATH": os.pathsep.join(paths), "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, dict[str, str]]:
    path = tmp_path / "runs.db"
    db = SQLiteStore(str(path))
    billing = Agent(
        ScriptedModel([call("read_env", {"name": ".env"}), reply(f"done \x1b[2J with {KEY}")]),
        name="billing",
        tools=[read_env],
    )
    starter = ScriptedModel([call("transfer_to_billing", {})])
    handed = Agent(starter, handoffs=[billing], store=db, session_id="handed").run_sync("go")
    receiver = Agent(
        ScriptedModel([call("refund", {"order": "o-1"}, id="c1")]), name="billing", tools=[refund]
    )
    paused_agent = Agent(
        ScriptedModel([call("transfer_to_billing", {})]),
        handoffs=[receiver],
        store=db,
        session_id="paused",
    )
    paused = paused_agent.run_sync("refund o-1")
    failing = Agent(
        ScriptedModel([ProviderUnavailable(f"upstream said token={KEY}")]),
        store=db,
        session_id="failed",
    )
    with pytest.raises(ProviderUnavailable):
        failing.run_sync("hello")
    db.close()
    return str(path), {"handed": handed.id, "paused": paused.id, "failed": failing.runs[-1].id}


def test_what_the_terminal_shows_of_stored_runs(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    outputs = [agentloop("runs", "--store", path)]
    outputs += [agentloop("runs", "--store", path, "show", run_id) for run_id in ids.values()]
    for shown in outputs:
        assert KEY not in shown and "\x1b" not in shown and "\x07" not in shown
    listing, handed, paused, failed = outputs
    assert "ProviderUnavailable" in listing and "[REDACTED]" in listing
    assert "turn 0 (scripted): 1 tool call" in handed
    assert "turn 1 (scripted, agent billing): 1 tool call" in handed
    assert "turn 2 (scripted, agent billing): 0 tool calls" in handed
    assert "OPENAI_API_KEY=[REDACTED]" in handed and "\\x1b]52;c;" in handed
    assert "says: done \\x1b[2J with [REDACTED]" in handed
    assert "turn 1 (scripted, agent billing): 1 tool call (paused: waits on a decision)" in paused
    assert "c1  refund  approval" in paused and "--approve c1" in paused
    assert "token=[REDACTED]" in failed


@pytest.fixture
def batch_server() -> Iterator[FakeProviderServer]:
    """The fake provider in a thread (the CLI is another process): a tool call, then an answer."""
    steps = [FakeReply(tool_calls=[FakeToolCall("refund", {"order": "o-9"})]), FakeReply("done")]
    loop = asyncio.new_event_loop()
    server = FakeProviderServer(steps)
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(30)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.aclose(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def batch_agent(url: str, path: Path) -> Agent[str | None]:
    client = OpenAIClient("gpt-test", api_key="sk-test", base_url=url)
    return Agent(client, tools=[refund], store=SQLiteStore(path), config=RunConfig(batch=True))


def test_continue_of_a_paused_batch_run_submits_its_next_turn(
    batch_server: FakeProviderServer, tmp_path: Path
) -> None:
    path = tmp_path / "runs.db"
    agent = batch_agent(batch_server.base_url, path)
    run = asyncio.run(agent.run("refund o-9"))
    asyncio.run(poll(agent))  # the reply asks for refund: the run pauses on it
    assert agent.store is not None
    stored = agent.store.load_run(run.id)
    assert stored is not None and stored.run.paused
    (pending,) = stored.run.pending
    sent = len(batch_server.requests)

    shown = agentloop(
        "continue", run.id[:12], "--store", str(path), "--provider", "openai",
        "--base-url", batch_server.base_url, "--model", "gpt-test",
        "--tools", "test_cli_seams:refund", "--approve", pending.id,
        env={"OPENAI_API_KEY": "sk-test", "PYTHONPATH": str(Path(__file__).parent)},
    )  # fmt: skip
    assert "waiting on batch" in shown and "agentloop batch poll" in shown
    waiting = SQLiteStore(path).load_run(run.id)
    assert waiting is not None and waiting.status == "waiting"
    assert waiting.run.turns[-1].tool_results[0].content == "refunded o-9"
    assert not any("messages" in body for body in batch_server.requests[sent:])  # no sync call

    later = batch_agent(batch_server.base_url, path)
    report = asyncio.run(poll(later))
    assert report.continued == [run.id]
    done = SQLiteStore(path).load_run(run.id)
    assert done is not None and done.run.output == "done"
    assert all(turn.batch for turn in done.run.turns)


@tool
def note(text: str) -> str:
    """Write a note (runs beside the pending call)."""
    return f"noted {text}"


def test_a_paused_run_exports_as_a_test_that_pauses_there_again(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    db = SQLiteStore(str(path))
    receiver = Agent(
        ScriptedModel(
            [[call("note", {"text": "n-1"}, id="n1"), call("refund", {"order": "o-1"}, id="c1")]]
        ),
        name="billing",
        tools=[note, refund],
    )
    start = Agent(ScriptedModel([call("transfer_to_billing", {})]), handoffs=[receiver], store=db)
    in_receiver = start.run_sync("refund o-1")
    plain = Agent(
        ScriptedModel([call("refund", {"order": "o-2"}, id="c2")]), tools=[refund], store=db
    ).run_sync("refund o-2")
    db.close()
    for run, pending in ((in_receiver, "('c1', 'refund', {'order': 'o-1'})"), (plain, "('c2'")):
        assert run.paused
        test = tmp_path / f"test_exported_{run.id[:8]}.py"
        shown = agentloop("runs", "--store", str(path), "export", run.id, "--as-test", str(test))
        assert f"wrote {test}" in shown
        assert f"PENDING: list[tuple[str, str, dict[str, Any]]] = [{pending}" in test.read_text()
        replayed = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            check=False,
        )
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_a_cancelled_paused_calls_are_shown_ending(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    receiver = Agent(
        ScriptedModel([call("refund", {"order": "o-3"}, id="c3")]), name="billing", tools=[refund]
    )
    starter = ScriptedModel([call("transfer_to_billing", {})])
    db = SQLiteStore(str(path))
    paused = Agent(starter, handoffs=[receiver], store=db).run_sync("refund o-3")
    db.close()
    assert "cancelled run" in agentloop("runs", "--store", str(path), "cancel", paused.id)
    shown = agentloop("runs", "--store", str(path), "show", paused.id)
    assert "stop_reason: Cancelled" in shown
    assert "(no result recorded)" not in shown
    refund_line = shown.index('call refund {"order": "o-3"}')
    assert shown[refund_line:].splitlines()[1].strip() == (
        "soft error: The tool call was interrupted before a result was produced."
    )
