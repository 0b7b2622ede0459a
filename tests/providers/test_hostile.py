"""Hostile provider data: every byte a provider sends is a reply or a ``ProviderError``.

A schema-invalid body or stream event is ``ResponseInvalid`` (phase body, request sent), never a
bare ``ValueError``/``TypeError``/``AttributeError``/``KeyError``/``OverflowError``/
``RecursionError``. Hypothesis mutates one field of a recorded or generated reply at a time (or
cuts the text) and the outcome is fed to each adapter twice: to the pure decoders, and through a
real local HTTP server to ``complete()`` and ``stream()``. Explicit tests pin the named cases and
the rules ``complete()`` and ``stream()`` share (docs/providers.md, "What counts as an invalid
response").
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop.errors import FailurePhase, ModelRefused, ProviderError, ResponseInvalid
from agentloop.messages import Message
from agentloop.model import ModelClient, ModelRequest, ModelResponse
from agentloop.providers._http import MAX_ERROR_BODY, error_for_status
from agentloop.providers._sse import SSEDecoder, SSEEvent
from agentloop.providers.anthropic import AnthropicClient, AnthropicStreamState
from agentloop.providers.anthropic import parse_response as anthropic_parse
from agentloop.providers.gemini import GeminiClient, GeminiStreamState
from agentloop.providers.gemini import parse_response as gemini_parse
from agentloop.providers.openai import ChatStreamAccumulator, OpenAIClient, parse_completion

from .conftest import serve_app

KEY = "k3y-of-no-recognisable-shape-7Qx9Lm2Vb8Nc4Zr6"
FIXTURES = Path("/work/shared/fixtures")
OPENAI_SSE = sorted((FIXTURES / "openai-python/chat-completions-sse").glob("*.sse"))
ANTHROPIC_SSE = sorted((FIXTURES / "anthropic-sdk-python/messages-sse").glob("*.sse"))
RECORDED = sorted((FIXTURES / "anthropic-sdk-python/recorded-exchanges").glob("*.json"))
DEEP = "[" * 100_000 + "]" * 100_000
_DEEP_MARK, _HUGE_MARK, _DELETE = "\x00deep\x00", "\x00huge\x00", object()

# --- base replies: recorded fixtures and generated bodies ---------------------------------


def openai_completion(calls: int = 1) -> dict[str, Any]:
    tool_calls = [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": "lookup", "arguments": json.dumps({"key": i})}}
        for i in range(calls)
    ]  # fmt: skip
    message = {"role": "assistant", "content": "hello", "refusal": None, "tool_calls": tool_calls}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }


def sse_frames(path: Path) -> list[tuple[str, Any]]:
    """(event name, decoded data) of each SSE event of a recorded stream, ``[DONE]`` dropped."""
    decoder = SSEDecoder()
    events = decoder.feed(path.read_bytes()) + decoder.close()
    return [(e.event, json.loads(e.data)) for e in events if e.data and e.data != "[DONE]"]


def anthropic_messages() -> list[dict[str, Any]]:
    bodies = []
    for path in RECORDED:
        for exchange in json.loads(path.read_text()):
            body = exchange["response"]["body"]
            if exchange["response"]["status_code"] == 200 and isinstance(body, dict):
                bodies.append(body)
    return bodies


def gemini_chunks() -> list[dict[str, Any]]:
    call = {"functionCall": {"name": "lookup", "args": {"key": 1}}, "thoughtSignature": "c2ln"}
    return [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}],
         "modelVersion": "gemini-test", "responseId": "resp-1"},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}, call]},
                         "finishReason": "STOP", "index": 0}],
         "promptFeedback": {"safetyRatings": []},
         "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3,
                           "thoughtsTokenCount": 2, "totalTokenCount": 12}},
    ]  # fmt: skip


def gemini_completion() -> dict[str, Any]:
    first, second = gemini_chunks()
    second["candidates"][0]["content"]["parts"].insert(0, {"text": "Hel"})
    return {**second, "modelVersion": first["modelVersion"], "responseId": first["responseId"]}


OPENAI_STREAMS = [[data for _, data in sse_frames(path)] for path in OPENAI_SSE]
ANTHROPIC_STREAMS = [sse_frames(path) for path in ANTHROPIC_SSE]
ANTHROPIC_BODIES = anthropic_messages()

# --- mutation ------------------------------------------------------------------------------


def node_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every node below the root (dict keys and list indexes)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict | list):
        for key, child in value.items() if isinstance(value, dict) else enumerate(value):
            found.append((*prefix, key))
            found.extend(node_paths(child, (*prefix, key)))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    out = copy.deepcopy(value)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    if new is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return out


def dumps(value: Any) -> str:
    """JSON text, with the markers swapped for what ``json.dumps`` cannot write."""
    text = json.dumps(value)
    return text.replace(json.dumps(_DEEP_MARK), DEEP).replace(json.dumps(_HUGE_MARK), "1e400")


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "abc", "error", "tool_use", "text", "STOP", KEY, _HUGE_MARK]),
)
garbage = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.sampled_from(["type", "text", "name", "error", "x"]), scalars, max_size=3),
    st.sampled_from([_DELETE, [1], {}, [], [[[[]]]]]),
)


def mutated(data: st.DataObject, value: Any, *, deep: bool) -> Any:
    paths = node_paths(value)
    if not paths:
        return value
    path = data.draw(st.sampled_from(paths), label="path")
    choices = st.one_of(garbage, st.just(_DEEP_MARK)) if deep else garbage
    return replaced(value, path, data.draw(choices, label="new value"))


def cut(data: st.DataObject, text: str) -> str:
    """Sometimes the text truncated at a drawn position (an unterminated or cut-off body)."""
    if not data.draw(st.booleans(), label="cut"):
        return text
    return text[: data.draw(st.integers(0, len(text)), label="at")]


# --- the oracle ----------------------------------------------------------------------------


def check_outcome(run: Callable[[], ModelResponse], sent: str, *, redacted: bool = True) -> None:
    """A ``ModelResponse``, or a ``ProviderError``: ``ResponseInvalid`` unless an error was sent;
    ``ModelRefused`` when the body holds a refusal.

    ``redacted``: the key must appear nowhere in the error (the anthropic and gemini decoders
    leave that to their client, so their pure tests pass False).
    """
    try:
        result = run()
    except ResponseInvalid as error:
        assert error.phase is FailurePhase.BODY and error.request_sent is True, repr(error)
        if redacted:
            check_redacted(error)
    except ModelRefused as refused:  # SPEC 16: a refusal is never an answer
        assert "refusal" in sent or "content_filter" in sent, repr(refused)
    except ProviderError as error:
        assert "error" in sent, f"{error!r} for a body without an error object"
        if redacted:
            check_redacted(error)
    else:
        assert isinstance(result, ModelResponse)


def check_redacted(error: ProviderError) -> None:
    assert KEY not in str(error) and KEY not in repr(error) and KEY not in (error.body or "")


def openai_stream(payloads: list[str]) -> ModelResponse:
    acc = ChatStreamAccumulator(provider="openai", model="m", secrets=[KEY])
    for payload in [*payloads, "[DONE]"]:
        acc.feed(payload)
    return acc.response()


def anthropic_stream(events: list[tuple[str, str]]) -> ModelResponse:
    state = AnthropicStreamState()
    for name, data in events:
        for out in state.feed(SSEEvent(event=name, data=data)):
            if out.kind == "done":
                assert out.response is not None
                return out.response
    # what AnthropicClient.stream raises for a stream that ends without message_stop
    raise ResponseInvalid("no message_stop", phase=FailurePhase.BODY, request_sent=True)


def gemini_stream(payloads: list[str]) -> ModelResponse:
    state = GeminiStreamState()
    for payload in payloads:
        state.feed(SSEEvent(data=payload))
    return state.response()


# --- properties: the pure decoders ---------------------------------------------------------

PURE = settings(max_examples=150, deadline=None)


@PURE
@given(data=st.data())
def test_openai_completion_decoder(data: st.DataObject) -> None:
    text = cut(data, json.dumps(mutated(data, openai_completion(2), deep=False)))
    try:
        body = json.loads(text)
    except ValueError:
        return  # the transport's job (tested over HTTP below)
    check_outcome(
        lambda: parse_completion(
            body, text, provider="openai", model="m", redactor=lambda t: t.replace(KEY, "[R]")
        ),
        text,
    )


@PURE
@given(data=st.data(), base=st.sampled_from(OPENAI_STREAMS))
def test_openai_stream_decoder(data: st.DataObject, base: list[Any]) -> None:
    payloads = [json.dumps(p) for p in mutated(data, base, deep=False)]
    check_outcome(lambda: openai_stream(payloads), "".join(payloads))


@PURE
@given(data=st.data(), base=st.sampled_from(ANTHROPIC_BODIES))
def test_anthropic_message_decoder(data: st.DataObject, base: dict[str, Any]) -> None:
    text = json.dumps(mutated(data, base, deep=False))
    check_outcome(lambda: anthropic_parse(json.loads(text), text=text), text, redacted=False)


@PURE
@given(data=st.data(), base=st.sampled_from(ANTHROPIC_STREAMS))
def test_anthropic_stream_decoder(data: st.DataObject, base: list[tuple[str, Any]]) -> None:
    payloads = mutated(data, [p for _, p in base], deep=False)
    events = [(name, json.dumps(p)) for (name, _), p in zip(base, payloads, strict=False)]
    check_outcome(lambda: anthropic_stream(events), str(events), redacted=False)


@PURE
@given(data=st.data())
def test_gemini_decoders(data: st.DataObject) -> None:
    text = json.dumps(mutated(data, gemini_completion(), deep=False))
    check_outcome(lambda: gemini_parse(json.loads(text), text=text), text, redacted=False)
    payloads = [json.dumps(p) for p in mutated(data, gemini_chunks(), deep=False)]
    check_outcome(lambda: gemini_stream(payloads), "".join(payloads), redacted=False)


# --- properties: over real HTTP, complete() and stream() ----------------------------------


class HostileServer:
    """Answers every POST with whatever ``reply`` holds: (status, content type, body bytes)."""

    def __init__(self) -> None:
        self.reply: tuple[int, str, bytes] = (200, "application/json", b"{}")

    def app(self) -> web.Application:
        async def handler(request: web.Request) -> web.Response:
            await request.read()
            status, content_type, body = self.reply
            return web.Response(status=status, body=body, headers={"Content-Type": content_type})

        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", handler)
        return app


class Harness:
    """One event loop, one hostile server and the three clients, kept across examples."""

    def __init__(self, runner: asyncio.Runner, server: HostileServer, base: str) -> None:
        self.runner, self.server = runner, server
        self.clients: dict[str, ModelClient] = {
            "openai": OpenAIClient("m", api_key=KEY, base_url=f"{base}/v1", timeout=5.0),
            "anthropic": AnthropicClient("m", api_key=KEY, base_url=base, timeout=5.0),
            "gemini": GeminiClient("m", api_key=KEY, base_url=base, timeout=5.0),
        }

    def check(self, provider: str, *, stream: bool, body: str, status: int = 200) -> None:
        kind = "text/event-stream" if stream else "application/json"
        self.server.reply = (status, kind, body.encode())
        client = self.clients[provider]
        check_outcome(lambda: self.runner.run(self._call(client, stream)), body)

    async def _call(self, client: ModelClient, stream: bool) -> ModelResponse:
        request = ModelRequest(messages=(Message.user("hi"),))
        if not stream:
            return await asyncio.wait_for(client.complete(request), 10)
        return await asyncio.wait_for(self._drain(client, request), 10)

    @staticmethod
    async def _drain(client: ModelClient, request: ModelRequest) -> ModelResponse:
        final = None
        async for event in client.stream(request):
            final = event.response if event.kind == "done" else final
        if final is None:  # pragma: no cover - a stream without done must raise
            raise AssertionError("stream ended without done and without an error")
        return final


@contextmanager
def harness() -> Iterator[Harness]:
    with asyncio.Runner() as runner:
        server = HostileServer()
        serving = serve_app(server.app())
        base = runner.run(serving.__aenter__())
        h = Harness(runner, server, base)
        try:
            yield h
        finally:
            for client in h.clients.values():
                runner.run(client.aclose())
            runner.run(serving.__aexit__(None, None, None))


def sse(frames: list[tuple[str | None, str]]) -> str:
    return "".join(
        (f"event: {name}\n" if name else "") + f"data: {data}\n\n" for name, data in frames
    )


HTTP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_complete_over_http() -> None:
    with harness() as h:

        @HTTP
        @given(data=st.data(), provider=st.sampled_from(["openai", "anthropic", "gemini"]))
        def run(data: st.DataObject, provider: str) -> None:
            base = {
                "openai": openai_completion(2),
                "anthropic": data.draw(st.sampled_from(ANTHROPIC_BODIES)),
                "gemini": gemini_completion(),
            }[provider]
            h.check(provider, stream=False, body=cut(data, dumps(mutated(data, base, deep=True))))

        run()


def test_stream_over_http() -> None:
    with harness() as h:

        @HTTP
        @given(data=st.data(), provider=st.sampled_from(["openai", "anthropic", "gemini"]))
        def run(data: st.DataObject, provider: str) -> None:
            if provider == "anthropic":
                base = data.draw(st.sampled_from(ANTHROPIC_STREAMS))
                names: list[str | None] = [name for name, _ in base]
                payloads = mutated(data, [p for _, p in base], deep=True)
                tail: list[tuple[str | None, str]] = []
            else:
                payloads = mutated(
                    data, data.draw(st.sampled_from(OPENAI_STREAMS)) if provider == "openai"
                    else gemini_chunks(), deep=True,
                )  # fmt: skip
                names = [None] * len(payloads)
                tail = [(None, "[DONE]")] if provider == "openai" else []
            frames = [(n, dumps(p)) for n, p in zip(names, payloads, strict=False)] + tail
            h.check(provider, stream=True, body=cut(data, sse(frames)))

        run()


# --- the named cases -----------------------------------------------------------------------


def request() -> ModelRequest:
    return ModelRequest(messages=(Message.user("hi"),))


@pytest.fixture
async def hostile() -> AsyncIterator[tuple[HostileServer, dict[str, ModelClient]]]:
    server = HostileServer()
    async with serve_app(server.app()) as base:
        clients: dict[str, ModelClient] = {
            "openai": OpenAIClient("m", api_key=KEY, base_url=f"{base}/v1", timeout=5.0),
            "anthropic": AnthropicClient("m", api_key=KEY, base_url=base, timeout=5.0),
            "gemini": GeminiClient("m", api_key=KEY, base_url=base, timeout=5.0),
        }
        yield server, clients
        for client in clients.values():
            await client.aclose()


Hostile = tuple[HostileServer, dict[str, ModelClient]]


async def outcome(hostile: Hostile, provider: str, body: str, *, stream: bool) -> Any:
    """The reply, or the error raised, for ``body`` served to ``provider``'s client."""
    server, clients = hostile
    server.reply = (200, "text/event-stream" if stream else "application/json", body.encode())
    try:
        if stream:
            return [event async for event in clients[provider].stream(request())][-1].response
        return await clients[provider].complete(request())
    except ProviderError as error:
        return error


def assert_invalid(result: object, field: str = "") -> ResponseInvalid:
    assert isinstance(result, ResponseInvalid), repr(result)
    assert result.phase is FailurePhase.BODY and result.request_sent is True
    assert field.lower() in str(result).lower()
    check_redacted(result)
    return result


@pytest.mark.parametrize("value", ['"abc"', "[1]", "1e400", "-1", "true", "NaN", "12.5"])
async def test_openai_bad_token_counts(hostile: Hostile, value: str) -> None:
    body = json.dumps(openai_completion()).replace(
        '"prompt_tokens": 12', f'"prompt_tokens": {value}'
    )
    assert_invalid(await outcome(hostile, "openai", body, stream=False), "usage.prompt_tokens")
    chunk = {**openai_completion(), "choices": []}
    text = json.dumps(chunk).replace('"prompt_tokens": 12', f'"prompt_tokens": {value}')
    streamed = sse([(None, text), (None, "[DONE]")])
    assert_invalid(await outcome(hostile, "openai", streamed, stream=True), "usage.prompt_tokens")


async def test_integral_float_token_counts_are_accepted(hostile: Hostile) -> None:
    body = json.dumps(openai_completion()).replace('"prompt_tokens": 12', '"prompt_tokens": 12.0')
    response = await outcome(hostile, "openai", body, stream=False)
    assert isinstance(response, ModelResponse) and response.usage.input_tokens == 12


async def test_anthropic_stream_delta_that_is_a_string(hostile: Hostile) -> None:
    events = [(n, json.dumps(d)) for n, d in sse_frames(ANTHROPIC_SSE[0])]
    at = next(i for i, (n, _) in enumerate(events) if n == "content_block_delta")
    events[at] = ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":"x"}')
    result = await outcome(hostile, "anthropic", sse(list(events)), stream=True)
    assert_invalid(result, "delta: expected an object or null, got a string")


async def test_gemini_prompt_feedback_that_is_a_string(hostile: Hostile) -> None:
    body = gemini_completion()
    body["promptFeedback"] = "blocked"
    assert_invalid(
        await outcome(hostile, "gemini", json.dumps(body), stream=False), "promptFeedback"
    )
    chunks = gemini_chunks()
    chunks[0]["promptFeedback"] = "blocked"
    streamed = sse([(None, json.dumps(c)) for c in chunks])
    assert_invalid(await outcome(hostile, "gemini", streamed, stream=True), "promptFeedback")


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_json_nested_100000_deep(hostile: Hostile, provider: str) -> None:
    assert_invalid(await outcome(hostile, provider, DEEP, stream=False))
    frames: list[tuple[str | None, str]]
    frames = [(None, DEEP)] if provider != "anthropic" else [("message_start", DEEP)]
    assert_invalid(await outcome(hostile, provider, sse(frames), stream=True))


async def test_deep_error_body_is_classified_not_raised(hostile: Hostile) -> None:
    server, clients = hostile
    server.reply = (400, "application/json", DEEP.encode())
    with pytest.raises(ProviderError) as info:
        await clients["openai"].complete(request())
    assert info.value.status_code == 400 and info.value.phase is FailurePhase.STATUS


def test_deep_tool_arguments_are_invalid_arguments_not_an_error() -> None:
    body = openai_completion()
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = DEEP
    response = parse_completion(body, "", provider="openai", model="m")
    assert response.tool_calls[0].arguments == {"__invalid_json__": DEEP}


# --- complete() and stream() agree ---------------------------------------------------------


def openai_bodies(function: dict[str, Any], finish: Any = "tool_calls") -> tuple[str, str]:
    """The same reply as a completion body and as a stream."""
    call = {"id": "call_1", "type": "function", "function": function}
    complete = openai_completion()
    complete["choices"][0]["message"]["tool_calls"] = [call]
    complete["choices"][0]["finish_reason"] = finish
    delta = {"index": 0, "delta": {"tool_calls": [{"index": 0, **call}]}, "finish_reason": finish}
    chunk = {"model": "gpt-test", "choices": [delta]}
    return json.dumps(complete), sse([(None, json.dumps(chunk)), (None, "[DONE]")])


def anthropic_bodies(block: dict[str, Any], stop: Any = "tool_use") -> tuple[str, str]:
    complete = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                "content": [block], "stop_reason": stop,
                "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
    start = {"type": "message_start",
             "message": {**complete, "content": [], "stop_reason": None}}  # fmt: skip
    frames = [
        ("message_start", start),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": block}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                           "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return json.dumps(complete), sse([(n, json.dumps(d)) for n, d in frames])


def gemini_bodies(part: dict[str, Any], finish: Any = "STOP") -> tuple[str, str]:
    chunk = {"candidates": [{"content": {"role": "model", "parts": [part]},
                             "finishReason": finish}]}  # fmt: skip
    return json.dumps(chunk), sse([(None, json.dumps(chunk))])


async def both(hostile: Hostile, provider: str, bodies: tuple[str, str]) -> list[Any]:
    complete, streamed = bodies
    return [
        await outcome(hostile, provider, complete, stream=False),
        await outcome(hostile, provider, streamed, stream=True),
    ]


BAD_NAMES = [None, "", 7, ["lookup"], {"name": "lookup"}]


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_bad_tool_names_are_invalid_in_both_paths(hostile: Hostile, name: Any) -> None:
    cases = [
        ("openai", openai_bodies({"name": name, "arguments": "{}"})),
        (
            "anthropic",
            anthropic_bodies({"type": "tool_use", "id": "t1", "name": name, "input": {}}),
        ),
        ("gemini", gemini_bodies({"functionCall": {"name": name, "args": {}}})),
    ]
    for provider, bodies in cases:
        for result in await both(hostile, provider, bodies):
            assert_invalid(result, "name")


@pytest.mark.parametrize("reason", [{"type": "stop"}, ["stop"], 3, True])
async def test_non_string_finish_reasons_are_invalid_in_both_paths(
    hostile: Hostile, reason: Any
) -> None:
    text = {"type": "text", "text": "hi"}
    cases = [
        ("openai", openai_bodies({"name": "lookup", "arguments": "{}"}, finish=reason)),
        ("anthropic", anthropic_bodies(text, stop=reason)),
        ("gemini", gemini_bodies({"text": "hi"}, finish=reason)),
    ]
    for provider, bodies in cases:
        for result in await both(hostile, provider, bodies):
            assert_invalid(result, "reason")


async def test_null_finish_reason_is_none_in_both_paths(hostile: Hostile) -> None:
    bodies = openai_bodies({"name": "lookup", "arguments": "{}"}, finish=None)
    for result in await both(hostile, "openai", bodies):
        assert isinstance(result, ModelResponse) and result.stop_reason is None


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [('{"a": 1}', {"a": 1}), ({"a": 1}, {"a": 1}), (None, {}), ("", {}), ("[1]", None)],
)
async def test_argument_shapes_agree_in_both_paths(
    hostile: Hostile, arguments: Any, expected: dict[str, Any] | None
) -> None:
    results = await both(hostile, "openai", openai_bodies({"name": "f", "arguments": arguments}))
    for result in results:
        assert isinstance(result, ModelResponse), repr(result)
        got = dict(result.tool_calls[0].arguments)
        assert got == (expected if expected is not None else {"__invalid_json__": arguments})


@pytest.mark.parametrize("arguments", [5, [1], True])
async def test_arguments_neither_text_nor_object_are_invalid(
    hostile: Hostile, arguments: Any
) -> None:
    results = await both(hostile, "openai", openai_bodies({"name": "f", "arguments": arguments}))
    for result in results:
        assert_invalid(result, "arguments")


def test_two_streamed_calls_sharing_an_index_stay_two_calls() -> None:
    acc = ChatStreamAccumulator(provider="openai", model="m")
    for call_id, name, args in (("a", "first", '{"x":'), ("b", "second", '{"y": 2}')):
        call = {"index": 0, "id": call_id, "function": {"name": name, "arguments": args}}
        acc.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
    tail = {"index": 0, "function": {"arguments": " 1}"}}
    acc.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [tail]}}]}))
    acc.feed("[DONE]")
    calls = acc.response().tool_calls
    assert [(c.id, c.name) for c in calls] == [("a", "first"), ("b", "second")]
    # the fragment without an id continues the latest call on that index
    assert calls[0].arguments == {"__invalid_json__": '{"x":'}
    assert calls[1].arguments == {"__invalid_json__": '{"y": 2} 1}'}


def test_repeated_id_on_the_same_index_is_one_call() -> None:
    acc = ChatStreamAccumulator(provider="openai", model="m")
    for piece in ('{"x"', ": 1}"):
        call = {"index": 0, "id": "a", "function": {"name": "f", "arguments": piece}}
        acc.feed(json.dumps({"choices": [{"delta": {"tool_calls": [call]}}]}))
    acc.feed("[DONE]")
    assert [(c.id, dict(c.arguments)) for c in acc.response().tool_calls] == [("a", {"x": 1})]


# --- the secrets of the provider side ------------------------------------------------------


@pytest.mark.parametrize("offset", [-20, -5, -1, 0])
def test_a_key_straddling_the_error_body_cut_is_redacted(offset: int) -> None:
    body = "x" * (MAX_ERROR_BODY + offset) + KEY + "y" * 100
    error = error_for_status(500, {}, body, provider="p", secrets=[KEY])
    kept = error.body or ""
    assert len(kept) <= MAX_ERROR_BODY
    for size in range(3, len(KEY) + 1):
        assert KEY[:size] not in kept and KEY[:size] not in str(error)


async def test_a_key_straddling_the_cut_over_http(hostile: Hostile) -> None:
    server, clients = hostile
    body = "x" * (MAX_ERROR_BODY - 10) + KEY + "y" * 100
    server.reply = (500, "text/plain", body.encode())
    with pytest.raises(ProviderError) as info:
        await clients["openai"].complete(request())
    assert KEY[:8] not in (info.value.body or "") and KEY[:8] not in str(info.value)


def test_an_absurd_sse_retry_field_is_ignored() -> None:
    events = SSEDecoder().feed(b"retry: " + b"9" * 5000 + b"\ndata: x\n\n")
    assert [(e.data, e.retry) for e in events] == [("x", None)]
