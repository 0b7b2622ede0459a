"""AnthropicClient against a real local HTTP server replaying the SDK's recorded traffic."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agentloop.errors import (
    AuthError,
    BadRequestError,
    ConfigurationError,
    ContextLengthExceeded,
    InsufficientCredits,
    ModelNotFound,
    ModelRefused,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    ResponseInvalid,
    StreamError,
)
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import (
    INVALID_JSON_KEY,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamEvent,
    ToolSpec,
)
from agentloop.providers.anthropic import AnthropicClient, encode_messages
from agentloop.providers.retrying import RetryingClient

FIXTURES = Path("/work/shared/fixtures/anthropic-sdk-python")
SSE_FILES = sorted((FIXTURES / "messages-sse").glob("*.sse"))
EXCHANGES = sorted((FIXTURES / "recorded-exchanges").glob("*.json"))
TEXTS = {p: p.read_text() for p in [*SSE_FILES, *EXCHANGES]}
KEY = "sk-ant-test-0123456789abcdef"
REQUEST = ModelRequest(messages=[Message.user("hi")])


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"{}"
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Script:
    replies: list[Reply] = field(default_factory=list)
    received: list[tuple[dict[str, str], Any]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.received.append((dict(request.headers), await request.json()))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        headers = {"Content-Type": reply.content_type, **reply.headers}
        return web.Response(status=reply.status, body=reply.body, headers=headers)


@pytest.fixture
async def server() -> AsyncIterator[tuple[Script, str]]:
    script = Script()
    app = web.Application()
    app.router.add_post("/v1/messages", script.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield script, f"http://127.0.0.1:{test_server.port}"
    finally:
        await test_server.close()


@pytest.fixture
async def make_client(
    server: tuple[Script, str],
) -> AsyncIterator[Callable[..., AnthropicClient]]:
    clients: list[AnthropicClient] = []

    def make(**kwargs: Any) -> AnthropicClient:
        client = AnthropicClient("claude-test", api_key=KEY, base_url=server[1], **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


def sse(path: Path) -> Reply:
    return Reply(body=path.read_bytes(), content_type="text/event-stream")


def as_json(body: Any, status: int = 200, **headers: str) -> Reply:
    return Reply(status=status, body=json.dumps(body).encode(), headers=headers)


def expected_from_sse(text: str) -> tuple[str, list[str]]:
    """Text and tool names of a recorded stream, read independently of the adapter.

    Server-side tools (``server_tool_use``) and other unknown blocks are skipped by the adapter.
    """
    chunks: list[str] = []
    tools: list[str] = []
    stopped: set[int] = set()
    starts: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = json.loads(line[5:])
        if data["type"] == "content_block_start":
            starts[data["index"]] = data["content_block"]
        elif data["type"] == "content_block_stop":
            stopped.add(data["index"])
        elif data["type"] == "content_block_delta" and data["delta"]["type"] == "text_delta":
            chunks.append(data["delta"]["text"])
    cut = '"stop_reason":"max_tokens"' in text  # a cut keeps its unfinished tool call
    for index in sorted(starts):
        if starts[index]["type"] == "tool_use" and (index in stopped or cut):
            tools.append(starts[index]["name"])
    return "".join(chunks), tools


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


# --- every recorded stream -------------------------------------------------------------------


REFUSED = [p for p in SSE_FILES if '"stop_reason":"refusal"' in TEXTS[p]]
ANSWERED = [p for p in SSE_FILES if p not in REFUSED]


@pytest.mark.parametrize("path", ANSWERED, ids=[p.stem for p in ANSWERED])
async def test_every_recorded_stream_parses(
    path: Path, server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    server[0].replies = [sse(path)]
    events = await collect(make_client().stream(REQUEST))
    text, tools = expected_from_sse(TEXTS[path])
    assert events[-1].kind == "done" and sum(e.kind == "done" for e in events) == 1
    response = events[-1].response
    assert response is not None
    assert "".join(e.text for e in events if e.kind == "text_delta") == text
    assert response.text == text
    assert [c.name for c in response.tool_calls] == tools
    assert response.model.startswith("claude")
    assert response.usage.input_tokens > 0 and response.stop_reason is not None


@pytest.mark.parametrize("path", REFUSED, ids=[p.stem for p in REFUSED])
async def test_every_recorded_refusal_is_model_refused_with_its_text(
    path: Path, server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    server[0].replies = [sse(path)]
    events: list[StreamEvent] = []
    with pytest.raises(ModelRefused) as info:
        async for event in make_client().stream(REQUEST):
            events.append(event)
    text, _ = expected_from_sse(TEXTS[path])
    assert info.value.reason == "refusal" and info.value.text == text
    assert all(e.kind != "done" for e in events)
    assert "".join(e.text for e in events if e.kind == "text_delta") == text


async def test_streamed_tool_input_fragments_assemble(
    server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    server[0].replies = [sse(FIXTURES / "messages-sse" / "tool_use_response.sse")]
    events = await collect(make_client().stream(REQUEST))
    deltas = [e for e in events if e.kind == "tool_call_delta"]
    assert "".join(d.arguments for d in deltas) == '{"location": "Paris"}'
    assert {d.call_id for d in deltas} == {"toolu_01NRLabsLyVHZPKxbKvkfSMn"}
    response = events[-1].response
    assert response is not None and response.stop_reason == "tool_use"
    assert response.tool_calls[0].arguments == {"location": "Paris"}


async def test_a_tool_block_cut_by_max_tokens_is_kept_with_its_raw_input(
    server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    """The engine answers it with the cut-off soft text (it used to be dropped silently)."""
    server[0].replies = [sse(FIXTURES / "messages-sse" / "incomplete_partial_json_response.sse")]
    events = await collect(make_client().stream(REQUEST))
    response = events[-1].response
    assert response is not None and response.stop_reason == "max_tokens"
    assert response.text.startswith("I'll create")
    [call] = response.tool_calls
    streamed = "".join(e.arguments for e in events if e.kind == "tool_call_delta")
    assert call.name == "make_file" and call.arguments == {INVALID_JSON_KEY: streamed}


# --- every recorded exchange -----------------------------------------------------------------


def exchange_reply(exchange: dict[str, Any]) -> Reply:
    response = exchange["response"]
    headers = {
        k: v
        for k, v in response["headers"].items()
        if k.lower() in ("x-should-retry", "request-id")
    }
    body = response["body"]
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    kind = response["headers"].get("content-type", "application/json").split(";")[0]
    return Reply(response["status_code"], raw, kind, headers)


def check_against_body(response: ModelResponse, body: Any) -> None:
    if isinstance(body, str):
        text, tools = expected_from_sse(body)
        assert response.text == text and [c.name for c in response.tool_calls] == tools
        return
    texts = [b["text"] for b in body["content"] if b["type"] == "text"]
    calls = [(b["id"], b["name"], b["input"]) for b in body["content"] if b["type"] == "tool_use"]
    assert response.text == "".join(texts)
    assert [(c.id, c.name, dict(c.arguments)) for c in response.tool_calls] == calls
    assert response.stop_reason == body["stop_reason"] and response.model == body["model"]


@pytest.mark.parametrize("path", EXCHANGES, ids=[p.stem[-12:] for p in EXCHANGES])
async def test_every_recorded_exchange_replays(
    path: Path, server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    exchanges = json.loads(TEXTS[path])
    server[0].replies = [exchange_reply(e) for e in exchanges]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    client = RetryingClient(make_client(), sleep=sleep)
    index = 0
    while index < len(exchanges):
        final = exchanges[index]
        while final["response"]["status_code"] == 429:  # the retrying client absorbs these
            index += 1
            final = exchanges[index]
        streaming = isinstance(final["response"]["body"], str)
        status = final["response"]["status_code"]
        if status == 400:
            with pytest.raises(BadRequestError) as info:
                await client.complete(REQUEST)
            assert info.value.attempts == 1 and getattr(info.value, "should_retry", None) is False
        elif streaming:
            events = await collect(client.stream(REQUEST))
            assert events[-1].response is not None
            check_against_body(events[-1].response, final["response"]["body"])
        else:
            check_against_body(await client.complete(REQUEST), final["response"]["body"])
        index += 1
    rate_limited = sum(e["response"]["status_code"] == 429 for e in exchanges)
    assert len(waits) == rate_limited and len(server[0].received) == len(exchanges)


def to_messages(raw: list[dict[str, Any]]) -> list[Message]:
    """Recorded request messages as agentloop messages (tool results as a ``tool`` message)."""
    out: list[Message] = []
    for message in raw:
        content = message["content"]
        if isinstance(content, str):
            out.append(Message(message["role"], ()) if not content else Message.user(content))
            continue
        if message["role"] == "assistant":
            texts = "".join(b.get("text", "") for b in content if b["type"] == "text")
            calls = [ToolCallPart(b["id"], b["name"], b["input"]) for b in content
                     if b["type"] == "tool_use"]  # fmt: skip
            out.append(Message.assistant(texts, calls))
        else:
            results = [
                ToolResultPart(b["tool_use_id"], "tool", b["content"], b.get("is_error", False))
                for b in content
                if b["type"] == "tool_result"
            ]
            out.append(Message.tool_results(results))
    return out


def normalise(messages: list[dict[str, Any]]) -> list[tuple[str, list[Any]]]:
    out: list[tuple[str, list[Any]]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = [
            (b["type"], b.get("text"), b.get("id") or b.get("tool_use_id"), b.get("input"),
             b.get("content"))
            for b in content
        ]  # fmt: skip
        if out and out[-1][0] == message["role"]:  # the API merges same-role neighbours
            out[-1][1].extend(blocks)
        else:
            out.append((message["role"], blocks))
    return out


@pytest.mark.parametrize("path", [p for p in EXCHANGES if "tools" in p.name])
def test_request_encoding_matches_recorded_requests(path: Path) -> None:
    for exchange in json.loads(path.read_text()):
        raw = exchange["request"]["body"]["messages"]
        kinds = {b["type"] for m in raw if isinstance(m["content"], list) for b in m["content"]}
        if not kinds <= {"text", "tool_use", "tool_result"}:
            continue  # server-side tool blocks are outside agentloop's message model
        encoded = encode_messages(tuple(to_messages(raw)))
        assert normalise(encoded) == normalise(raw)


# --- request shape ---------------------------------------------------------------------------


async def test_request_headers_system_tools_and_settings(
    server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    script = server[0]
    script.replies = [as_json({"content": [], "model": "m", "stop_reason": "end_turn"})]
    request = ModelRequest(
        messages=[
            Message.user("go"),
            Message.assistant("calling", [ToolCallPart("t1", "read", {"p": 1}),
                                          ToolCallPart("t2", "read", {"p": 2})]),
            Message.tool_results([ToolResultPart("t1", "read", "ok"),
                                  ToolResultPart("t2", "read", "boom", is_error=True)]),
            Message.user("and then?"),
        ],
        tools=[ToolSpec("read", "Read it.", {"type": "object", "properties": {}})],
        system="Be careful.",
        settings=ModelSettings(temperature=0.5, max_tokens=99, top_p=0.9, stop=("X",),
                               tool_choice="required", cache=False),
        model="claude-override",
    )  # fmt: skip
    await make_client(headers={"anthropic-beta": "b1"}).complete(request)
    headers, body = script.received[0]
    assert headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
    assert headers["anthropic-beta"] == "b1"
    assert body["model"] == "claude-override" and body["system"] == "Be careful."
    assert body["max_tokens"] == 99 and body["temperature"] == 0.5 and body["top_p"] == 0.9
    assert body["stop_sequences"] == ["X"] and body["tool_choice"] == {"type": "any"}
    assert body["tools"][0]["input_schema"] == {"type": "object", "properties": {}}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    last = body["messages"][2]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[1] == {"type": "tool_result", "tool_use_id": "t2", "content": "boom",
                       "is_error": True}  # fmt: skip
    assert "stream" not in body


@pytest.mark.parametrize(
    ("model", "kwargs", "settings", "expected"),
    [
        ("claude-sonnet-4-5-20250929", {}, ModelSettings(), 64_000),
        ("claude-opus-4-1", {}, ModelSettings(), 32_000),
        ("claude-3-5-haiku-latest", {}, ModelSettings(), 8_192),
        ("claude-3-haiku-20240307", {}, ModelSettings(), 4_096),
        ("claude-sonnet-4-5", {"max_tokens": 1000}, ModelSettings(), 1000),  # the client's
        ("claude-sonnet-4-5", {"max_tokens": 1000}, ModelSettings(max_tokens=77), 77),
    ],
)
async def test_max_tokens_follows_the_model_unless_overridden(
    model: str,
    kwargs: dict[str, Any],
    settings: ModelSettings,
    expected: int,
    server: tuple[Script, str],
) -> None:
    """Provider-rules Anthropic 4: always sent, and not one 4096 for every Claude."""
    server[0].replies = [as_json({"content": [], "model": model, "stop_reason": "end_turn"})]
    async with AnthropicClient(model, api_key=KEY, base_url=server[1], **kwargs) as client:
        await client.complete(ModelRequest(messages=[Message.user("x")], settings=settings))
    assert server[0].received[0][1]["max_tokens"] == expected


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("read", {"type": "tool", "name": "read"}),
    ],
)
async def test_tool_choice_forms(
    choice: str,
    wire: dict[str, str],
    server: tuple[Script, str],
    make_client: Callable[..., AnthropicClient],
) -> None:
    server[0].replies = [as_json({"content": []})]
    request = ModelRequest(messages=[Message.user("x")], settings=ModelSettings(tool_choice=choice))
    await make_client().complete(request)
    assert server[0].received[0][1]["tool_choice"] == wire


@pytest.mark.parametrize("settings", [ModelSettings(seed=3), ModelSettings(temperature=1.5)])
async def test_options_it_cannot_forward_fail_before_sending(
    settings: ModelSettings, server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    with pytest.raises(ConfigurationError):
        await make_client().complete(ModelRequest(messages=[Message.user("x")], settings=settings))
    assert server[0].received == []


@pytest.mark.parametrize(
    "kwargs", [{"timeout": 0}, {"connect_timeout": -1}, {"max_tokens": 0}, {"base_url": "ftp://x"}]
)
def test_invalid_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        AnthropicClient("m", api_key=KEY, **kwargs)


def test_missing_key_is_an_auth_error() -> None:
    with pytest.raises(AuthError):
        AnthropicClient("m", api_key="")


# --- errors ----------------------------------------------------------------------------------


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


@pytest.mark.parametrize(
    ("status", "kind", "message", "expected"),
    [
        (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum",
         ContextLengthExceeded),
        (400, "invalid_request_error", "Your credit balance is too low to access the API",
         InsufficientCredits),
        (400, "billing_error", "billing problem", InsufficientCredits),
        (429, "rate_limit_error", "slow down", RateLimited),
        (529, "overloaded_error", "Overloaded", ProviderUnavailable),
        (401, "authentication_error", "invalid x-api-key", AuthError),
        (404, "not_found_error", "model: nope", ModelNotFound),
    ],
)  # fmt: skip
async def test_status_errors_are_classified(
    status: int,
    kind: str,
    message: str,
    expected: type[Exception],
    server: tuple[Script, str],
    make_client: Callable[..., AnthropicClient],
) -> None:
    server[0].replies = [as_json(error_body(kind, message), status, **{"retry-after": "7"})]
    client = make_client()
    with pytest.raises(expected) as info:
        await client.complete(REQUEST)
    assert type(info.value) is expected
    with pytest.raises(expected):
        await collect(client.stream(REQUEST))
    assert KEY not in str(info.value) and KEY not in repr(info.value) and KEY not in repr(client)


def mid_stream(*lines: str) -> Reply:
    head = (
        (FIXTURES / "messages-sse" / "basic_response.sse")
        .read_text()
        .split("event: message_delta")[0]
    )
    return Reply(body=(head + "".join(lines)).encode(), content_type="text/event-stream")


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("overloaded_error", ProviderUnavailable), ("rate_limit_error", RateLimited),
     ("invalid_request_error", BadRequestError)],
)  # fmt: skip
async def test_an_error_event_mid_stream_raises_the_right_error(
    kind: str,
    expected: type[ProviderError],
    server: tuple[Script, str],
    make_client: Callable[..., AnthropicClient],
) -> None:
    data = json.dumps(error_body(kind, "mid-stream"))
    server[0].replies = [mid_stream(f"event: error\ndata: {data}\n\n")]
    events: list[StreamEvent] = []
    with pytest.raises(expected) as info:
        async for event in make_client().stream(REQUEST):
            events.append(event)
    assert type(info.value) is expected and info.value.request_sent is True
    assert events and all(e.kind != "done" for e in events)


async def test_a_stream_without_message_stop_is_invalid_and_never_done(
    server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    server[0].replies = [mid_stream()]
    events: list[StreamEvent] = []
    with pytest.raises(ResponseInvalid):
        async for event in make_client().stream(REQUEST):
            events.append(event)
    assert all(e.kind != "done" for e in events)


async def test_truncated_stream_through_retrying_client_becomes_stream_error(
    server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    server[0].replies = [mid_stream()]
    client = RetryingClient(make_client(), sleep=_no_sleep)
    with pytest.raises(StreamError) as info:
        await collect(client.stream(REQUEST))
    assert isinstance(info.value.partial, Message) and info.value.partial.text == "Hello there!"
    assert len(server[0].received) == 1


async def test_invalid_json_reply_is_response_invalid(
    server: tuple[Script, str], make_client: Callable[..., AnthropicClient]
) -> None:
    server[0].replies = [as_json({"no": "content"})]
    with pytest.raises(ResponseInvalid):
        await make_client().complete(REQUEST)


PLAIN_KEY = "plain-secret-value-0987654321"  # no sk- shape: only the known value redacts it


@pytest.mark.parametrize(
    "reply",
    [
        as_json({"unexpected": f"echo {PLAIN_KEY}"}),
        mid_stream(f"event: error\ndata: {json.dumps(error_body('api_error', PLAIN_KEY))}\n\n"),
        mid_stream(f"event: content_block_delta\ndata: not json {PLAIN_KEY}\n\n"),
    ],
    ids=["reply-shape", "error-event", "bad-event"],
)
async def test_errors_decoded_from_a_reply_never_carry_the_key(
    reply: Reply, server: tuple[Script, str]
) -> None:
    server[0].replies = [reply]
    client = AnthropicClient("claude-test", api_key=PLAIN_KEY, base_url=server[1])
    try:
        with pytest.raises(ProviderError) as info:
            if reply.content_type == "text/event-stream":
                await collect(client.stream(REQUEST))
            else:
                await client.complete(REQUEST)
    finally:
        await client.aclose()
    error = info.value
    texts = [str(error), repr(error), str(error.attributes()), repr(error.args)]
    assert all(PLAIN_KEY not in text for text in texts)


async def _no_sleep(seconds: float) -> None:
    return None
