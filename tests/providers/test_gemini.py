"""GeminiClient against a real local HTTP server speaking the generateContent wire format."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agentloop.errors import (
    AuthError,
    ConfigurationError,
    ContextLengthExceeded,
    InsufficientCredits,
    ModelNotFound,
    ModelRefused,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    ResponseInvalid,
)
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ModelRequest, ModelSettings, StreamEvent, ToolSpec
from agentloop.providers.gemini import (
    BYPASS_SIGNATURE,
    GeminiClient,
    encode_contents,
    parse_response,
)
from agentloop.providers.retrying import RetryingClient

KEY = "AIzaSyTEST-0123456789abcdefghij"
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
    received: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.received.append((str(request.rel_url), dict(request.headers), await request.json()))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        headers = {"Content-Type": reply.content_type, **reply.headers}
        return web.Response(status=reply.status, body=reply.body, headers=headers)


@pytest.fixture
async def server() -> AsyncIterator[tuple[Script, str]]:
    script = Script()
    app = web.Application()
    app.router.add_post("/v1beta/models/{call}", script.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield script, f"http://127.0.0.1:{test_server.port}/v1beta"
    finally:
        await test_server.close()


@pytest.fixture
async def make_client(server: tuple[Script, str]) -> AsyncIterator[Callable[..., GeminiClient]]:
    clients: list[GeminiClient] = []

    def make(**kwargs: Any) -> GeminiClient:
        client = GeminiClient("gemini-test", api_key=KEY, base_url=server[1], **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


def chunk(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-test-001", **extra}


USAGE = {
    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17}
}


def as_json(body: Any, status: int = 200, **headers: str) -> Reply:
    return Reply(status=status, body=json.dumps(body).encode(), headers=headers)


def as_sse(*chunks: dict[str, Any]) -> Reply:
    body = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)
    return Reply(body=body.encode(), content_type="text/event-stream")


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


# --- replies ---------------------------------------------------------------------------------


async def test_complete_parses_text_usage_and_finish(
    server: tuple[Script, str], make_client: Callable[..., GeminiClient]
) -> None:
    server[0].replies = [as_json(chunk({"text": "Hello"}, finish="STOP", responseId="r1", **USAGE))]
    response = await make_client().complete(REQUEST)
    assert response.text == "Hello" and response.stop_reason == "end_turn"
    assert response.usage.input_tokens == 12 and response.usage.output_tokens == 5
    assert response.model == "gemini-test-001" and response.request_id == "r1"
    url, headers, _ = server[0].received[0]
    assert url == "/v1beta/models/gemini-test:generateContent"
    assert headers["x-goog-api-key"] == KEY and KEY not in url


async def test_stream_is_complete_after_the_finish_chunk_and_a_clean_end(
    server: tuple[Script, str], make_client: Callable[..., GeminiClient]
) -> None:
    server[0].replies = [
        as_sse(chunk({"text": "Hel"}), chunk({"text": "lo"}, finish="STOP"), {**USAGE})
    ]
    events = await collect(make_client().stream(REQUEST))
    assert [e.kind for e in events] == ["text_delta", "text_delta", "done"]
    response = events[-1].response
    assert response is not None and response.text == "Hello"
    assert response.usage.output_tokens == 5  # a usage chunk after the finish still counts
    url = server[0].received[0][0]
    assert url == "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"


async def test_stream_without_finish_reason_is_invalid(
    server: tuple[Script, str], make_client: Callable[..., GeminiClient]
) -> None:
    server[0].replies = [as_sse(chunk({"text": "Hel"}))]
    events: list[StreamEvent] = []
    with pytest.raises(ResponseInvalid):
        async for event in make_client().stream(REQUEST):
            events.append(event)
    assert [e.kind for e in events] == ["text_delta"]


async def test_function_calls_get_stable_synthesised_ids(
    server: tuple[Script, str], make_client: Callable[..., GeminiClient]
) -> None:
    call = {"functionCall": {"name": "read", "args": {"path": "a"}}, "thoughtSignature": "sig1"}
    server[0].replies = [as_sse(chunk(call, finish="STOP", responseId="resp9"))]
    client = make_client()
    events = await collect(client.stream(REQUEST))
    delta = events[0]
    assert delta.kind == "tool_call_delta" and delta.call_id == "gemini_resp9_0"
    assert json.loads(delta.arguments) == {"path": "a"}
    response = events[-1].response
    assert response is not None and response.stop_reason == "tool_use"
    assert response.tool_calls == (ToolCallPart("gemini_resp9_0", "read", {"path": "a"}),)

    server[0].replies = [as_json(chunk({"text": "done"}, finish="STOP"))]
    follow_up = ModelRequest(
        messages=[
            Message.user("go"),
            response.message,
            Message.tool_results([ToolResultPart("gemini_resp9_0", "read", "contents")]),
            Message.user("thanks"),
        ]
    )
    await client.complete(follow_up)
    contents = server[0].received[1][2]["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1]["parts"] == [
        {"functionCall": {"name": "read", "args": {"path": "a"}}, "thoughtSignature": "sig1"}
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "read", "response": {"result": "contents"}}},
        {"text": "thanks"},
    ]


async def test_gemini_issued_ids_are_echoed_and_errors_marked(
    server: tuple[Script, str], make_client: Callable[..., GeminiClient]
) -> None:
    server[0].replies = [as_json(chunk({"text": "ok"}, finish="STOP"))]
    request = ModelRequest(
        messages=[
            Message.assistant("", [ToolCallPart("g-1", "read", {})]),
            Message.tool_results([ToolResultPart("g-1", "read", "nope", is_error=True)]),
        ],
        tools=[ToolSpec("read", "Read.", {"type": "object"})],
        system="Sys.",
        settings=ModelSettings(temperature=0.3, top_p=0.5, max_tokens=7, stop=("Z",), seed=4,
                               tool_choice="read"),
    )  # fmt: skip
    await make_client().complete(request)
    body = server[0].received[0][2]
    assert body["contents"][0]["parts"][0]["functionCall"]["id"] == "g-1"
    assert body["contents"][1]["parts"][0]["functionResponse"] == {
        "name": "read",
        "response": {"error": "nope"},
        "id": "g-1",
    }
    assert body["systemInstruction"] == {"parts": [{"text": "Sys."}]}
    assert body["tools"] == [
        {"functionDeclarations": [{"name": "read", "description": "Read.",
                                   "parameters": {"type": "object"}}]}
    ]  # fmt: skip
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["read"]}
    }
    assert body["generationConfig"] == {
        "temperature": 0.3,
        "topP": 0.5,
        "maxOutputTokens": 7,
        "seed": 4,
        "stopSequences": ["Z"],
    }


def test_each_message_is_encoded_once_and_a_bypass_signature_is_added_to_a_copy() -> None:
    message = Message.assistant("", [ToolCallPart("c1", "read", {"p": 1})])
    first = encode_contents([message])[0]["parts"][0]
    assert encode_contents([message])[0]["parts"][0] is first
    signed = encode_contents([message], sign_calls=True)[0]["parts"][0]
    assert signed == {**first, "thoughtSignature": BYPASS_SIGNATURE}
    assert "thoughtSignature" not in first


@pytest.mark.parametrize(("finish", "stop"), [("MAX_TOKENS", "max_tokens"), ("STOP", "end_turn")])
def test_finish_reasons_map(finish: str, stop: str) -> None:
    assert parse_response(chunk({"text": "x"}, finish=finish)).stop_reason == stop


@pytest.mark.parametrize("finish", ["MALFORMED_FUNCTION_CALL", "OTHER", "NEW_REASON"])
def test_a_finish_that_is_not_a_reply_is_invalid(finish: str) -> None:
    with pytest.raises(ResponseInvalid) as info:
        parse_response(chunk(finish=finish))
    assert finish in str(info.value)


def test_a_blocked_prompt_is_a_refusal() -> None:
    with pytest.raises(ModelRefused) as info:
        parse_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert (info.value.reason, info.value.text) == ("SAFETY", "")


# --- errors ----------------------------------------------------------------------------------


def google_error(code: int, status: str, message: str, *details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "status": status, "message": message, "details": list(details)}}


RETRY_INFO = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (google_error(400, "INVALID_ARGUMENT",
                      "The input token count (1200000) exceeds the maximum number of tokens "
                      "allowed (1048576)."), ContextLengthExceeded),
        (google_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
         AuthError),
        (google_error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota", RETRY_INFO),
         RateLimited),
        (google_error(429, "RESOURCE_EXHAUSTED",
                      "You exceeded your current quota, please check your plan and billing"),
         InsufficientCredits),
        (google_error(404, "NOT_FOUND", "models/nope is not found"), ModelNotFound),
        (google_error(503, "UNAVAILABLE", "The model is overloaded."), ProviderUnavailable),
    ],
)  # fmt: skip
async def test_status_errors_are_classified(
    body: dict[str, Any],
    expected: type[ProviderError],
    server: tuple[Script, str],
    make_client: Callable[..., GeminiClient],
) -> None:
    server[0].replies = [as_json(body, body["error"]["code"])]
    client = make_client()
    with pytest.raises(expected) as info:
        await client.complete(REQUEST)
    assert type(info.value) is expected
    if expected is RateLimited:
        assert info.value.retry_after == 13.0
    with pytest.raises(expected):
        await collect(client.stream(REQUEST))
    assert KEY not in str(info.value) and KEY not in repr(info.value) and KEY not in repr(client)


async def test_an_error_chunk_mid_stream_is_classified(
    server: tuple[Script, str], make_client: Callable[..., GeminiClient]
) -> None:
    server[0].replies = [as_sse(chunk({"text": "a"}), google_error(503, "UNAVAILABLE", "down"))]
    with pytest.raises(ProviderUnavailable) as info:
        await collect(make_client().stream(REQUEST))
    assert info.value.request_sent is True


async def test_retrying_client_over_gemini_503_503_200(
    server: tuple[Script, str], make_client: Callable[..., GeminiClient]
) -> None:
    down = as_json(google_error(503, "UNAVAILABLE", "down"), 503)
    server[0].replies = [down, down, as_json(chunk({"text": "up"}, finish="STOP"))]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    client = RetryingClient(make_client(), sleep=sleep, random=lambda a, b: 0.0)
    assert (await client.complete(REQUEST)).text == "up"
    assert waits == pytest.approx([0.1, 0.2]) and len(server[0].received) == 3


PLAIN_KEY = "plain-secret-value-0987654321"  # no AIza shape: only the known value redacts it


@pytest.mark.parametrize(
    ("reply", "stream"),
    [
        (as_json(chunk({"functionCall": {"name": 7, "echo": PLAIN_KEY}}, finish="STOP")), False),
        (as_json(google_error(500, "INTERNAL", f"echo {PLAIN_KEY}")), False),
        (as_sse(chunk({"text": "a"}), google_error(503, "UNAVAILABLE", PLAIN_KEY)), True),
        (Reply(body=f"data: not json {PLAIN_KEY}\n\n".encode(), content_type="text/event-stream"),
         True),
    ],
    ids=["reply-shape", "error-in-200", "error-chunk", "bad-chunk"],
)  # fmt: skip
async def test_errors_decoded_from_a_reply_never_carry_the_key(
    reply: Reply, stream: bool, server: tuple[Script, str]
) -> None:
    server[0].replies = [reply]
    client = GeminiClient("gemini-test", api_key=PLAIN_KEY, base_url=server[1])
    try:
        with pytest.raises(ProviderError) as info:
            if stream:
                await collect(client.stream(REQUEST))
            else:
                await client.complete(REQUEST)
    finally:
        await client.aclose()
    error = info.value
    texts = [str(error), repr(error), str(error.attributes()), repr(error.args)]
    assert all(PLAIN_KEY not in text for text in texts)


@pytest.mark.parametrize(
    "kwargs", [{"timeout": 0}, {"connect_timeout": "1"}, {"base_url": "generativelanguage"}]
)
def test_invalid_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        GeminiClient("gemini-test", api_key=KEY, **kwargs)


def test_missing_key_is_an_auth_error_and_models_prefix_is_accepted() -> None:
    with pytest.raises(AuthError):
        GeminiClient("gemini-test", api_key="")
    assert GeminiClient("models/gemini-x", api_key=KEY).model == "gemini-x"
