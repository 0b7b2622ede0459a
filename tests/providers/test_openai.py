"""OpenAIClient over real local HTTP: request encoding, replies, streams, fixtures, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from agentloop.errors import (
    AuthError,
    ContextLengthExceeded,
    FailurePhase,
    InsufficientCredits,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    ResponseInvalid,
    UnexpectedRedirect,
)
from agentloop.messages import Message, ToolCallPart, ToolResultPart, Usage
from agentloop.model import (
    ModelClient,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamEvent,
    ToolSpec,
)
from agentloop.providers.openai import (
    INVALID_JSON_KEY,
    ChatStreamAccumulator,
    OllamaClient,
    OpenAIClient,
    OpenRouterClient,
    decode_arguments,
    encode_request,
)
from agentloop.testing.fake_server import FakeProviderServer, FakeReply, FakeToolCall, Fault

from .conftest import serve_app

FIXTURES = Path("/work/shared/fixtures/openai-python/chat-completions-sse")
KEY = "sk-proj-TESTKEY-abcdef0123456789"
TOOL = ToolSpec("get_weather", "Weather for a city.", {"type": "object", "properties": {}})


@pytest.fixture
async def server() -> AsyncIterator[FakeProviderServer]:
    async with FakeProviderServer() as fake:
        yield fake


@pytest.fixture
async def client(server: FakeProviderServer) -> AsyncIterator[OpenAIClient]:
    c = OpenAIClient("gpt-test", api_key=KEY, base_url=server.base_url, timeout=0.5)
    yield c
    await c.aclose()


def request(*messages: Message, **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=messages or (Message.user("hi"),), **kwargs)


async def collect(client: ModelClient, req: ModelRequest) -> list[StreamEvent]:
    return [event async for event in client.stream(req)]


def final(events: list[StreamEvent]) -> ModelResponse:
    assert events[-1].kind == "done" and events[-1].response is not None
    assert all(e.kind != "done" for e in events[:-1])
    return events[-1].response


# --- request encoding ---------------------------------------------------------------------


def test_encoding_of_a_whole_transcript() -> None:
    call_a = ToolCallPart("c1", "get_weather", {"city": "Paris"})
    call_b = ToolCallPart("c2", "get_weather", {INVALID_JSON_KEY: "{city: Rome"})
    transcript = (
        Message.user("weather?"),
        Message.assistant("Let me look.", [call_a, call_b]),
        Message.tool_results(
            [
                ToolResultPart("c1", "get_weather", "sunny"),
                ToolResultPart("c2", "get_weather", "bad", is_error=True),
            ]
        ),
        Message.user("and tomorrow?"),
        Message.assistant("", [ToolCallPart("c3", "get_weather", {})]),
    )
    payload = encode_request(request(*transcript, system="Be brief.", tools=[TOOL]), "m")
    assert payload["model"] == "m"
    assert payload["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{city: Rome"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "bad"},
        {"role": "user", "content": "and tomorrow?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c3",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
    ]
    assert payload["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert "stream" not in payload


def test_each_message_is_encoded_once() -> None:
    message = Message.user("x")
    first = encode_request(request(message), "m")["messages"][0]
    second = encode_request(request(message), "m")["messages"][0]
    assert first is second


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
def test_settings_are_forwarded(choice: str, wire: object) -> None:
    settings = ModelSettings(
        temperature=0.2,
        max_tokens=50,
        top_p=0.9,
        stop=("END",),
        seed=7,
        tool_choice=choice,
        extra_body={"user": "u1", "temperature": 0.3},
    )
    payload = encode_request(request(settings=settings, model="override"), "m", stream=True)
    assert payload["model"] == "override"
    assert payload["temperature"] == 0.3  # extra_body wins
    assert (payload["max_tokens"], payload["top_p"], payload["stop"], payload["seed"]) == (
        50,
        0.9,
        ["END"],
        7,
    )
    assert payload["tool_choice"] == wire and payload["user"] == "u1"
    assert payload["stream"] is True and payload["stream_options"] == {"include_usage": True}


def test_max_tokens_field_depends_on_the_endpoint() -> None:
    assert OpenAIClient("m", api_key="k")._max_field == "max_completion_tokens"
    assert OllamaClient("m")._max_field == "max_tokens"
    assert OpenAIClient("m", base_url="http://x/v1", max_tokens_field="n")._max_field == "n"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", {}),
        ('{"a": 1}', {"a": 1}),
        ("{a: 1", {INVALID_JSON_KEY: "{a: 1"}),
        ("[1]", {INVALID_JSON_KEY: "[1]"}),
    ],
)
def test_decode_arguments_convention(raw: str, expected: dict[str, object]) -> None:
    assert decode_arguments(raw) == expected


# --- complete and stream against the fake server -------------------------------------------


async def test_complete_text(server: FakeProviderServer, client: OpenAIClient) -> None:
    server.push(FakeReply("Hello there", input_tokens=12, output_tokens=3))
    response = await client.complete(request(system="sys"))
    assert response.text == "Hello there" and response.tool_calls == ()
    assert response.usage == Usage(12, 3) and response.stop_reason == "stop"
    assert response.request_id == "req_fake_1" and response.model == "fake-model"
    assert server.received[0].headers["Authorization"] == f"Bearer {KEY}"
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "sys"}


async def test_complete_parallel_tool_calls(
    server: FakeProviderServer, client: OpenAIClient
) -> None:
    calls = [
        FakeToolCall("get_weather", {"city": "Paris"}, id="a"),
        FakeToolCall("get_weather", "{not json", id="b"),
    ]
    server.push(FakeReply("thinking", tool_calls=calls))
    response = await client.complete(request(tools=[TOOL]))
    assert response.text == "thinking" and response.stop_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCallPart("a", "get_weather", {"city": "Paris"}),
        ToolCallPart("b", "get_weather", {INVALID_JSON_KEY: "{not json"}),
    )


async def test_stream_text_and_parallel_tool_calls(
    server: FakeProviderServer, client: OpenAIClient
) -> None:
    calls = [
        FakeToolCall("get_weather", {"city": "Paris, France"}, id="a"),
        FakeToolCall("lookup", {"q": "a long query string"}, id="b"),
    ]
    server.push(FakeReply("Some text before the calls", tool_calls=calls))
    events = await collect(client, request())
    response = final(events)
    text = "".join(e.text for e in events if e.kind == "text_delta")
    assert text == response.text == "Some text before the calls"
    fragments: dict[int, str] = {}
    for e in events:
        if e.kind == "tool_call_delta":
            fragments[e.index] = fragments.get(e.index, "") + e.arguments
    assert {i: json.loads(v) for i, v in fragments.items()} == {
        0: {"city": "Paris, France"},
        1: {"q": "a long query string"},
    }
    assert [c.name for c in response.tool_calls] == ["get_weather", "lookup"]
    assert response.tool_calls[0].arguments == {"city": "Paris, France"}
    assert response.usage == Usage(10, 5) and response.stop_reason == "tool_calls"
    assert server.requests[0]["stream"] is True


async def test_truncated_stream_is_never_an_answer(
    server: FakeProviderServer, client: OpenAIClient
) -> None:
    server.push(Fault.truncate(FakeReply("a long answer that will be cut short")))
    with pytest.raises(ResponseInvalid) as info:
        await collect(client, request())
    err = info.value
    assert err.phase is FailurePhase.BODY and err.request_sent is True
    assert err.provider == "openai" and "[DONE]" in str(err)


async def test_truncated_json_body(server: FakeProviderServer, client: OpenAIClient) -> None:
    server.push(Fault.truncate())
    with pytest.raises(ResponseInvalid):
        await client.complete(request())


@pytest.mark.parametrize("stream", [False, True])
async def test_malformed_json(
    server: FakeProviderServer, client: OpenAIClient, stream: bool
) -> None:
    server.push(Fault.malformed())
    with pytest.raises(ResponseInvalid) as info:
        if stream:
            await collect(client, request())
        else:
            await client.complete(request())
    assert info.value.body is not None and '{"choices": [' in info.value.body


FAULTS = [
    (Fault.rate_limit(retry_after=2), RateLimited),
    (Fault.auth(), AuthError),
    (Fault.insufficient_credits(), InsufficientCredits),
    (Fault.quota(), InsufficientCredits),
    (Fault.context_overflow(), ContextLengthExceeded),
    (Fault.server_error(500), ProviderUnavailable),
    (Fault.server_error(503), ProviderUnavailable),
    (Fault.server_error(529), ProviderUnavailable),
    (Fault.redirect(), UnexpectedRedirect),
    (Fault.reset(), ProviderUnavailable),
    (Fault.hang(5), ProviderTimeout),
]


@pytest.mark.parametrize(("fault", "cls"), FAULTS)
@pytest.mark.parametrize("stream", [False, True])
async def test_faults_map_to_the_error_tree(
    server: FakeProviderServer,
    client: OpenAIClient,
    fault: Fault,
    cls: type[ProviderError],
    stream: bool,
) -> None:
    server.push(fault)
    with pytest.raises(cls) as info:
        if stream:
            await collect(client, request())
        else:
            await client.complete(request())
    err = info.value
    assert type(err) is cls and err.provider == "openai"
    assert KEY not in str(err) and KEY not in repr(err) and KEY not in (err.body or "")
    if isinstance(err, RateLimited):
        assert err.retry_after == 2.0 and err.request_id == "req_fake_1"


async def test_slow_chunks_within_the_idle_gap(server: FakeProviderServer) -> None:
    client = OpenAIClient("m", api_key=KEY, base_url=server.base_url, timeout=0.3)
    server.push(FakeReply("one two three four", chunk_delay=0.05))
    try:
        response = final(await collect(client, request()))
    finally:
        await client.aclose()
    assert response.text == "one two three four"


async def test_error_object_inside_a_stream(client: OpenAIClient) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"error": {"code": 502, "message": "upstream died"}}\n\n')
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    async with serve_app(app) as base:
        c = OpenRouterClient("m", api_key=KEY, base_url=f"{base}/v1")
        try:
            with pytest.raises(ProviderUnavailable) as info:
                await collect(c, request())
        finally:
            await c.aclose()
    assert info.value.provider == "openrouter" and "upstream died" in str(info.value)


async def test_variants_defaults() -> None:
    router = OpenRouterClient("m", api_key="k")
    ollama = OllamaClient("llama3")
    assert (router.provider, router.base_url) == ("openrouter", "https://openrouter.ai/api/v1")
    assert (ollama.provider, ollama.base_url) == ("ollama", "http://localhost:11434/v1")
    assert isinstance(ollama, ModelClient) and "k" not in repr(router)
    await router.aclose()
    await ollama.aclose()


async def test_ollama_sends_no_authorization(server: FakeProviderServer) -> None:
    server.push(FakeReply("ok"))
    c = OllamaClient("llama3", base_url=server.base_url)
    try:
        await c.complete(request())
    finally:
        await c.aclose()
    assert "Authorization" not in server.received[0].headers


# --- the recorded OpenAI streams, through the real HTTP path -------------------------------


def fixture_app(name: str) -> web.Application:
    raw = (FIXTURES / name).read_bytes()

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for start in range(0, len(raw), 777):  # odd-sized writes split lines and events
            await response.write(raw[start : start + 777])
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    return app


async def stream_fixture(name: str) -> tuple[list[StreamEvent], ModelResponse]:
    async with serve_app(fixture_app(name)) as base:
        c = OpenAIClient("gpt-4o", api_key=KEY, base_url=f"{base}/v1")
        try:
            events = await collect(c, request())
        finally:
            await c.aclose()
    return events, final(events)


def expected_from_fixture(name: str) -> dict[str, Any]:
    """Independently fold the fixture (choice 0) with plain json, for comparison."""
    calls: dict[int, dict[str, str]] = {}
    text, finish, usage = "", None, None
    for line in (FIXTURES / name).read_text().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            if choice["index"] != 0:
                continue
            finish = choice["finish_reason"] or finish
            delta = choice["delta"]
            text += delta.get("content") or delta.get("refusal") or ""
            for tc in delta.get("tool_calls") or []:
                entry = calls.setdefault(tc["index"], {"id": "", "name": "", "args": ""})
                entry["id"] = entry["id"] or tc.get("id", "")
                entry["name"] = entry["name"] or tc.get("function", {}).get("name", "")
                entry["args"] += tc.get("function", {}).get("arguments", "")
    return {"text": text, "calls": calls, "finish": finish, "usage": usage}


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.sse")), ids=lambda p: p.name)
async def test_recorded_streams(path: Path) -> None:
    events, response = await stream_fixture(path.name)
    expected = expected_from_fixture(path.name)
    assert response.text == expected["text"]
    assert response.stop_reason == expected["finish"]
    assert response.usage == Usage(
        expected["usage"]["prompt_tokens"], expected["usage"]["completion_tokens"]
    )
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        (v["id"], v["name"], json.loads(v["args"])) for _, v in sorted(expected["calls"].items())
    ]
    assert "".join(e.text for e in events if e.kind == "text_delta") == response.text
    assert response.model == "gpt-4o-2024-08-06"


async def test_recorded_parallel_tools_in_detail() -> None:
    _, response = await stream_fixture("parse_multiple_pydantic_tools.sse")
    assert [c.name for c in response.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert response.tool_calls[0].arguments == {"city": "Edinburgh", "country": "GB", "units": "c"}
    assert response.stop_reason == "tool_calls" and response.usage == Usage(149, 60)


async def test_recorded_refusal_and_length() -> None:
    _, refusal = await stream_fixture("parse_pydantic_model_refusal.sse")
    assert refusal.text.startswith("I'm sorry")
    _, length = await stream_fixture("parse_max_tokens_reached.sse")
    assert length.stop_reason == "length"


# --- the accumulator, pure -----------------------------------------------------------------


def test_accumulator_without_indexes_and_ids() -> None:
    acc = ChatStreamAccumulator(provider="p", model="m")

    def chunk(**delta: object) -> str:
        return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})

    acc.feed(chunk(tool_calls=[{"id": "x", "function": {"name": "a", "arguments": "{"}}]))
    acc.feed(chunk(tool_calls=[{"function": {"arguments": "}"}}]))
    acc.feed(chunk(tool_calls=[{"id": "y", "function": {"name": "b", "arguments": ""}}]))
    acc.feed("")
    acc.feed("[DONE]")
    response = acc.response()
    assert [(c.id, c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("x", "a", {}),
        ("y", "b", {}),
    ]


def test_accumulator_rejects_nameless_calls_and_garbage() -> None:
    acc = ChatStreamAccumulator(provider="p", model="m")
    acc.feed(json.dumps({"choices": [{"delta": {"tool_calls": [{"index": 0}]}}]}))
    acc.feed("[DONE]")
    with pytest.raises(ResponseInvalid):
        acc.response()
    with pytest.raises(ResponseInvalid):
        acc.feed("[1, 2]")
    with pytest.raises(ResponseInvalid):
        acc.feed(json.dumps({"choices": [{"delta": "nope"}]}))


def test_stream_errors_redact_the_key() -> None:
    acc = ChatStreamAccumulator(provider="p", model="m", secrets=[KEY])
    with pytest.raises(ProviderUnavailable) as info:
        acc.feed(json.dumps({"error": {"message": f"bad key {KEY}"}}))
    with pytest.raises(ResponseInvalid) as bad:
        acc.feed(f"not json {KEY}")
    for err in (info.value, bad.value):
        assert KEY not in str(err) and KEY not in (err.body or "")
