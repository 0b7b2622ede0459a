"""Provider tools on Bedrock and Vertex (SPEC 24): refused on Converse, checked per wire on Vertex.

Bedrock Converse has no provider tools: any one is a ``ConfigurationError`` when the agent is
made and for a direct ``ModelRequest`` alike, nothing sent. Vertex checks each by the wire its
model takes (Claude's server tools, Gemini's built-in tools), and Claude on Vertex takes its
beta features in the body (``anthropic_beta``), never as a header: the Vertex twin reads no
header, so a beta sent there is the Anthropic twin's "requires the beta" 400.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from agentloop import Agent, tool
from agentloop.errors import ConfigurationError
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.provider_tools import CodeExecution, FileSearch, WebFetch, WebSearch
from agentloop.providers.anthropic import build_payload

from . import test_bedrock as bedrock
from . import test_vertex as vertex
from .twins import anthropic as claude
from .twins.bedrock import Reply as BedrockReply
from .twins.gemini import Reply as GeminiReply
from .twins.gemini import text

aws_env = bedrock.aws_env
google_env = vertex.google_env


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """Close the clients the two modules' ``client`` built, on the test's own loop."""
    yield
    for open_ in (bedrock._OPEN, vertex._OPEN):
        while open_:
            await open_.pop().aclose()


VERTEX_CLAUDE = "claude-sonnet-4-5@20250929"
FETCH_BETA = "web-fetch-2025-09-10"


@tool
def note(text: str) -> str:
    """Take a note."""
    return "noted"


@pytest.mark.parametrize("kind", [WebSearch(), CodeExecution(), WebFetch(), FileSearch(["vs_1"])])
async def test_bedrock_refuses_every_provider_tool_when_the_agent_is_made(kind: Any) -> None:
    async with bedrock.twin_at() as (twin, url):
        with pytest.raises(ConfigurationError, match="Bedrock Converse has no provider tools"):
            Agent(bedrock.client(url), tools=[note, kind])
    assert twin.received == []


async def test_bedrock_refuses_a_direct_request_with_a_provider_tool_before_sending() -> None:
    async with bedrock.twin_at(BedrockReply(text="never")) as (twin, url):
        client = bedrock.client(url)
        request = ModelRequest([Message.user("hi")], provider_tools=(WebSearch(),))
        with pytest.raises(ConfigurationError, match="bedrock \\(Converse\\)") as info:
            await client.complete(request)
        with pytest.raises(ConfigurationError):
            [e async for e in client.stream(request)]
    assert info.value.field == "provider_tools"
    assert twin.received == []


async def test_gemini_on_vertex_takes_its_built_in_tools() -> None:
    async with vertex.twin_at(gemini=[GeminiReply([text("found it")])]) as (twin, url):
        agent = Agent(vertex.client(url, "gemini-3.8-flash"), tools=[WebSearch()])
        run = await agent.run("search")
    assert run.output == "found it" and twin.refused == []
    assert {"google_search": {}} in twin.bodies[0]["tools"]


async def test_gemini_on_vertex_refuses_what_gemini_lacks() -> None:
    async with vertex.twin_at() as (twin, url):
        with pytest.raises(ConfigurationError, match="FileSearch"):
            Agent(vertex.client(url, "gemini-3.8-flash"), tools=[FileSearch(["vs_1"])])
        with pytest.raises(ConfigurationError, match=r"gemini-2\.5-flash"):  # not beside functions
            Agent(vertex.client(url, "gemini-2.5-flash"), tools=[note, WebSearch()])
    assert twin.bodies == []


async def test_claude_on_vertex_refuses_what_claude_lacks() -> None:
    async with vertex.twin_at() as (twin, url):
        with pytest.raises(ConfigurationError, match="FileSearch"):
            Agent(vertex.client(url, VERTEX_CLAUDE), tools=[FileSearch(["vs_1"])])
    assert twin.bodies == []


async def test_claude_on_vertex_sends_its_betas_in_the_body_not_a_header() -> None:
    script = [claude.TwinReply([claude.text("fetched")], "end_turn")]
    async with vertex.twin_at(claude_script=script) as (twin, url):
        run = await Agent(vertex.client(url, VERTEX_CLAUDE), tools=[note, WebFetch()]).run("go")
    assert run.output == "fetched" and twin.refused == []
    body = twin.bodies[0]
    assert body["anthropic_beta"] == [FETCH_BETA]
    assert [t.get("type") for t in body["tools"]][-1] == "web_fetch_20250910"
    assert "anthropic-beta" not in {h.lower() for h in twin.headers[0]}


async def test_a_request_without_a_beta_feature_has_no_anthropic_beta() -> None:
    script = [claude.TwinReply([claude.text("hi")], "end_turn")]
    async with vertex.twin_at(claude_script=script) as (twin, url):
        await Agent(vertex.client(url, VERTEX_CLAUDE), tools=[WebSearch()]).run("go")
    assert "anthropic_beta" not in twin.bodies[0]  # web search needs no beta: the same bytes


async def test_the_vertex_twin_reads_no_beta_header() -> None:
    """A beta sent as a header (the Claude API's way) is the twin's "requires the beta" 400."""
    request = ModelRequest([Message.user("go")], provider_tools=(WebFetch(),))
    body = build_payload(request, model=VERTEX_CLAUDE, stream=False)
    del body["model"]
    body["anthropic_version"] = "vertex-2023-10-16"
    async with vertex.twin_at(claude_script=[]) as (twin, url):
        path = f"{url}/v1/projects/twin-project/locations/global/publishers/anthropic/models/"
        headers = {"Authorization": f"Bearer {vertex.TOKEN}", "anthropic-beta": FETCH_BETA}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{path}{VERTEX_CLAUDE}:rawPredict", json=body, headers=headers) as got,
        ):
            status, answer = got.status, await got.json()
    assert status == 400 and FETCH_BETA in answer["error"]["message"]
    assert twin.refused == [answer["error"]["message"]]
