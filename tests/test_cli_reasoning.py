"""The CLI and current models (SPEC 16): reasoning dimmed in ``run`` (``--thinking``), in ``runs
show``, and a refusal as one paragraph with its own exit status.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from agentloop import Agent
from agentloop import events as ev
from agentloop.cli import main
from agentloop.cli.advice import Target, failure_paragraph
from agentloop.cli.commands import REFUSED_EXIT
from agentloop.cli.console import LineScreen, RunView
from agentloop.errors import ModelRefused
from agentloop.messages import Message, TextPart, ThinkingPart
from agentloop.model import ModelResponse
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel


def drawn(events: list[ev.Event], thinking: str) -> str:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None)
    with LineScreen(console) as screen:
        view = RunView(screen, thinking=thinking)
        for event in events:
            view.apply(event)
    return out.getvalue()


STREAMED: list[ev.Event] = [
    ev.ThinkingDelta("r", 0, "First I read the file.\n"),
    ev.ThinkingDelta("r", 0, "Then I summarise it."),
    ev.TextDelta("r", 0, "It prints hello.\n"),
]


@pytest.mark.parametrize(
    ("mode", "shown", "hidden"),
    [
        ("brief", ["thinking: First I read the file. …"], ["Then I summarise"]),
        ("full", ["thinking: First I read the file.", "Then I summarise it."], []),
        ("off", [], ["First I read", "thinking:"]),
    ],
)
def test_streamed_reasoning_is_drawn_before_the_reply(
    mode: str, shown: list[str], hidden: list[str]
) -> None:
    out = drawn(STREAMED, mode)
    for text in shown:
        assert text in out
    for text in hidden:
        assert text not in out
    assert "It prints hello." in out
    if shown:
        assert out.index("thinking:") < out.index("It prints hello.")


def test_reasoning_of_a_reply_that_was_not_streamed_is_drawn_too() -> None:
    message = Message("assistant", (ThinkingPart("weighing it"), TextPart("yes")))
    response = ModelResponse(message)
    out = drawn([ev.ModelResponded("r", 0, response)], "brief")
    assert "thinking: weighing it" in out and "yes" in out


def test_a_refusal_is_one_paragraph_naming_what_the_model_said() -> None:
    text = failure_paragraph(ModelRefused("refusal", "I can't help with that."), Target("x"))
    assert "refused to answer (refusal)" in text and "I can't help with that." in text
    assert "nothing was retried" in text
    assert REFUSED_EXIT == 3


def test_runs_show_prints_each_turns_reasoning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = Message("assistant", (ThinkingPart("the user wants [bold]x[/]"), TextPart("ok")))
    store = SQLiteStore(tmp_path / "r.db")
    run = Agent(ScriptedModel([ModelResponse(message)]), store=store).run_sync("go")
    store.close()
    assert main(["runs", "--store", str(tmp_path / "r.db"), "show", run.id[:8]]) == 0
    out = capsys.readouterr().out
    assert "thinks: the user wants [bold]x[/]" in out  # literally, never as markup
    assert out.index("thinks:") < out.index("says: ok")


def test_run_attach_sends_the_file_with_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import threading

    from agentloop.testing import FakeProviderServer, FakeReply

    monkeypatch.chdir(tmp_path)
    chart = tmp_path / "chart.png"
    chart.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    loop = asyncio.new_event_loop()
    server = FakeProviderServer([FakeReply("a chart")])
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    try:
        argv = ["run", "what is this?", "--provider", "openai", "--base-url", server.base_url]
        code = main([*argv, "--attach", str(chart), "--no-store"])
        [request] = server.received
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    assert code == 0, capsys.readouterr()
    content = request.body["messages"][-1]["content"]
    assert [part["type"] for part in content] == ["text", "image_url"]
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_run_attach_of_a_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "x", "--provider", "ollama", "--attach", str(tmp_path / "nope.png")])
    assert code == 2 and "no such file" in capsys.readouterr().err


def test_streamed_reasoning_before_a_call_is_drawn_once() -> None:
    message = Message("assistant", (ThinkingPart("read it first"), TextPart("")))
    events: list[ev.Event] = [
        ev.ThinkingDelta("r", 0, "read it first"),
        ev.ToolCallDelta("r", 0, 0, "read_file", ""),
        ev.ModelResponded("r", 0, ModelResponse(message)),
    ]
    assert drawn(events, "full").count("read it first") == 1
