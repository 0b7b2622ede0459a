"""A reply cut mid-stream, as the end user's chat shows it (real clients, real provider twin).

The model is the fake OpenAI-compatible server behind the real adapter; its first stream stops
after some text without ``[DONE]``. Retried (``RetryingClient(replay_streams=True)``), the chat
of ``@ag-ui/client`` and of the ``ai`` package ends with the retry's answer alone, equal to the
run's output: the first attempt's half text is withdrawn (AG-UI: a MESSAGES_SNAPSHOT without it;
Vercel: ``reset-step``). Not retried, the run ends in its hard error, and the chat shows the
error without the half reply or a tool call that never ends. The AG-UI streams also pass
``ag-ui-validate`` (the ``ag_ui`` helper checks every recorded stream).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.ui.test_seams_events import ag_ui, vercel

from agentloop import Agent, RetryingClient, RunConfig, tool
from agentloop.providers import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault

ANSWER = "The capital of France is Paris."
HALF = FakeReply("The capital of France is Par")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@asynccontextmanager
async def agent_over(script: Sequence[Any], *, retry: bool) -> AsyncIterator[Agent[Any]]:
    async with FakeProviderServer(list(script)) as fake:
        client: Any = OpenAIClient("fake-model", api_key="sk-test-key", base_url=fake.base_url)
        if retry:
            client = RetryingClient(client, replay_streams=True, base_delay=0.0, jitter=0.0)
        async with client:
            yield Agent(client, tools=[add], config=RunConfig(stream=True))


def assistant_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m.get("content") or "" for m in messages if m["role"] == "assistant"]


async def test_ag_ui_a_retried_stream_shows_the_retry_alone(tmp_path: Path) -> None:
    async with agent_over([Fault.truncate(HALF), FakeReply(ANSWER)], retry=True) as agent:
        seen = await ag_ui(agent, "capital?", tmp_path)
    assert seen["error"] is None and seen["outcome"] == "success"
    assert "MESSAGES_SNAPSHOT" in seen["types"]
    assert assistant_texts(seen["messages"]) == [ANSWER]
    assert [m["content"] for m in seen["messages"] if m["role"] == "user"] == ["capital?"]


async def test_vercel_a_retried_stream_shows_the_retry_alone() -> None:
    async with agent_over([Fault.truncate(HALF), FakeReply(ANSWER)], retry=True) as agent:
        seen = await vercel(agent, "capital?")
    assert seen["errors"] == [] and seen["status"] == "ready"
    assert [p["text"] for p in seen["parts"] if p["type"] == "text"] == [ANSWER]


def cut_call() -> Fault:
    return Fault.truncate(
        FakeReply("Let me add", tool_calls=[FakeToolCall("add", {"a": 1, "b": 2}, id="call_1")])
    )


@pytest.mark.parametrize("fault", [Fault.truncate(HALF), cut_call()], ids=["text", "call"])
async def test_ag_ui_a_reply_cut_by_a_hard_error_is_withdrawn(fault: Fault, tmp_path: Path) -> None:
    async with agent_over([fault], retry=False) as agent:
        seen = await ag_ui(agent, "capital?", tmp_path)
    assert seen["error"]["code"] == "ResponseInvalid"
    assert [m["role"] for m in seen["messages"]] == ["user"]  # no half text, no half call
    assert seen["types"][-2:] == ["STEP_FINISHED", "RUN_ERROR"]


@pytest.mark.parametrize("fault", [Fault.truncate(HALF), cut_call()], ids=["text", "call"])
async def test_vercel_a_reply_cut_by_a_hard_error_is_withdrawn(fault: Fault) -> None:
    async with agent_over([fault], retry=False) as agent:
        seen = await vercel(agent, "capital?")
    assert seen["unfinished"] == []
    assert [p["type"] for p in seen["parts"]] == ["data-error"]
    assert seen["errors"] and seen["errors"][0].startswith("ResponseInvalid: ")


async def test_ag_ui_a_withdrawal_keeps_the_turns_that_completed(tmp_path: Path) -> None:
    script = [
        FakeReply("Adding.", tool_calls=[FakeToolCall("add", {"a": 1, "b": 2}, id="call_1")]),
        Fault.truncate(FakeReply("The sum is")),
        FakeReply("The sum is 3."),
    ]
    async with agent_over(script, retry=True) as agent:
        seen = await ag_ui(agent, "add 1 and 2", tmp_path)
    assert seen["error"] is None and seen["unfinished"] == []
    roles = [m["role"] for m in seen["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    first, result, last = seen["messages"][1:]
    assert first["content"] == "Adding." and first["toolCalls"][0]["id"] == "call_1"
    assert result["toolCallId"] == "call_1" and result["content"] == "3"
    assert last["content"] == "The sum is 3."
