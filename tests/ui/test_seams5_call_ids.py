"""A streamed tool call is started once, under the id its result carries (real clients).

Two ways a call the browser saw start never finished there:

- Claude says something (or thinks) before it calls a tool, the commonest turn there is: its
  stream numbers content blocks, so the call is block 1 while it is the reply's call 0. The AG-UI
  app matched the reply's calls to the streamed ones by that position, took the streamed call
  for one that never streamed and started it again: ``@ag-ui/client`` threw ``Cannot send
  'TOOL_CALL_START' event: A tool call with ID ... is already in progress`` and the page showed
  an error instead of the turn.
- A provider that numbers its calls afresh each turn (``call_0`` every time, as some
  OpenAI-compatible servers do): the engine gives the second ``call_0`` an id of its own, but
  only once the reply was whole, after the call had streamed under the old one; its result then
  named a call the client never saw start, and the streamed one never ended.

The model is the fake provider server behind the real adapter; the clients are
``@ag-ui/client`` (its stream also passes ``ag-ui-validate``) and the ``ai`` package's chat.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.ui.test_seams_events import add, ag_ui, vercel

from agentloop import Agent
from agentloop.providers import AnthropicClient, OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

ADD = {"name": "add", "arguments": {"a": 20, "b": 1}, "id": "toolu_add"}
BEFORE = {"text": {"text": "Let me add."}, "thinking": {"thinking": "20 plus 1, by the tool."}}


@asynccontextmanager
async def claude(before: str) -> AsyncIterator[Agent[Any]]:
    script = {"steps": [{**BEFORE[before], "tool_calls": [ADD]}, {"text": "It is 21."}]}
    async with FakeProviderServer.from_script(script) as server:
        url = server.root_url
        async with AnthropicClient("claude-sonnet-4-5", api_key="sk-ant-k", base_url=url) as client:
            yield Agent(client, tools=[add])


@asynccontextmanager
async def same_ids_each_turn() -> AsyncIterator[Agent[Any]]:
    script = [
        FakeReply(tool_calls=[FakeToolCall("add", {"a": 1, "b": 2}, id="call_0")]),
        FakeReply(tool_calls=[FakeToolCall("add", {"a": 3, "b": 4}, id="call_0")]),
        FakeReply("3 and 7."),
    ]
    async with FakeProviderServer(script) as fake:
        async with OpenAIClient("fake-model", api_key="k", base_url=fake.base_url) as client:
            yield Agent(client, tools=[add])


@pytest.mark.parametrize("before", sorted(BEFORE))
async def test_ag_ui_a_call_after_claudes_words_starts_once_and_ends(
    before: str, tmp_path: Path
) -> None:
    async with claude(before) as agent:
        seen = await ag_ui(agent, "add 20 and 1", tmp_path)
    assert seen["error"] is None and seen["outcome"] == "success"
    assert seen["types"].count("TOOL_CALL_START") == 1
    assert seen["calls"] == {
        "toolu_add": {"name": "add", "ended": True, "results": [{"content": "21", "error": False}]}
    }


@pytest.mark.parametrize("before", sorted(BEFORE))
async def test_vercel_a_call_after_claudes_words_starts_once_and_ends(before: str) -> None:
    async with claude(before) as agent:
        seen = await vercel(agent, "add 20 and 1")
    assert seen["errors"] == [] and seen["unfinished"] == []
    [call] = [p for p in seen["parts"] if p["type"] == "tool-add"]
    assert (call["toolCallId"], call["state"], call["output"]) == (
        "toolu_add",
        "output-available",
        "21",
    )


async def test_ag_ui_a_providers_repeated_call_id_streams_under_the_id_it_ends_with(
    tmp_path: Path,
) -> None:
    async with same_ids_each_turn() as agent:
        seen = await ag_ui(agent, "add twice", tmp_path)
    assert seen["error"] is None and seen["unfinished"] == []
    first, second = seen["calls"]
    assert first == "call_0" and second != "call_0"
    results = [seen["calls"][c]["results"] for c in (first, second)]
    assert results == [[{"content": "3", "error": False}], [{"content": "7", "error": False}]]


async def test_vercel_a_providers_repeated_call_id_streams_under_the_id_it_ends_with() -> None:
    async with same_ids_each_turn() as agent:
        seen = await vercel(agent, "add twice")
    assert seen["errors"] == [] and seen["unfinished"] == []
    calls = [p for p in seen["parts"] if p["type"] == "tool-add"]
    assert [(c["state"], c["input"], c["output"]) for c in calls] == [
        ("output-available", {"a": 1, "b": 2}, "3"),
        ("output-available", {"a": 3, "b": 4}, "7"),
    ]
    assert calls[0]["toolCallId"] == "call_0" != calls[1]["toolCallId"]
