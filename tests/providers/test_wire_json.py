"""The faster JSON reads give exactly what ``json.loads`` gave: values, errors and messages."""

from __future__ import annotations

import json

import pytest
from aiohttp import web

from agentloop.errors import ResponseInvalid
from agentloop.providers._http import HttpTransport
from agentloop.providers._wire import WireError, decode_json, loads
from agentloop.providers.openai._chat_reply import ChatStreamAccumulator, decode_arguments

from .conftest import serve_app

DEEP = "[" * 100_000 + "]" * 100_000
TEXTS = [
    '{"a": 1, "b": [true, false, null], "c": "x\\u00e9\\ud83d\\ude00"}',
    '{"a":1,"a":2}',  # the last key wins in both
    "NaN",
    "-Infinity",
    '{"x": 1e400}',
    "1" * 400,
    "1" * 5000,  # past int()'s digit limit: ValueError in both
    "12345678901234567890.5",
    '"\\udc00"',  # a lone surrogate escape: json takes it, jiter does not
    '"\\ud83d"',
    "[" * 250 + "]" * 250,  # deeper than jiter's limit, within json's
    '{"a":' * 300 + "1" + "}" * 300,
    DEEP,  # deeper than json's: RecursionError, as before
    "",
    " ",
    "{",
    '{"a":1}x',
    "[1,]",
    "\ufeff{}",
    '"a\tb"',
    "01",
    "nan",
    "'a'",
]


def outcome(parse: object, text: str) -> tuple[str, object]:
    try:
        return "value", parse(text)  # type: ignore[operator]
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_decode_json_is_json_loads(text: str) -> None:
    got, expected = outcome(decode_json, text), outcome(json.loads, text)
    if got[0] == "value" and isinstance(got[1], float) and got[1] != got[1]:
        assert expected[0] == "value" and expected[1] != expected[1]  # NaN
    else:
        assert got == expected


def test_wire_loads_keeps_its_errors() -> None:
    with pytest.raises(WireError, match="body: JSON nested too deeply to decode"):
        loads(DEEP)
    with pytest.raises(WireError, match=r"chunk: not valid JSON \(Expecting property name"):
        loads("{", "chunk")
    assert loads('"\\udc00"') == "\udc00"
    assert loads(b'{"a": 1}') == {"a": 1}


def test_tool_arguments_decode_as_before() -> None:
    assert decode_arguments('{"k": "v"}') == {"k": "v"}
    assert decode_arguments(DEEP) == {"__invalid_json__": DEEP}
    assert decode_arguments('{"k": 1,}') == {"__invalid_json__": '{"k": 1,}'}
    assert decode_arguments("[1]") == {"__invalid_json__": "[1]"}
    assert decode_arguments('{"s": "\\udc00"}') == {"s": "\udc00"}


def test_a_stream_chunk_nested_too_deep_is_response_invalid() -> None:
    accumulator = ChatStreamAccumulator(provider="openai", model="m")
    with pytest.raises(ResponseInvalid, match="malformed stream chunk"):
        accumulator.feed(DEEP)


def body_app(text: str) -> web.Application:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/x", handler)
    return app


@pytest.mark.parametrize("text", ["{", DEEP, '{"a":1}x'], ids=["cut", "deep", "trailing"])
async def test_an_invalid_body_is_the_same_response_invalid(text: str) -> None:
    transport = HttpTransport(provider="openai", timeout=5)
    try:
        async with serve_app(body_app(text)) as base:
            with pytest.raises(ResponseInvalid) as info:
                await transport.post_json(f"{base}/v1/x", {})
    finally:
        await transport.aclose()
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        expected = f"openai: response body is not valid JSON ({exc})"
    assert str(info.value).startswith(expected)


async def test_a_body_jiter_refuses_but_json_takes_still_parses() -> None:
    text = '{"s": "\\udc00", "deep": ' + "[" * 250 + "]" * 250 + "}"
    transport = HttpTransport(provider="openai", timeout=5)
    try:
        async with serve_app(body_app(text)) as base:
            reply = await transport.post_json(f"{base}/v1/x", {})
    finally:
        await transport.aclose()
    assert reply.data == json.loads(text)
