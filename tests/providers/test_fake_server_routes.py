"""``agentloop fake-server`` answers Azure's, Bedrock's and Claude-on-Vertex's routes (SPEC 24)."""

from __future__ import annotations

import pytest
from google.oauth2.credentials import Credentials

from agentloop.errors import ResponseInvalid
from agentloop.messages import Message, ThinkingPart
from agentloop.model import ClosableModelClient, ModelRequest
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault

REQUEST = ModelRequest([Message.user("hi")])
CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "fake-key")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "fake-key")


def bedrock(url: str) -> ClosableModelClient:
    return build_client(
        Settings(provider="bedrock", model=CLAUDE, region="us-east-1", base_url=url, max_retries=0)
    )


async def test_bedrock_converse_and_its_event_stream() -> None:
    call = FakeToolCall("read_file", {"path": "a"})
    script = [FakeReply("whole", thinking="hm"), FakeReply(tool_calls=[call])]
    async with FakeProviderServer(script) as server, bedrock(server.root_url) as client:
        whole = await client.complete(REQUEST)
        events = [e async for e in client.stream(REQUEST)]
    assert whole.text == "whole" and whole.message.parts[0].provider == "bedrock"  # type: ignore[union-attr]
    done = events[-1].response
    assert done is not None and done.tool_calls[0].arguments == {"path": "a"}
    assert done.stop_reason == "tool_use"
    assert [r.path for r in server.received] == [
        f"/model/{CLAUDE}/converse",
        f"/model/{CLAUDE}/converse-stream",
    ]


async def test_a_truncated_event_stream_is_invalid() -> None:
    async with FakeProviderServer([Fault.truncate(FakeReply("cut"))]) as server:
        async with bedrock(server.root_url) as client:
            with pytest.raises(ResponseInvalid):
                [e async for e in client.stream(REQUEST)]


async def test_azure_v1_and_dated_paths() -> None:
    async with FakeProviderServer([FakeReply("v1"), FakeReply("dated")]) as server:
        for version in (None, "2024-10-21"):
            azure = build_client(
                Settings(
                    provider="azure",
                    model="dep",
                    base_url=server.root_url,
                    api_version=version,
                    max_retries=0,
                )
            )
            await azure.complete(REQUEST)
            await azure.aclose()
    assert [r.path for r in server.received] == [
        "/openai/v1/chat/completions",
        "/openai/deployments/dep/chat/completions",
    ]
    assert server.received[0].headers["api-key"] == "fake-key"


async def test_claude_on_vertex() -> None:
    async with FakeProviderServer([FakeReply("json"), FakeReply("sse")]) as server:
        vertex = build_client(
            Settings(
                provider="vertex",
                model="claude-sonnet-4-5@20250929",
                project="p",
                credentials=Credentials(token="t"),  # type: ignore[no-untyped-call]
                base_url=server.root_url,
                max_retries=0,
            )
        )
        assert (await vertex.complete(REQUEST)).text == "json"
        events = [e async for e in vertex.stream(REQUEST)]
        await vertex.aclose()
    assert events[-1].response is not None and events[-1].response.text == "sse"
    assert server.received[1].path.endswith("claude-sonnet-4-5@20250929:streamRawPredict")


async def test_gemini_api_and_gemini_on_vertex() -> None:
    call = FakeToolCall("read_file", {"path": "a"})
    script = [
        FakeReply(tool_calls=[call], thinking="look first"),
        FakeReply("streamed"),
        FakeReply("vertex"),
    ]
    async with FakeProviderServer(script) as server:
        gemini = build_client(
            Settings(
                provider="gemini",
                model="gemini-3.8-flash",
                api_key="k",
                base_url=f"{server.root_url}/v1beta",
                max_retries=0,
            )
        )
        vertex = build_client(
            Settings(
                provider="vertex",
                model="gemini-2.5-flash",
                project="p",
                credentials=Credentials(token="t"),  # type: ignore[no-untyped-call]
                base_url=server.root_url,
                max_retries=0,
            )
        )
        async with gemini, vertex:
            first = await gemini.complete(REQUEST)
            events = [e async for e in gemini.stream(REQUEST)]
            third = await vertex.complete(REQUEST)
    assert first.tool_calls[0].arguments == {"path": "a"}
    assert next(p.text for p in first.message.parts if isinstance(p, ThinkingPart)) == "look first"
    assert events[-1].response is not None and events[-1].response.text == "streamed"
    assert third.text == "vertex"
    assert [r.path for r in server.received] == [
        "/v1beta/models/gemini-3.8-flash:generateContent",
        "/v1beta/models/gemini-3.8-flash:streamGenerateContent",
        "/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-flash:generateContent",
    ]


async def test_a_truncated_gemini_stream_is_invalid() -> None:
    async with FakeProviderServer([Fault.truncate(FakeReply("cut short here"))]) as server:
        gemini = build_client(
            Settings(
                provider="gemini",
                model="gemini-2.5-flash",
                api_key="k",
                base_url=f"{server.root_url}/v1beta",
                max_retries=0,
            )
        )
        async with gemini:
            with pytest.raises(ResponseInvalid):
                [e async for e in gemini.stream(REQUEST)]
