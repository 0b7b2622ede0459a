"""Prompt caching: cached-token usage from every wire format, breakpoints, stable prefixes."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, ModelSettings, RunConfig, tool
from agentloop.errors import ModelRefused
from agentloop.messages import Message, ToolCallPart, ToolResultPart, Usage
from agentloop.model import ModelRequest, ToolSpec
from agentloop.providers import anthropic, gemini, openai
from agentloop.providers._sse import SSEDecoder
from agentloop.providers.anthropic import AnthropicClient, AnthropicStreamState
from agentloop.providers.openai import ChatStreamAccumulator, OpenAIClient, prompt_cache_key
from agentloop.testing import (
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
    FunctionModel,
    call,
    reply,
)

FIXTURES = Path("/work/shared/fixtures")
ANTHROPIC_SSE = sorted((FIXTURES / "anthropic-sdk-python/messages-sse").glob("*.sse"))
ANTHROPIC_EXCHANGES = sorted((FIXTURES / "anthropic-sdk-python/recorded-exchanges").glob("*.json"))
OPENAI_SSE = sorted((FIXTURES / "openai-python/chat-completions-sse").glob("*.sse"))


# --- usage from recorded traffic and from the specs' shapes ------------------------------------


def _anthropic_stream(
    text: str, keep: list[AnthropicStreamState] | None = None
) -> AnthropicStreamState:
    state = AnthropicStreamState()
    if keep is not None:
        keep.append(state)
    decoder = SSEDecoder()
    for event in [*decoder.feed(text.encode()), *decoder.close()]:
        state.feed(event)
    return state


def _recorded_usage(body: Any) -> dict[str, int] | None:
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    if isinstance(body, dict) and isinstance(body.get("usage"), dict):
        usage: dict[str, int] = body["usage"]
        return usage
    return None


@pytest.mark.parametrize("path", ANTHROPIC_EXCHANGES, ids=lambda p: p.name[:40])
def test_recorded_anthropic_replies_decode_cache_fields(path: Path) -> None:
    for exchange in json.loads(path.read_text()):
        body = exchange["response"]["body"]
        usage = _recorded_usage(body)
        if usage is None or exchange["response"]["status_code"] != 200:
            continue
        parsed = anthropic.parse_response(body if isinstance(body, dict) else json.loads(body))
        read = usage.get("cache_read_input_tokens") or 0
        write = usage.get("cache_creation_input_tokens") or 0
        assert parsed.usage.cache_read_tokens == read
        assert parsed.usage.cache_write_tokens == write
        assert parsed.usage.input_tokens == usage["input_tokens"] + read + write


@pytest.mark.parametrize("path", ANTHROPIC_SSE, ids=lambda p: p.name)
def test_recorded_anthropic_streams_decode_cache_fields(path: Path) -> None:
    keep: list[AnthropicStreamState] = []
    with contextlib.suppress(ModelRefused):  # a refusal raises at message_stop, usage is in
        _anthropic_stream(path.read_text(), keep)
    state = keep[0]
    # the last usage object that carries prompt fields (start, or a later delta)
    prompt: dict[str, Any] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:])
        usage = event.get("usage") or event.get("message", {}).get("usage") or {}
        if "input_tokens" in usage:
            prompt = usage
    read = prompt.get("cache_read_input_tokens") or 0
    write = prompt.get("cache_creation_input_tokens") or 0
    assert state.usage.cache_read_tokens == read and state.usage.cache_write_tokens == write
    assert state.usage.input_tokens == prompt["input_tokens"] + read + write


@pytest.mark.parametrize("path", OPENAI_SSE, ids=lambda p: p.name)
def test_recorded_openai_streams_decode_usage(path: Path) -> None:
    accumulator = ChatStreamAccumulator(provider="openai", model="gpt-4o")
    decoder = SSEDecoder()
    events = [*decoder.feed(path.read_bytes()), *decoder.close()]
    if "refusal" in path.name:  # SPEC 16: the refusal raises as it arrives
        with pytest.raises(ModelRefused):
            for event in events:
                accumulator.feed(event.data)
        return
    for event in events:
        accumulator.feed(event.data)
    usage = accumulator.response().usage
    assert usage.input_tokens > 0 and usage.cache_read_tokens == 0  # 2024 traffic: no cache


ANTHROPIC_CACHED = {
    "input_tokens": 50,
    "cache_creation_input_tokens": 200,
    "cache_read_input_tokens": 1000,
    "output_tokens": 7,
}


def test_anthropic_reply_with_cache_hits() -> None:
    body = {"content": [], "model": "claude-sonnet-4-5", "usage": ANTHROPIC_CACHED}
    usage = anthropic.parse_response(body).usage
    assert usage == Usage(1250, 7, cache_read_tokens=1000, cache_write_tokens=200)
    assert usage.uncached_input_tokens == 50


def test_anthropic_stream_with_cache_hits_and_a_cumulative_delta() -> None:
    start = {"type": "message_start", "message": {"model": "m", "usage": ANTHROPIC_CACHED}}
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": 9}}  # fmt: skip
    text = "".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n"
        for e in (start, delta, {"type": "message_stop"})
    )
    state = _anthropic_stream(text)
    assert state.usage == Usage(1250, 9, cache_read_tokens=1000, cache_write_tokens=200)
    full = {**delta, "usage": {**ANTHROPIC_CACHED, "cache_read_input_tokens": 0}}
    state = _anthropic_stream(text.replace(json.dumps(delta), json.dumps(full)))
    assert state.usage == Usage(250, 7, cache_read_tokens=0, cache_write_tokens=200)


OPENAI_CACHED = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
}


def test_openai_reply_and_stream_with_cached_tokens() -> None:
    body = {"choices": [{"message": {"content": "hi"}}], "usage": OPENAI_CACHED}
    usage = openai.parse_completion(body, "", provider="openai", model="gpt-4o").usage
    assert usage == Usage(2006, 300, cache_read_tokens=1920)
    accumulator = ChatStreamAccumulator(provider="openai", model="gpt-4o")
    accumulator.feed(json.dumps({"choices": [{"delta": {"content": "hi"}}]}))
    accumulator.feed(json.dumps({"choices": [], "usage": OPENAI_CACHED}))
    accumulator.feed("[DONE]")
    assert accumulator.response().usage == usage


def test_openrouter_cache_writes() -> None:
    details = {"cached_tokens": 10, "cache_write_tokens": 90}
    body = {"choices": [{"message": {"content": "hi"}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 1,
                      "prompt_tokens_details": details}}  # fmt: skip
    usage = openai.parse_completion(body, "", provider="openrouter", model="m").usage
    assert usage == Usage(120, 1, cache_read_tokens=10, cache_write_tokens=90)


def test_gemini_reply_and_stream_with_cached_content() -> None:
    meta = {"promptTokenCount": 4000, "cachedContentTokenCount": 3000, "candidatesTokenCount": 5}
    body = {"candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": "STOP"}],
            "usageMetadata": meta}  # fmt: skip
    assert gemini.parse_response(body).usage == Usage(4000, 5, cache_read_tokens=3000)
    state = gemini.GeminiStreamState()
    state.feed_chunk({"candidates": [{"content": {"parts": [{"text": "h"}]}}]})
    state.feed_chunk({**body, "candidates": [{"finishReason": "STOP"}]})
    assert state.usage == Usage(4000, 5, cache_read_tokens=3000)


def test_usage_round_trips_and_reads_old_rows() -> None:
    usage = Usage(10, 2, cache_read_tokens=6, cache_write_tokens=1)
    assert Usage.from_dict(usage.to_dict()) == usage
    assert Usage.from_dict({"input_tokens": 3, "output_tokens": 1}) == Usage(3, 1)
    assert Usage(3, 1).to_dict() == {"input_tokens": 3, "output_tokens": 1}
    assert (usage + usage).cache_read_tokens == 12 and usage.total_tokens == 12


# --- breakpoints and the byte-stable prefix ------------------------------------------------------


@tool
def read_page(page: int) -> str:
    """Read one page."""
    return f"page {page}: " + "lorem ipsum " * 20


def _recorded_requests(turns: int, *, parallel: int = 1) -> list[ModelRequest]:
    requests: list[ModelRequest] = []

    def model(request: ModelRequest) -> Any:
        requests.append(request)
        if len(requests) < turns:
            return [call("read_page", {"page": len(requests) * 10 + i}) for i in range(parallel)]
        return reply("done")

    agent = Agent(FunctionModel(model), tools=[read_page], system="Read carefully.",
                  session_id="session-1")  # fmt: skip
    agent.run_sync("Read it all.")
    agent.run_sync("Again, page 1 only.")  # a second run: history + a new user message
    return requests


def _strip_breakpoints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_breakpoints(v) for v in value]
    return value


def _cache_order(payload: dict[str, Any], keys: tuple[str, ...]) -> str:
    """The payload in the provider's cache order, compact, with the transcript left open."""
    parts = [json.dumps(_strip_breakpoints(payload.get(k)), separators=(",", ":")) for k in keys]
    return "".join(parts).rstrip("]}")


Encoder = Callable[[ModelRequest], dict[str, Any]]
ENCODERS: dict[str, tuple[Encoder, tuple[str, ...]]] = {
    "anthropic": (
        lambda r: anthropic.build_payload(r, model="m", max_tokens=10, stream=False),
        ("tools", "system", "messages"),
    ),
    "openai": (lambda r: openai.encode_request(r, "m", cache_key=True), ("tools", "messages")),
    "gemini": (gemini.build_payload, ("tools", "systemInstruction", "contents")),
}


@pytest.mark.parametrize("provider", sorted(ENCODERS))
@pytest.mark.parametrize("parallel", [1, 3])
def test_each_request_starts_with_the_previous_one_byte_for_byte(
    provider: str, parallel: int
) -> None:
    encode, keys = ENCODERS[provider]
    requests = _recorded_requests(6, parallel=parallel)
    payloads = [encode(r) for r in requests]
    for before, after in itertools.pairwise(payloads):
        assert _cache_order(after, keys).startswith(_cache_order(before, keys))
        rest = {k: v for k, v in after.items() if k not in keys}
        assert rest == {k: v for k, v in before.items() if k not in keys}  # same options
    again = [encode(r) for r in requests]  # encoding twice changes nothing (cached wire forms)
    assert json.dumps(again) == json.dumps(payloads)


def _marked_blocks(payload: Mapping[str, Any]) -> list[str]:
    marked = []
    if any("cache_control" in t for t in payload.get("tools", ())):
        marked.append("tools")
    if isinstance(payload.get("system"), list) and "cache_control" in payload["system"][-1]:
        marked.append("system")
    for i, message in enumerate(payload["messages"]):
        for j, block in enumerate(message["content"]):
            if "cache_control" in block:
                marked.append(f"m{i}.{j}")
    return marked


def test_anthropic_breakpoints_on_tools_system_and_the_two_transcript_ends() -> None:
    requests = _recorded_requests(4, parallel=2)
    payloads = [anthropic.build_payload(r, model="m", max_tokens=10, stream=False)
                for r in requests]  # fmt: skip
    assert _marked_blocks(payloads[0]) == ["tools", "system", "m0.0"]
    third = payloads[2]  # user, assistant, user(results), assistant, user(results)
    assert _marked_blocks(third) == ["tools", "system", "m2.1", "m4.1"]
    assert all(len(_marked_blocks(p)) <= 4 for p in payloads)
    assert third["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    # the shared, cached wire blocks were never marked in place
    plain = anthropic.encode_messages(tuple(requests[2].messages))
    assert "cache_control" not in json.dumps(plain)


def test_cache_off_sends_no_breakpoint_and_no_key() -> None:
    request = _recorded_requests(3)[2]
    off = ModelRequest(
        messages=request.messages, tools=request.tools, system=request.system,
        settings=ModelSettings(cache=False), session_id="s",
    )  # fmt: skip
    body = anthropic.build_payload(off, model="m", max_tokens=10, stream=False)
    assert "cache_control" not in json.dumps(body) and body["system"] == "Read carefully."
    assert "prompt_cache_key" not in openai.encode_request(off, "m", cache_key=True)


def test_openai_prompt_cache_key_per_session_and_server() -> None:
    request = ModelRequest(messages=[Message.user("hi")], session_id="user@example.com")
    key = prompt_cache_key("user@example.com")
    assert openai.encode_request(request, "m", cache_key=True)["prompt_cache_key"] == key
    assert key.startswith("agentloop-") and len(key) <= 64 and "example" not in key
    assert "prompt_cache_key" not in openai.encode_request(request, "m")
    no_session = ModelRequest(messages=[Message.user("hi")])
    assert "prompt_cache_key" not in openai.encode_request(no_session, "m", cache_key=True)
    mine = ModelSettings(extra_body={"prompt_cache_key": "mine"})
    extra = ModelRequest(messages=[Message.user("hi")], session_id="s", settings=mine)
    assert openai.encode_request(extra, "m", cache_key=True)["prompt_cache_key"] == "mine"
    assert OpenAIClient("gpt-4o", api_key="k")._cache_key
    assert not OpenAIClient("m", base_url="http://127.0.0.1:1/v1")._cache_key


def test_engine_requests_carry_the_session_id() -> None:
    requests = _recorded_requests(2)
    assert {r.session_id for r in requests} == {"session-1"}


# --- on the wire ------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_breakpoints_on_the_wire(stream: bool) -> None:
    script = [FakeReply(tool_calls=[FakeToolCall("read_page", {"page": 1})]),
              FakeReply(tool_calls=[FakeToolCall("read_page", {"page": 2})]),
              FakeReply("done")]  # fmt: skip
    async with FakeProviderServer(script) as server:
        client = AnthropicClient("claude-test", api_key="sk-ant-x", base_url=server.root_url)
        agent = Agent(client, tools=[read_page], system="Be brief.",
                      config=RunConfig(stream=stream))  # fmt: skip
        run = await agent.run("read two pages")
        await client.aclose()
    assert run.output == "done"
    bodies = server.requests
    assert [_marked_blocks(b) for b in bodies] == [
        ["tools", "system", "m0.0"],
        ["tools", "system", "m0.0", "m2.0"],
        ["tools", "system", "m2.0", "m4.0"],
    ]
    assert bodies[1]["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]


async def test_openai_on_a_local_server_gets_no_cache_key() -> None:
    async with FakeProviderServer([FakeReply("done")]) as server:
        client = OpenAIClient("fake-model", api_key="k", base_url=server.base_url)
        await Agent(client).run("hi")
        await client.aclose()
    assert "prompt_cache_key" not in server.requests[0]


def test_tool_results_merge_keeps_the_prefix() -> None:
    """A user message right after tool results joins that wire message: still a prefix."""
    base = [Message.user("go"), Message.assistant("", [ToolCallPart("c1", "t", {})]),
            Message.tool_results([ToolResultPart("c1", "t", "ok")])]  # fmt: skip
    tools = [ToolSpec("t", "T.", {"type": "object", "properties": {}})]
    first = ModelRequest(messages=base, tools=tools, system="S")
    second = ModelRequest(messages=[*base, Message.user("and?")], tools=tools, system="S")
    keys = ("tools", "system", "messages")
    encode = ENCODERS["anthropic"][0]
    assert _cache_order(encode(second), keys).startswith(_cache_order(encode(first), keys))
