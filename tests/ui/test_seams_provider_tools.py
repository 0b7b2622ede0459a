"""A server-side web search, a paused turn and a function call, as the real UI clients see them.

SPEC 24 x SPEC 18: Claude searches the web itself (``server_tool_use`` and its result, streamed
by the real Anthropic adapter from the fake server), pauses the turn (``pause_turn``), is asked
again, calls one of our tools, then answers. Through ``@ag-ui/client`` (the recorded stream also
passes ``ag-ui-validate``) and the ``ai`` package's chat: every tool call the client saw ends
with exactly one result, the provider's own call is never drawn as a call the client would wait
on (it reaches AG-UI as a ``CUSTOM`` event, Vercel as a transient data part), and the text
arrives in order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")

from agentloop import Agent
from agentloop.provider_tools import WebSearch
from agentloop.providers import AnthropicClient
from agentloop.testing import FakeProviderServer

from .test_seams_events import add, ag_ui, vercel

SCRIPT = {
    "steps": [
        {"text": "Let me look.", "web_search": ["oslo weather"], "finish_reason": "pause_turn"},
        {"tool_calls": [{"name": "add", "arguments": {"a": 20, "b": 1}, "id": "toolu_add"}]},
        {"text": "It is 21C in Oslo."},
    ]
}


async def run_through(
    face: str, tmp_path: Path, script: dict[str, Any] | None = None
) -> dict[str, Any]:
    async with FakeProviderServer.from_script(script or SCRIPT) as server:
        client = AnthropicClient(
            "claude-sonnet-4-5", api_key="sk-ant-demo", base_url=server.root_url
        )
        async with client:
            agent = Agent(client, tools=[add], provider_tools=[WebSearch()])
            if face == "ag_ui":
                return await ag_ui(agent, "Weather in Oslo?", tmp_path)
            return await vercel(agent, "Weather in Oslo?")


async def test_ag_ui_a_server_search_and_a_paused_turn_leave_no_call_open(tmp_path: Path) -> None:
    seen = await run_through("ag_ui", tmp_path)
    assert seen["error"] is None and seen["outcome"] == "success"
    assert seen["unfinished"] == []
    assert list(seen["calls"]) == ["toolu_add"]  # the provider's search is not a client call
    call = seen["calls"]["toolu_add"]
    assert call["ended"] and call["results"] == [{"content": "21", "error": False}]
    said = [m["content"] for m in seen["messages"] if m["role"] == "assistant" and m.get("content")]
    assert said == ["Let me look.", "It is 21C in Oslo."]
    assert seen["types"].count("CUSTOM") >= 2  # ProviderToolCalled, ProviderToolReturned


async def test_vercel_a_server_search_and_a_paused_turn_leave_no_call_open(tmp_path: Path) -> None:
    seen = await run_through("vercel", tmp_path)
    assert seen["errors"] == [] and seen["status"] == "ready"
    assert seen["unfinished"] == []
    tools = [p for p in seen["parts"] if p["type"].startswith("tool-")]
    assert [(p["toolCallId"], p["state"], p["output"]) for p in tools] == [
        ("toolu_add", "output-available", "21")
    ]
    texts = [p["text"] for p in seen["parts"] if p["type"] == "text"]
    assert texts == ["Let me look.", "It is 21C in Oslo."]


ANSWER_AFTER_A_PAUSE = {
    "steps": [
        {"text": "Searched. ", "web_search": ["oslo weather"], "finish_reason": "pause_turn"},
        {"text": "It is 21C in Oslo."},
    ]
}


async def test_ag_ui_the_result_after_a_paused_turn_is_the_text_it_showed(tmp_path: Path) -> None:
    seen = await run_through("ag_ui", tmp_path, ANSWER_AFTER_A_PAUSE)
    assert seen["error"] is None and seen["outcome"] == "success"
    said = [m["content"] for m in seen["messages"] if m["role"] == "assistant" and m.get("content")]
    assert said == ["Searched. ", "It is 21C in Oslo."]
    assert seen["result"] == "".join(said)  # run.output: the whole answer (SPEC 24)
