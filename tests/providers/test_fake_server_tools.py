"""``agentloop fake-server`` plays provider tools (SPEC 24) and holds clients to their rules.

A scripted ``web_search`` becomes the provider's own blocks (Anthropic ``server_tool_use`` and
``web_search_tool_result``, a Responses ``web_search_call``); a later request whose blocks
changed or vanished gets the provider's error; ``finish_reason = "pause_turn"`` is a paused
Anthropic turn the agent continues.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Agent, RunConfig
from agentloop.errors import BadRequestError, ModelNotFound
from agentloop.messages import Message, ProviderToolCallPart, ProviderToolResultPart
from agentloop.model import ModelRequest
from agentloop.provider_tools import WebSearch
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import FakeProviderServer, FakeReply


def client(server: FakeProviderServer, provider: str) -> Any:
    if provider == "anthropic":
        settings = Settings(provider="anthropic", model="claude-sonnet-4-5", api_key="sk-ant-x",
                            base_url=server.root_url, max_retries=0)  # fmt: skip
    else:
        settings = Settings(provider="openai", model="gpt-5", api_key="sk-x", api="responses",
                            base_url=server.base_url, max_retries=0)  # fmt: skip
    return build_client(settings)


@pytest.mark.parametrize("provider", ["anthropic", "responses"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_scripted_search_round_trips_twice(provider: str, stream: bool) -> None:
    script = [FakeReply("It loops.", web_search=("agent loops",)), FakeReply("Yes."),
              FakeReply("Sure.")]  # fmt: skip
    async with FakeProviderServer(script) as server:
        agent = Agent(client(server, provider), provider_tools=[WebSearch()],
                      config=RunConfig(stream=stream))  # fmt: skip
        first = await agent.run("does it loop?")
        await agent.run("really?")
        await agent.run("sure?")
        await agent.aclose()
    assert first.output == "It loops." and first.usage.provider_tool_calls == {"web_search": 1}
    call = agent.history[1].parts[0]
    assert isinstance(call, ProviderToolCallPart) and call.arguments.get("query") == "agent loops"
    assert len(server.requests) == 3


async def test_a_changed_block_is_the_providers_error() -> None:
    async with FakeProviderServer([FakeReply("ok", web_search=("q",))]) as server:
        anthropic = client(server, "anthropic")
        reply = await anthropic.complete(
            ModelRequest(messages=[Message.user("x")], provider_tools=[WebSearch()])
        )
        call, result = reply.message.parts[:2]
        assert isinstance(result, ProviderToolResultPart) and result.raw is not None
        forged = ProviderToolResultPart(result.call_id, result.name, result.content,
                                        provider="anthropic",
                                        raw={**result.raw, "content": []})  # fmt: skip
        history = [Message.user("x"), Message("assistant", (call, forged)), Message.user("y")]
        with pytest.raises(BadRequestError, match="Invalid `encrypted_content`"):
            await anthropic.complete(ModelRequest(messages=history, provider_tools=[WebSearch()]))
        lost = [Message.user("x"), Message("assistant", (call,)), Message.user("y")]
        with pytest.raises(BadRequestError, match="without a corresponding"):
            await anthropic.complete(ModelRequest(messages=lost, provider_tools=[WebSearch()]))
        await anthropic.aclose()


async def test_a_changed_item_is_not_found_on_responses() -> None:
    async with FakeProviderServer([FakeReply("ok", web_search=("q",))]) as server:
        responses = client(server, "responses")
        reply = await responses.complete(
            ModelRequest(messages=[Message.user("x")], provider_tools=[WebSearch()])
        )
        call = reply.message.parts[0]
        assert isinstance(call, ProviderToolCallPart) and call.raw is not None
        forged = ProviderToolCallPart(call.id, call.name, {}, provider="openai",
                                      raw={**call.raw, "status": "failed"})  # fmt: skip
        history = [Message.user("x"), Message("assistant", (forged,)), Message.user("y")]
        with pytest.raises(ModelNotFound, match="not found"):
            await responses.complete(ModelRequest(messages=history, provider_tools=[WebSearch()]))
        await responses.aclose()


async def test_a_scripted_pause_turn_is_continued() -> None:
    script = {"steps": [{"web_search": ["q"], "finish_reason": "pause_turn"}, {"text": "Done."}]}
    async with FakeProviderServer.from_script(script) as server:
        agent = Agent(client(server, "anthropic"), provider_tools=[WebSearch()])
        run = await agent.run("go")
        await agent.aclose()
    assert run.output == "Done." and not run.paused
    last = server.requests[1]["messages"][-1]
    assert last["role"] == "assistant" and last["content"][0]["type"] == "server_tool_use"
