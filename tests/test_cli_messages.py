"""The command line's words (issue 25, item 17): advice per provider, said once, in words."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import errors as er
from agentloop.cli.advice import Target, failure_paragraph
from agentloop.cli.commands import main
from agentloop.cli.console import binary_placeholder, call_summary
from agentloop.messages import ToolCallPart
from agentloop.model import INVALID_JSON_KEY


def test_a_failed_connection_is_said_in_words() -> None:
    error = er.ProviderUnavailable(
        "openai: connect failed (ClientConnectorError: Cannot connect to host 127.0.0.1:9 "
        "ssl:default [Connect call failed ('127.0.0.1', 9)])",
        phase=er.FailurePhase.CONNECT,
        request_sent=False,
    )
    text = failure_paragraph(error, Target("openai", "m", "http://127.0.0.1:9/v1"))
    assert "('127.0.0.1', 9)" not in text and "nothing answered at 127.0.0.1:9" in text


def not_found(message: str) -> er.ModelNotFound:
    return er.ModelNotFound(message, status_code=404, phase=er.FailurePhase.STATUS)


def test_advice_is_per_provider_once_and_one_period() -> None:
    said = failure_paragraph(
        not_found("HTTP 404: Invalid URL; OpenAI-compatible servers usually serve under /v1"),
        Target("openai", "m", "http://h:1"),
    )
    assert said.count("usually serve under /v1") == 1 and "Try --base-url http://h:1/v1." in said
    anthropic = failure_paragraph(not_found("model: m"), Target("anthropic", "m", "http://h:1"))
    assert "/v1" not in anthropic.replace("/v1/models", "")
    assert "try --base-url http://h:1." in failure_paragraph(
        not_found("Invalid URL"), Target("anthropic", "m", "http://h:1/v1")
    )
    dotted = failure_paragraph(not_found("no access to it."), Target("openai", "m", "http://h/v1"))
    assert "access to it.." not in dotted and "access to it. It failed" in dotted


def test_invalid_json_arguments_and_binary_results_are_shown_for_a_person() -> None:
    call = ToolCallPart("c", "read_file", {INVALID_JSON_KEY: '{"path": "a'})
    assert call_summary(call) == 'read_file(invalid JSON: {"path": "a)'
    png = "\ufffdPNG\r\n\x1a\n\x00\x00\x00\rIHDR" + "\ufffd" * 50
    placeholder = binary_placeholder(png, ToolCallPart("c", "read_file", {"path": "logo.png"}))
    assert placeholder == f"(binary content: {len(png)} characters, image/png)"
    assert binary_placeholder("one \ufffd in a long text " + "line " * 40) is None


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    from agentloop import Agent
    from agentloop.store import SQLiteStore
    from agentloop.testing import ScriptedModel, reply

    db = tmp_path / "runs.db"
    store = SQLiteStore(str(db))
    agent = Agent(ScriptedModel([reply("one"), reply("two")]), store=store, session_id="sess-1")
    agent.run_sync("a")
    agent.run_sync("b")
    store.close()
    return db


def test_runs_show_takes_a_session_id(stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--store", str(stored), "show", "sess-1"]) == 0
    out = capsys.readouterr().out
    assert "session sess-1" in out and out.rstrip().endswith("2 runs")


def test_no_usage_is_not_reported_as_zero(stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentloop.cli.commands import _summary
    from agentloop.store import SQLiteStore

    store = SQLiteStore(stored, read_only=True)
    try:
        run = store.load_runs()[0].run
    finally:
        store.close()
    if run.usage.input_tokens or run.usage.output_tokens:
        pytest.skip("the scripted model reports usage")
    assert "usage not reported" in _summary(run, None, None)


def test_the_last_line_says_when_the_server_reported_no_usage() -> None:
    from agentloop.cli.commands import _summary
    from agentloop.messages import Usage
    from agentloop.run import Run, Turn

    silent = Run(id="r" * 12, input="x", turns=[Turn(index=0, model="m")])
    assert "token usage not reported by the server" in _summary(silent, None, None)
    counted = Run(id="r" * 12, input="x", turns=[Turn(index=0, model="m")], usage=Usage(3, 4))
    assert "3 tokens in, 4 out" in _summary(counted, None, None)


def test_a_reply_stopped_by_ctrl_c_is_marked_interrupted_not_cut() -> None:
    import io

    from rich.console import Console

    from agentloop.cli.console import LineScreen

    for exc, note in ((KeyboardInterrupt, "(interrupted)"), (None, "(the reply was cut off)")):
        out = io.StringIO()
        screen = LineScreen(Console(file=out, color_system=None))
        screen.__enter__()
        screen.fragment("half a rep")
        screen.__exit__(exc, None, None)
        assert out.getvalue().splitlines()[-1] == note
