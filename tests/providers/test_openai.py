"""OpenAIClient over real local HTTP: request encoding, replies, streams, fixtures, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import jsonschema
import pytest
from aiohttp import web
from pydantic import BaseModel, Field

from agentloop.errors import (
    AuthError,
    ContextLengthExceeded,
    FailurePhase,
    InsufficientCredits,
    ModelRefused,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    ResponseInvalid,
    UnexpectedRedirect,
)
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart, Usage
from agentloop.model import (
    ModelClient,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSpec,
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
    parse_completion,
)
from agentloop.providers.openai._chat_restore import drop_filled_nulls
from agentloop.providers.openai._chat_strict import make_strict, strict_schema
from agentloop.testing.fake_server import FakeProviderServer, FakeReply, FakeToolCall, Fault

from .conftest import serve_app
from .twins.openai_chat import check_schema

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


def test_max_tokens_field_follows_the_profile_then_the_endpoint() -> None:
    assert OpenAIClient("m", api_key="k")._rules.max_field("gpt-4o") == "max_completion_tokens"
    assert OllamaClient("m")._rules.max_field("llama3") == "max_tokens"
    azure = OpenAIClient("m", base_url="https://x.openai.azure.com/openai/v1")
    assert azure._rules.max_field("gpt-4o") == "max_tokens"
    assert azure._rules.max_field("gpt-5-mini") == "max_completion_tokens"  # whatever the host
    assert azure._rules.max_field("o3") == "max_completion_tokens"
    # OpenRouter names the limit max_tokens for every model and translates it itself
    assert OpenRouterClient("m", api_key="k")._rules.max_field("openai/o3") == "max_tokens"
    override = OpenAIClient("m", base_url="http://x/v1", max_tokens_field="n")
    assert override._rules.max_field("gpt-5") == override._rules.max_field("gpt-4o") == "n"


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


REFUSALS = ("parse_pydantic_model_refusal.sse", "refusal_logprobs_events.sse")


@pytest.mark.parametrize(
    "path",
    sorted(p for p in FIXTURES.glob("*.sse") if p.name not in REFUSALS),
    ids=lambda p: p.name,
)
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


@pytest.mark.parametrize("name", REFUSALS)
async def test_recorded_refusals_raise_model_refused(name: str) -> None:
    """A streamed refusal is never an answer: ModelRefused with the refusal's words as text."""
    expected = expected_from_fixture(name)["text"]  # the refusal deltas, joined
    with pytest.raises(ModelRefused) as info:
        await stream_fixture(name)
    assert (info.value.reason, info.value.text) == ("refusal", expected)
    assert info.value.text.startswith("I'm") and not info.value.is_recoverable()


async def test_recorded_length_stop() -> None:
    _, length = await stream_fixture("parse_max_tokens_reached.sse")
    assert length.stop_reason == "length" and length.text == '{"'


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


# --- strict structured output: the schema rewrite, pure ------------------------------------


class Address(BaseModel):
    street: str
    city: str = "Paris"
    zip_code: str | None = None


class TreeNode(BaseModel):
    name: str
    children: list[TreeNode] = []


class Order(BaseModel):
    """An order with optional, nested, referenced and recursive fields."""

    item: str
    quantity: int = 1
    note: str | None = None
    ship_to: Address
    bill_to: Address | None = None
    tags: list[str] = Field(default_factory=list, max_length=5)
    code: str = Field("A1", min_length=2, max_length=8)
    kind: Literal["retail", "wholesale"] = "retail"
    gift: Address = Field(default_factory=lambda: Address(street="x"), description="Gift address")
    tree: TreeNode | None = None


def every_object(node: object, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            found.append(node)
        for value in node.values():
            every_object(value, found)
    elif isinstance(node, list):
        for value in node:
            every_object(value, found)
    return found


def keys_named(name: str, node: object) -> bool:
    if isinstance(node, dict):
        return name in node or any(keys_named(name, v) for v in node.values())
    return isinstance(node, list) and any(keys_named(name, v) for v in node)


def test_strict_rewrite_of_a_pydantic_model_meets_strict_mode() -> None:
    original = Order.model_json_schema()
    frozen = json.dumps(original, sort_keys=True)
    result = make_strict(original)
    assert result.strict and result.reason is None and result.fills
    assert json.dumps(original, sort_keys=True) == frozen  # the original is never changed
    schema = result.schema
    objects = every_object(schema, [])
    assert len(objects) >= 4  # the root, Address, TreeNode, the inlined gift address
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    props = schema["properties"]
    assert props["quantity"]["type"] == ["integer", "null"]  # optional -> nullable
    assert props["quantity"]["description"] == "(default: 1)"
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"}
    assert props["ship_to"] == {"$ref": "#/$defs/Address"}  # required: untouched
    assert props["bill_to"]["anyOf"] == [{"$ref": "#/$defs/Address"}, {"type": "null"}]
    assert props["tags"]["anyOf"][0]["maxItems"] == 5  # a keyword strict mode takes is kept
    code = {"type": ["string", "null"], "title": "Code", "description": '(default: "A1")'}
    assert props["code"] == code  # minLength and maxLength dropped: our validation keeps them
    assert not keys_named("default", schema)  # strict mode has no default
    assert props["kind"]["anyOf"][1] == {"type": "null"}
    # a $ref with a sibling description is inlined (strict mode takes a bare $ref only)
    gift = props["gift"]
    assert gift["description"] == "Gift address" and "$ref" not in json.dumps(gift)
    assert schema["$defs"]["TreeNode"]["properties"]["children"]["anyOf"][0]["items"] == {
        "$ref": "#/$defs/TreeNode"
    }
    check_schema(dict(schema), (), "twin", "tools[0].function.parameters")  # the twin agrees


def test_strict_rewrite_accepts_what_the_original_accepted() -> None:
    """A reply valid under strict mode (nulls for the optional fields) restores to the model."""
    original = Order.model_json_schema()
    strict = make_strict(original)
    reply = {
        "item": "pen",
        "quantity": None,
        "note": None,
        "ship_to": {"street": "1 rue", "city": None, "zip_code": None},
        "bill_to": None,
        "tags": None,
        "code": None,
        "kind": None,
        "gift": {"street": "2 rue", "city": "Lyon", "zip_code": "69000"},
        "tree": {"name": "a", "children": [{"name": "b", "children": None}]},
    }
    jsonschema.validate(reply, dict(strict.schema))
    restored = drop_filled_nulls(original, reply)
    order = Order.model_validate(restored)
    assert (order.quantity, order.note, order.kind, order.ship_to.city) == (
        1,
        None,
        "retail",
        "Paris",
    )
    assert (
        order.bill_to is None and order.tree is not None and order.tree.children[0].children == []
    )
    assert "quantity" not in restored and restored["note"] is None  # note takes null itself
    assert drop_filled_nulls(original, restored) is restored  # nothing left to drop: same object


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (
            {
                "type": "object",
                "properties": {
                    "m": {"type": "object", "additionalProperties": {"type": "integer"}}
                },
            },
            "#/properties/m allows additional properties",
        ),
        (
            {"type": "object", "properties": {"any": {}}},
            "#/properties/any accepts a value of any type",
        ),
        ({"type": "object", "properties": {"o": {"type": "object"}}}, "declares no properties"),
        ({"type": "array", "items": {"type": "integer"}}, "# (the root) is not an object"),
        (
            {
                "type": "object",
                "properties": {"t": {"type": "array", "prefixItems": [{"type": "integer"}]}},
            },
            "uses 'prefixItems'",
        ),
        (
            {
                "type": "object",
                "properties": {"x": {"allOf": [{"type": "integer"}, {"minimum": 1}]}},
            },
            "'allOf' with several members",
        ),
        (
            {"type": "object", "properties": {"r": {"$ref": "https://example.com/s.json"}}},
            "cannot follow",
        ),
    ],
)
def test_schemas_strict_mode_cannot_express_stay_non_strict(
    schema: dict[str, Any], why: str
) -> None:
    result = make_strict(schema)
    assert not result.strict and result.schema is schema and not result.fills
    assert result.reason is not None and why in result.reason


def test_a_pydantic_dict_field_cannot_be_strict() -> None:
    class Counts(BaseModel):
        counts: dict[str, int]

    result = make_strict(Counts.model_json_schema())
    assert (result.strict, result.reason) == (
        False,
        "#/properties/counts allows additional properties",
    )


def test_strict_rewrite_small_cases() -> None:
    one_of = make_strict(
        {
            "type": "object",
            "properties": {"v": {"oneOf": [{"type": "integer"}, {"type": "string"}]}},
            "required": ["v"],
        }
    )
    assert one_of.schema["properties"]["v"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    lone = make_strict(
        {
            "type": "object",
            "properties": {"a": {"allOf": [{"type": "string", "format": "uri"}]}},
            "required": ["a"],
        }
    )
    assert lone.schema["properties"]["a"] == {"type": "string"}  # uri is not a strict format
    empty = make_strict({"type": "object", "properties": {}})
    assert empty.schema == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert not empty.fills
    recursive = make_strict(
        {"type": "object", "properties": {"next": {"$ref": "#", "description": "d"}}}
    )
    assert recursive.strict and recursive.schema["properties"]["next"]["anyOf"][0] == {"$ref": "#"}


def test_strict_schema_is_computed_once_per_schema_object() -> None:
    schema = Order.model_json_schema()
    assert strict_schema(schema) is strict_schema(schema)
    assert strict_schema(dict(schema)) is not strict_schema(schema)


def test_encode_request_sends_strict_tools_and_response_format() -> None:
    spec = ToolSpec("order", "Place an order.", Order.model_json_schema())
    loose = ToolSpec("tally", "Count.", {"type": "object", "properties": {"m": {"type": "object"}}})
    req = request(tools=[spec, loose], output=OutputSpec("Order", Order.model_json_schema()))
    payload = encode_request(req, "gpt-5-mini", strict=True)
    strict_tool, loose_tool = (t["function"] for t in payload["tools"])
    assert (
        strict_tool["strict"] is True and strict_tool["parameters"]["additionalProperties"] is False
    )
    assert loose_tool["strict"] is False and loose_tool["parameters"] == dict(loose.parameters)
    assert payload["response_format"]["json_schema"]["strict"] is True
    plain = encode_request(req, "m")  # strict off: the schemas as given, as before
    assert "strict" not in plain["tools"][0]["function"]
    assert plain["response_format"]["json_schema"]["strict"] is False


def test_thinking_parts_never_reach_chat_completions() -> None:
    call = ToolCallPart("c1", "get_weather", {"city": "Paris"})
    bare = Message.assistant("Looking.", [call])
    thinking = Message(
        "assistant",
        (
            ThinkingPart("mine", signature="enc", provider="openai", id="rs_1"),
            ThinkingPart("theirs", signature="sig", provider="anthropic"),
            TextPart("Looking."),
            ThinkingPart("", signature="g", provider="gemini"),
            call,
        ),
    )
    results = Message.tool_results([ToolResultPart("c1", "get_weather", "sunny")])
    with_thinking = encode_request(request(Message.user("q"), thinking, results), "m")
    without = encode_request(request(Message.user("q"), bare, results), "m")
    assert with_thinking == without
    assert "rs_1" not in json.dumps(with_thinking) and "theirs" not in json.dumps(with_thinking)


def test_reasoning_effort_and_extra_body_merge() -> None:
    settings = ModelSettings(
        reasoning_effort="low",
        extra_body={"stream_options": {"include_obfuscation": False}, "metadata": {"k": "v"}},
    )
    payload = encode_request(request(settings=settings), "gpt-5-mini", stream=True)
    assert payload["reasoning_effort"] == "low"
    assert payload["stream_options"] == {"include_usage": True, "include_obfuscation": False}
    assert payload["metadata"] == {"k": "v"}


def test_usage_reads_cached_and_reasoning_tokens() -> None:
    body: dict[str, Any] = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 64},
            "completion_tokens_details": {"reasoning_tokens": 32},
        },
    }
    usage = parse_completion(body, "", provider="openai", model="m").usage
    assert usage == Usage(100, 40, cache_read_tokens=64, reasoning_tokens=32)
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 99}  # more than the output
    assert parse_completion(body, "", provider="openai", model="m").usage.reasoning_tokens == 40
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": -1}
    with pytest.raises(ResponseInvalid):
        parse_completion(body, "", provider="openai", model="m")
