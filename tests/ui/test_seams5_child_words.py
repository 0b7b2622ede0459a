"""A sub-agent that stopped reads, in the browser, as its hard error would: no host, no internals.

An agent used as a tool (``as_tool``) whose run ends in a hard error is the parent's soft result
``agent '<name>' stopped: <ErrorClass>: <message>`` (SPEC 13): the model reads the whole
message. The browser showed it whole too, so a child whose provider was down put the provider's
(or its gateway's) host, port and OS error in the end user's chat, words docs/ui.md promises a
client never reads when the same failure ends the run itself. Now the UI apps word the child's
error as they word a hard error (``openai: connect failed``); the model still reads it whole.

Real parts: the parent's model is the fake provider server behind the real adapter, the child's
provider a closed port of 127.0.0.1; the clients are ``@ag-ui/client`` and the ``ai`` package.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.ui.test_seams_events import ag_ui, vercel

from agentloop import Agent
from agentloop.providers import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

SAID = "agent 'helper' stopped: ProviderUnavailable: openai: connect failed"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def parent_of_a_dead_child() -> AsyncIterator[tuple[Agent[Any], FakeProviderServer]]:
    script = [
        FakeReply(tool_calls=[FakeToolCall("helper", {"input": "look it up"}, id="call_help")]),
        FakeReply("The helper is unavailable."),
    ]
    dead_url = f"http://127.0.0.1:{closed_port()}/v1"
    async with FakeProviderServer(script) as fake:
        async with (
            OpenAIClient("fake-model", api_key="k", base_url=fake.base_url) as client,
            OpenAIClient("child-model", api_key="k", base_url=dead_url) as dead,
        ):
            helper = Agent(dead).as_tool(name="helper", description="Looks things up.")
            yield Agent(client, tools=[helper]), fake


def model_read(fake: FakeProviderServer) -> str:
    [result] = [m for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
    return str(result["content"])


async def test_ag_ui_a_stopped_child_reads_without_its_providers_host(tmp_path: Path) -> None:
    async with parent_of_a_dead_child() as (agent, fake):
        seen = await ag_ui(agent, "look it up", tmp_path)
        read = model_read(fake)
    assert seen["error"] is None and seen["unfinished"] == []
    assert seen["calls"]["call_help"]["results"] == [{"content": SAID, "error": True}]
    assert read.startswith(SAID + " (") and "127.0.0.1" in read  # the model's is whole


async def test_vercel_a_stopped_child_reads_without_its_providers_host() -> None:
    async with parent_of_a_dead_child() as (agent, fake):
        seen = await vercel(agent, "look it up")
        read = model_read(fake)
    assert seen["errors"] == [] and seen["unfinished"] == []
    [part] = [p for p in seen["parts"] if p["type"] == "tool-helper"]
    assert (part["state"], part["errorText"]) == ("output-error", SAID)
    assert read.startswith(SAID + " (") and "127.0.0.1" in read
