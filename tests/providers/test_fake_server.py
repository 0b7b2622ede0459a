"""The fault-injecting fake server: scripts, recording, every fault, clean shutdown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest

from agentloop._fake_server import FakeProviderServer, FakeReply, FakeToolCall, Fault
from agentloop.errors import (
    InsufficientCredits,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    ResponseInvalid,
)
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.providers.openai import OpenAIClient

REQUEST = ModelRequest(messages=(Message.user("hi"),))


async def test_script_then_default_then_exhaustion() -> None:
    async with FakeProviderServer([FakeReply("one"), FakeReply("two")]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            assert (await client.complete(REQUEST)).text == "one"
            assert (await client.complete(REQUEST)).text == "two"
            with pytest.raises(ProviderUnavailable, match="script exhausted"):
                await client.complete(REQUEST)
            server.default = FakeReply("fallback")
            assert (await client.complete(REQUEST)).text == "fallback"
        finally:
            await client.aclose()
    assert len(server.requests) == 4
    assert server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert server.received[0].path == "/v1/chat/completions"


async def test_callable_steps_see_the_request_body() -> None:
    def echo(body: Mapping[str, Any]) -> FakeReply:
        return FakeReply(f"you said {body['messages'][-1]['content']}")

    async with FakeProviderServer(default=echo) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            assert (await client.complete(REQUEST)).text == "you said hi"
        finally:
            await client.aclose()


async def test_streamed_tool_calls_round_trip() -> None:
    reply = FakeReply(tool_calls=[FakeToolCall("read_file", {"path": "a.txt"})])
    async with FakeProviderServer([reply]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            events = [e async for e in client.stream(REQUEST)]
        finally:
            await client.aclose()
    response = events[-1].response
    assert response is not None and response.tool_calls[0].arguments == {"path": "a.txt"}
    assert response.tool_calls[0].id == "call_fake_1_0"


async def test_status_fault_with_custom_body_and_headers() -> None:
    fault = Fault.http(402, "no money", {"x-extra": "1"})
    async with FakeProviderServer([fault]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            with pytest.raises(InsufficientCredits) as info:
                await client.complete(REQUEST)
        finally:
            await client.aclose()
    assert info.value.body == "no money" and info.value.request_id == "req_fake_1"


async def test_raw_http_view_of_faults() -> None:
    async with (
        FakeProviderServer(
            [
                Fault.redirect("https://other.example/x", 307),
                Fault.rate_limit(0.5),
                Fault.malformed(),
            ]
        ) as server,
        aiohttp.ClientSession() as session,
    ):
        url = f"{server.base_url}/chat/completions"
        async with session.post(url, json={}, allow_redirects=False) as first:
            assert first.status == 307 and first.headers["Location"] == "https://other.example/x"
        async with session.post(url, json={}) as second:
            assert second.status == 429 and second.headers["Retry-After"] == "0.5"
        async with session.post(url, json={}) as third:
            assert third.status == 200 and await third.text() == '{"choices": ['


async def test_hanging_request_is_released_on_close() -> None:
    server = await FakeProviderServer([Fault.hang(30)]).start()
    client = OpenAIClient("m", base_url=server.base_url, timeout=5)
    task = asyncio.create_task(client.complete(REQUEST))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    await server.close()
    with pytest.raises(ProviderError):
        await task
    await client.aclose()
    assert time.monotonic() - started < 2


async def test_hang_gives_a_read_timeout() -> None:
    async with FakeProviderServer([Fault.hang(5)]) as server:
        client = OpenAIClient("m", base_url=server.base_url, timeout=0.2)
        try:
            with pytest.raises(ProviderTimeout):
                await client.complete(REQUEST)
        finally:
            await client.aclose()


async def test_reset_then_recovery_on_the_next_request() -> None:
    async with FakeProviderServer([Fault.reset(), FakeReply("back")]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            with pytest.raises(ProviderUnavailable):
                await client.complete(REQUEST)
            assert (await client.complete(REQUEST)).text == "back"
        finally:
            await client.aclose()


async def test_truncated_stream_has_no_done() -> None:
    async with FakeProviderServer([Fault.truncate(FakeReply("x" * 80))]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            seen = []
            with pytest.raises(ResponseInvalid):
                async for event in client.stream(REQUEST):
                    seen.append(event.kind)
        finally:
            await client.aclose()
    assert "done" not in seen and "text_delta" in seen


async def test_slow_chunks_are_paced() -> None:
    async with FakeProviderServer([FakeReply("abcdefgh" * 3, chunk_delay=0.05)]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            started = time.monotonic()
            events = [e async for e in client.stream(REQUEST)]
        finally:
            await client.aclose()
    assert time.monotonic() - started >= 0.2 and events[-1].kind == "done"


async def test_port_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        _ = FakeProviderServer().base_url


async def test_anthropic_messages_format() -> None:
    from agentloop.providers.anthropic import AnthropicClient

    call = FakeToolCall("read_file", {"path": "a.txt"}, id="toolu_1")
    script = [
        FakeReply("hello", input_tokens=7, output_tokens=2),
        FakeReply("let me look", tool_calls=[call]),
        Fault.truncate(FakeReply("cut " * 20)),
    ]
    async with FakeProviderServer(script) as server:
        client = AnthropicClient("claude-test", api_key="k-1234", base_url=server.root_url)
        try:
            first = await client.complete(REQUEST)
            events = [e async for e in client.stream(REQUEST)]
            with pytest.raises(ResponseInvalid):
                async for _ in client.stream(REQUEST):
                    pass
        finally:
            await client.aclose()
    assert first.text == "hello" and (first.usage.input_tokens, first.usage.output_tokens) == (7, 2)
    response = events[-1].response
    assert response is not None and response.text == "let me look"
    assert [(c.id, c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("toolu_1", "read_file", {"path": "a.txt"})
    ]
    assert server.received[0].path == "/v1/messages"
