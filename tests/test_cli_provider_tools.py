"""The terminal shows the provider's own tools (SPEC 24): live, and in ``agentloop runs show``.

Each call, its result or error code, and the reply's citations (as links) are drawn; the run
itself goes on past a server tool's error (soft).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from agentloop import Agent
from agentloop.cli import main
from agentloop.cli.console import ConsoleObserver, LineScreen
from agentloop.messages import (
    Citation,
    Message,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
    Usage,
)
from agentloop.model import ModelResponse
from agentloop.provider_tools import WebSearch
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel

CITED = Citation("https://a.example/loops", "Loops explained", "it loops")


def searched() -> ModelResponse:
    parts = (
        ProviderToolCallPart("s1", "web_search", {"query": "agent loops"}, provider="anthropic"),
        ProviderToolResultPart(
            "s1", "web_search", [{"url": "https://a.example/loops"}], provider="anthropic"
        ),
        ProviderToolCallPart("s2", "web_search", {"query": "more"}, provider="anthropic"),
        ProviderToolResultPart(
            "s2",
            "web_search",
            None,
            provider="anthropic",
            is_error=True,
            error_code="max_uses_exceeded",
        ),
        TextPart("It loops.", citations=(CITED,)),
    )
    usage = Usage(10, 5, provider_tool_calls={"web_search": 2})
    return ModelResponse(Message("assistant", parts), usage=usage, stop_reason="end_turn")


def test_the_live_console_draws_calls_results_and_citations() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False, color_system=None)
    with LineScreen(console) as screen:
        agent = Agent(ScriptedModel([searched()]), provider_tools=[WebSearch()],
                      observers=[ConsoleObserver(screen)])  # fmt: skip
        run = agent.run_sync("does it loop?")
    shown = out.getvalue()
    assert run.output == "It loops."
    assert "web_search agent loops (anthropic runs it)" in shown
    assert "1 result: https://a.example/loops" in shown
    assert "provider tool error: max_uses_exceeded" in shown
    assert "[1] Loops explained https://a.example/loops" in shown


def test_runs_show_lists_them_from_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(str(path))
    agent = Agent(ScriptedModel([searched()]), provider_tools=[WebSearch()], store=store)
    run = agent.run_sync("does it loop?")
    store.close()
    assert main(["runs", "--store", str(path), "show", run.id]) == 0
    shown = capsys.readouterr().out
    assert "provider tools and sources:" in shown
    assert "web_search agent loops" in shown and "max_uses_exceeded" in shown
    assert "Loops explained" in shown


def test_parts_survive_the_store_and_resume(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    store = SQLiteStore(path)
    Agent(ScriptedModel([searched()]), provider_tools=[WebSearch()], store=store,
          session_id="s").run_sync("q")  # fmt: skip
    store.close()
    again = Agent.resume("s", store=SQLiteStore(path), client=ScriptedModel([]))
    assert again.history[1] == searched().message
    assert again.runs[-1].usage.provider_tool_calls == {"web_search": 2}
