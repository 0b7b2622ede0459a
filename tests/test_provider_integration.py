"""Full ``Agent`` runs over every provider adapter against real local HTTP servers.

Each adapter (OpenAI, OpenRouter, Ollama, Anthropic, Gemini) runs one agent conversation with a
real tool round-trip, streaming and not: the model asks for two tools (one succeeds, one fails
softly), the tools run with the model's arguments, their results reach the server in the next
request body in that provider's wire shape, and the final answer, per-turn models and usage are
recorded. Then the resilience corners through the engine: replayed and truncated streams,
``StreamError.partial``, fallback between two servers, ``FallbackExhausted`` before sending, and
secret hygiene of a key given to ``Settings`` (greps every place an error can surface).

Only 127.0.0.1. The OpenAI-compatible and Anthropic servers are ``FakeProviderServer``; the Gemini
server is a minimal ``generateContent`` / ``streamGenerateContent?alt=sse`` app defined here.
"""

from __future__ import annotations

import json
import logging
import pickle
import traceback
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from agentloop import Agent, FallbackClient, RetryingClient, RunConfig, Settings, build_client, tool
from agentloop.errors import (
    AgentLoopError,
    FallbackExhausted,
    ProviderError,
    ProviderUnavailable,
    ResponseInvalid,
    StreamError,
    ToolError,
)
from agentloop.messages import Message
from agentloop.model import ModelClient
from agentloop.providers import (
    AnthropicClient,
    GeminiClient,
    OllamaClient,
    OpenAIClient,
    OpenRouterClient,
)
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault, RecordingObserver

KEY = "sk-test-integration-0123456789"
SECRET = "sk-test-SECRET123456789"
FINAL = "It is sunny in Paris; the route lookup failed."
FIRST_TEXT = "Checking."

# --- tools ------------------------------------------------------------------------------------


@dataclass
class ToolLog:
    """What the tools were called with, in order."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def make_tools(log: ToolLog) -> list[Any]:
    @tool
    async def lookup(city: str, days: int = 1) -> str:
        """Look up the weather of a city."""
        log.calls.append(("lookup", {"city": city, "days": days}))
        return f"sunny in {city} for {days} day(s)"

    @tool
    def route(origin: str, destination: str) -> str:
        """Plan a route (always fails softly here)."""
        log.calls.append(("route", {"origin": origin, "destination": destination}))
        raise ToolError(f"no route from {origin} to {destination}")

    return [lookup, route]


LOOKUP_ARGS = {"city": "Paris", "days": 3}
ROUTE_ARGS = {"origin": "Lyon", "destination": "Paris"}
LOOKUP_RESULT = "sunny in Paris for 3 day(s)"
ROUTE_ERROR = "no route from Lyon to Paris"


# --- a minimal Gemini server --------------------------------------------------------------------


@dataclass(frozen=True)
class GeminiTurn:
    """One scripted Gemini answer: text and/or function calls, or an HTTP error."""

    text: str = ""
    calls: Sequence[tuple[str, Mapping[str, Any]]] = ()
    usage: tuple[int, int] = (10, 5)
    status: int = 200
    error: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class GeminiServer:
    """``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``."""

    script: list[GeminiTurn]
    model: str = "served-model"
    default: GeminiTurn | None = None
    received: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    base_url: str = ""

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [body for _, _, body in self.received]

    def _chunk(self, parts: list[dict[str, Any]], finish: bool, turn: GeminiTurn) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        chunk: dict[str, Any] = {
            "candidates": [candidate],
            "modelVersion": self.model,
            "responseId": f"resp{len(self.received)}",
        }
        if finish:
            candidate["finishReason"] = "STOP"
            prompt, output = turn.usage
            chunk["usageMetadata"] = {
                "promptTokenCount": prompt,
                "candidatesTokenCount": output,
                "totalTokenCount": prompt + output,
            }
        return chunk

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.received.append((request.path_qs, dict(request.headers), body))
        turn = self.script.pop(0) if self.script else self.default
        assert turn is not None, "gemini script exhausted"
        if turn.status != 200:
            return web.json_response(turn.error, status=turn.status, headers=dict(turn.headers))
        calls = [{"functionCall": {"name": n, "args": dict(a)}} for n, a in turn.calls]
        if not request.path.endswith(":streamGenerateContent"):
            parts = ([{"text": turn.text}] if turn.text else []) + calls
            return web.json_response(self._chunk(parts, True, turn))
        assert request.query.get("alt") == "sse"
        pieces = [turn.text[i : i + 8] for i in range(0, len(turn.text), 8)]
        chunks = [self._chunk([{"text": p}], False, turn) for p in pieces]
        chunks.append(self._chunk(calls, True, turn))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        await response.write_eof()
        return response


@asynccontextmanager
async def gemini_server(
    script: Sequence[GeminiTurn], default: GeminiTurn | None = None
) -> AsyncIterator[GeminiServer]:
    server = GeminiServer(list(script), default=default)
    app = web.Application()
    app.router.add_post("/v1beta/models/{call}", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1beta"
    try:
        yield server
    finally:
        await runner.cleanup()


# --- one conversation over each adapter ---------------------------------------------------------

PROVIDERS = ["openai", "openrouter", "ollama", "anthropic", "gemini"]


@dataclass
class Served:
    """A client wired to a running server, and a view of what the server received."""

    client: ModelClient
    requests: Callable[[], Sequence[Mapping[str, Any]]]
    headers: Callable[[], list[Mapping[str, str]]]
    paths: Callable[[], list[str]]


@asynccontextmanager
async def conversation(provider: str) -> AsyncIterator[Served]:
    """A server scripted with: tool calls (lookup + route) with text, then the final answer."""
    if provider == "gemini":
        script = [
            GeminiTurn(FIRST_TEXT, [("lookup", LOOKUP_ARGS), ("route", ROUTE_ARGS)], (11, 7)),
            GeminiTurn(FINAL, usage=(20, 4)),
        ]
        async with gemini_server(script) as gemini:
            client: ModelClient = GeminiClient(
                "client-model", api_key=KEY, base_url=gemini.base_url
            )
            try:
                yield Served(
                    client,
                    lambda: gemini.requests,
                    lambda: [h for _, h, _ in gemini.received],
                    lambda: [p for p, _, _ in gemini.received],
                )
            finally:
                await client.aclose()
        return
    first = FakeReply(
        FIRST_TEXT,
        tool_calls=[
            FakeToolCall("lookup", LOOKUP_ARGS, id="call_lookup"),
            FakeToolCall("route", ROUTE_ARGS, id="call_route"),
        ],
        input_tokens=11,
        output_tokens=7,
    )
    async with FakeProviderServer(
        [first, FakeReply(FINAL, input_tokens=20, output_tokens=4)], model="served-model"
    ) as server:
        if provider == "anthropic":
            client = AnthropicClient("client-model", api_key=KEY, base_url=server.root_url)
        elif provider == "ollama":
            client = OllamaClient("client-model", base_url=server.base_url)
        else:
            cls = OpenRouterClient if provider == "openrouter" else OpenAIClient
            client = cls("client-model", api_key=KEY, base_url=server.base_url)
        try:
            yield Served(
                client,
                lambda: server.requests,
                lambda: [r.headers for r in server.received],
                lambda: [r.path for r in server.received],
            )
        finally:
            await client.aclose()


def assert_results_on_the_wire(provider: str, body: Mapping[str, Any]) -> None:
    """The second request carries both tool results in the provider's own shape."""
    if provider == "anthropic":
        last = body["messages"][-1]
        assert last["role"] == "user"
        assert last["content"] == [
            {
                "type": "tool_result",
                "tool_use_id": "call_lookup",
                "content": LOOKUP_RESULT,
                "is_error": False,
            },
            {
                "type": "tool_result",
                "tool_use_id": "call_route",
                "content": ROUTE_ERROR,
                "is_error": True,
                "cache_control": {"type": "ephemeral"},  # the transcript end: cached
            },
        ]
        calls = [b for b in body["messages"][-2]["content"] if b["type"] == "tool_use"]
        assert [(c["id"], c["name"], c["input"]) for c in calls] == [
            ("call_lookup", "lookup", LOOKUP_ARGS),
            ("call_route", "route", ROUTE_ARGS),
        ]
    elif provider == "gemini":
        contents = body["contents"]
        assert [c["role"] for c in contents] == ["user", "model", "user"]
        assert contents[1]["parts"] == [
            {"text": FIRST_TEXT},
            {"functionCall": {"name": "lookup", "args": LOOKUP_ARGS}},
            {"functionCall": {"name": "route", "args": ROUTE_ARGS}},
        ]
        assert contents[2]["parts"] == [
            {"functionResponse": {"name": "lookup", "response": {"result": LOOKUP_RESULT}}},
            {"functionResponse": {"name": "route", "response": {"error": ROUTE_ERROR}}},
        ]
    else:
        messages = body["messages"]
        assert messages[-2:] == [
            {"role": "tool", "tool_call_id": "call_lookup", "content": LOOKUP_RESULT},
            {"role": "tool", "tool_call_id": "call_route", "content": ROUTE_ERROR},
        ]
        assistant = messages[-3]
        assert assistant["role"] == "assistant" and assistant["content"] == FIRST_TEXT
        assert [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant["tool_calls"]
        ] == [("call_lookup", "lookup", LOOKUP_ARGS), ("call_route", "route", ROUTE_ARGS)]


def assert_credentials(provider: str, headers: Mapping[str, str]) -> None:
    lowered = {k.lower(): v for k, v in headers.items()}
    if provider == "anthropic":
        assert lowered["x-api-key"] == KEY
    elif provider == "gemini":
        assert lowered["x-goog-api-key"] == KEY
    elif provider == "ollama":
        assert "authorization" not in lowered
    else:
        assert lowered["authorization"] == f"Bearer {KEY}"


def deltas_per_turn(recorder: RecordingObserver) -> list[str]:
    """The streamed text of each turn, split at ``on_turn_start``."""
    turns: list[str] = []
    for name, args in recorder.events:
        if name == "on_turn_start":
            turns.append("")
        elif name == "on_text_delta":
            assert turns, "a text delta arrived before any turn started"
            turns[-1] += args[1]
    return turns


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_agent_tool_round_trip_over_each_adapter(provider: str, stream: bool) -> None:
    log = ToolLog()
    recorder = RecordingObserver()
    async with conversation(provider) as served:
        agent = Agent(
            served.client,
            tools=make_tools(log),
            system="Be brief.",
            config=RunConfig(stream=stream),
            observers=[recorder],
        )
        run = await agent.run("Weather in Paris, and a route from Lyon?")
        requests, headers, paths = served.requests(), served.headers(), served.paths()

    # the tools ran once each, with the model's arguments
    assert log.calls == [("lookup", LOOKUP_ARGS), ("route", ROUTE_ARGS)]
    # the results went back in the provider's wire shape, the soft error flagged where it can be
    assert len(requests) == 2
    assert_results_on_the_wire(provider, requests[1])
    for sent in headers:
        assert_credentials(provider, sent)
    if provider == "gemini":
        suffix = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        assert paths == [f"/v1beta/models/client-model{suffix}"] * 2
    else:
        assert all(bool(body.get("stream")) is stream for body in requests)
    # the outcome
    assert run.output == FINAL and run.stop_reason is None
    assert [t.model for t in run.turns] == ["served-model", "served-model"]
    assert [t.text for t in run.turns] == [FIRST_TEXT, FINAL]
    assert [(u.input_tokens, u.output_tokens) for u in (t.usage for t in run.turns)] == [
        (11, 7),
        (20, 4),
    ]
    assert (run.usage.input_tokens, run.usage.output_tokens) == (31, 11)
    results = run.turns[0].tool_results
    assert [(r.content, r.is_error) for r in results] == [
        (LOOKUP_RESULT, False),
        (ROUTE_ERROR, True),
    ]
    assert [m.role for m in agent.history] == ["user", "assistant", "tool", "assistant"]
    # streaming: the deltas arrive in order, per turn, and join to each turn's text
    if stream:
        assert deltas_per_turn(recorder) == [FIRST_TEXT, FINAL]
        assert len(recorder.of("on_text_delta")) > 2
    else:
        assert recorder.of("on_text_delta") == []
    assert recorder.of("on_attempt_reset") == []


# --- streams that break ---------------------------------------------------------------------


async def no_sleep(seconds: float) -> None:
    return None


def openai_at(server: FakeProviderServer, model: str = "client-model") -> OpenAIClient:
    return OpenAIClient(model, api_key=KEY, base_url=server.base_url)


def anthropic_at(server: FakeProviderServer, model: str = "client-model") -> AnthropicClient:
    return AnthropicClient(model, api_key=KEY, base_url=server.root_url)


CUT = "This first attempt is cut off half way through its sentence, never to finish."
SECOND = "The second attempt is the answer."


@pytest.mark.parametrize("make", [openai_at, anthropic_at], ids=["openai", "anthropic"])
async def test_replayed_stream_resets_and_answers_with_the_second_attempt(
    make: Callable[[FakeProviderServer], ModelClient],
) -> None:
    recorder = RecordingObserver()
    async with FakeProviderServer([Fault.truncate(FakeReply(CUT)), FakeReply(SECOND)]) as server:
        client = RetryingClient(make(server), replay_streams=True, sleep=no_sleep)
        agent = Agent(client, config=RunConfig(stream=True), observers=[recorder])
        try:
            run = await agent.run("hi")
        finally:
            await client.aclose()
        assert len(server.requests) == 2

    names = recorder.names()
    assert names.count("on_attempt_reset") == 1 and names.count("on_retry") == 1
    reset = names.index("on_attempt_reset")
    before = "".join(a[1] for n, a in recorder.events[:reset] if n == "on_text_delta")
    after = "".join(a[1] for n, a in recorder.events[reset:] if n == "on_text_delta")
    assert before and CUT.startswith(before) and before != CUT  # part of the cut attempt arrived
    assert after == SECOND
    retry_error = recorder.of("on_retry")[0][1]
    assert isinstance(retry_error, ResponseInvalid)
    assert run.output == SECOND and run.turns[-1].text == SECOND
    assert len(run.turns) == 1
    assert [m.text for m in agent.history] == ["hi", SECOND]
    assert all(before not in m.text for m in agent.history)


@pytest.mark.parametrize("make", [openai_at, anthropic_at], ids=["openai", "anthropic"])
async def test_failure_after_output_without_replay_is_stream_error_with_partial(
    make: Callable[[FakeProviderServer], ModelClient],
) -> None:
    recorder = RecordingObserver()
    async with FakeProviderServer([Fault.truncate(FakeReply(CUT)), FakeReply(SECOND)]) as server:
        client = RetryingClient(make(server), sleep=no_sleep)  # replay_streams=False
        agent = Agent(client, config=RunConfig(stream=True), observers=[recorder])
        try:
            with pytest.raises(StreamError) as info:
                await agent.run("hi")
        finally:
            await client.aclose()
        assert len(server.requests) == 1  # output reached the caller: never replayed

    error = info.value
    seen = "".join(args[1] for args in recorder.of("on_text_delta"))
    assert seen and CUT.startswith(seen) and seen != CUT
    assert isinstance(error.partial, Message) and error.partial.text == seen
    assert isinstance(error.__cause__, ResponseInvalid)
    assert error.attempts == 1 and error.request_sent is True
    assert recorder.of("on_attempt_reset") == [] and recorder.of("on_retry") == []
    run = agent.current_run
    assert run is not None and run.stop_reason is error and run.output is None
    assert run.turns == [] and agent.history == []  # no turn completed: nothing commits


@pytest.mark.parametrize("wrap", ["bare", "retrying"])
@pytest.mark.parametrize("make", [openai_at, anthropic_at], ids=["openai", "anthropic"])
async def test_truncated_stream_is_never_an_answer(
    make: Callable[[FakeProviderServer], ModelClient], wrap: str
) -> None:
    log = ToolLog()
    tool_turn = FakeReply(tool_calls=[FakeToolCall("lookup", LOOKUP_ARGS, id="call_1")])
    # an empty truncated reply: the stream ends before any output and before its terminal event
    script: list[Any] = [tool_turn] + [Fault.truncate(FakeReply(""))] * 3
    async with FakeProviderServer(script) as server:
        inner = make(server)
        client: ModelClient = (
            RetryingClient(inner, max_retries=2, sleep=no_sleep) if wrap == "retrying" else inner
        )
        agent = Agent(client, tools=make_tools(log), config=RunConfig(stream=True))
        try:
            with pytest.raises(ResponseInvalid) as info:
                await agent.run("weather?")
        finally:
            await client.aclose()
        sent = len(server.requests)

    attempts = 3 if wrap == "retrying" else 1
    assert sent == 1 + attempts
    assert info.value.attempts == attempts and len(info.value.attempt_log) == attempts
    assert info.value.request_sent is True
    assert log.calls == [("lookup", LOOKUP_ARGS)]
    run = agent.current_run
    assert run is not None and run.output is None and run.stop_reason is info.value
    assert len(run.turns) == 1  # the completed tool turn only
    # history keeps the completed turn (user, tool call, results), nothing of the broken one
    assert [m.role for m in agent.history] == ["user", "assistant", "tool"]
    assert agent.history[1].tool_calls[0].arguments == LOOKUP_ARGS


async def test_replayed_streams_that_keep_breaking_are_never_an_answer() -> None:
    """With replay on, every attempt printed text and broke: the run fails, nothing commits."""
    recorder = RecordingObserver()
    async with FakeProviderServer(default=Fault.truncate(FakeReply(CUT))) as server:
        client = RetryingClient(
            openai_at(server), max_retries=2, replay_streams=True, sleep=no_sleep
        )
        agent = Agent(client, config=RunConfig(stream=True), observers=[recorder])
        try:
            with pytest.raises(ProviderError) as info:
                await agent.run("hi")
        finally:
            await client.aclose()
        assert len(server.requests) == 3

    error = info.value
    # the failure is the truncation, or a StreamError (output had reached the caller) caused by it
    if isinstance(error, StreamError):
        assert isinstance(error.__cause__, ResponseInvalid)
        assert isinstance(error.partial, Message) and CUT.startswith(error.partial.text)
    else:
        assert isinstance(error, ResponseInvalid)
    assert error.attempts == 3
    assert len(recorder.of("on_attempt_reset")) == 2
    run = agent.current_run
    assert run is not None and run.output is None and run.turns == []
    assert agent.history == []


# --- fallback through the agent -----------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_fallback_to_a_backup_server_is_observed_and_recorded(stream: bool) -> None:
    log = ToolLog()
    recorder = RecordingObserver()
    backup_script = [
        FakeReply(tool_calls=[FakeToolCall("lookup", LOOKUP_ARGS, id="call_1")]),
        FakeReply(FINAL),
    ]
    async with (
        FakeProviderServer(default=Fault.server_error(500), model="primary-model") as primary,
        FakeProviderServer(backup_script, model="backup-model") as backup,
    ):
        client = FallbackClient(
            [openai_at(primary, "primary-model"), openai_at(backup, "backup-model")]
        )
        agent = Agent(
            client, tools=make_tools(log), config=RunConfig(stream=stream), observers=[recorder]
        )
        try:
            run = await agent.run("weather?")
        finally:
            await client.aclose()
        primary_hits, backup_bodies = len(primary.requests), backup.requests

    assert run.output == FINAL
    assert [t.model for t in run.turns] == ["backup-model", "backup-model"]
    assert run.turns[-1].model == "backup-model"
    assert log.calls == [("lookup", LOOKUP_ARGS)]
    assert backup_bodies[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": LOOKUP_RESULT,
    }
    assert all(body["model"] == "backup-model" for body in backup_bodies)
    # the primary stays in rotation (2 failures < trip threshold 3): each turn tried it first
    assert primary_hits == 2
    fallbacks = recorder.of("on_fallback")
    assert [(f[1], f[2]) for f in fallbacks] == [("primary-model", "backup-model")] * 2
    assert all(isinstance(f[3], ProviderUnavailable) for f in fallbacks)
    assert [(s[1], s[2]) for s in recorder.of("on_model_switched")] == [
        ("primary-model", "backup-model")
    ]
    names = recorder.names()
    assert (
        names.index("on_fallback") < names.index("on_model_switched") < names.index("on_response")
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_fallback_exhausted_is_raised_before_any_request(stream: bool) -> None:
    now = [1000.0]
    async with (
        FakeProviderServer(default=Fault.server_error(503), model="primary-model") as primary,
        FakeProviderServer(default=Fault.server_error(500), model="backup-model") as backup,
    ):
        client = FallbackClient(
            [openai_at(primary, "primary-model"), openai_at(backup, "backup-model")],
            trip_threshold=1,
            cooldown=30.0,
            clock=lambda: now[0],
        )
        agent = Agent(client, config=RunConfig(stream=stream))
        try:
            with pytest.raises(ProviderUnavailable):
                await agent.run("first")  # both fail once: both out of rotation
            sent = (len(primary.requests), len(backup.requests))
            now[0] += 10.0
            with pytest.raises(FallbackExhausted) as info:
                await agent.run("second")
            assert (len(primary.requests), len(backup.requests)) == sent == (1, 1)
        finally:
            await client.aclose()

    assert info.value.retry_after == pytest.approx(20.0)
    run = agent.current_run
    assert run is not None and run.stop_reason is info.value and run.turns == []
    assert agent.history == []


# --- secret hygiene -----------------------------------------------------------------------------


def echoing_error(provider: str, status: int) -> tuple[Mapping[str, Any], dict[str, str]]:
    """An error body that echoes the key back (as a careless proxy would), and headers."""
    message = f"Request with key {SECRET} failed (Bearer {SECRET})"
    headers = {"Retry-After": "0.01"} if status == 429 else {}
    if provider == "anthropic":
        kinds = {401: "authentication_error", 429: "rate_limit_error", 500: "api_error"}
        return {"type": "error", "error": {"type": kinds[status], "message": message}}, headers
    if provider == "gemini":
        states = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}
        return {"error": {"code": status, "status": states[status], "message": message}}, headers
    return {
        "error": {"message": message, "type": "error", "code": status, "param": SECRET}
    }, headers


@asynccontextmanager
async def failing_server(
    provider: str, status: int
) -> AsyncIterator[tuple[str, Callable[[], int]]]:
    body, headers = echoing_error(provider, status)
    if provider == "gemini":
        turn = GeminiTurn(status=status, error=body, headers=headers)
        async with gemini_server([], default=turn) as gemini:
            yield gemini.base_url, lambda: len(gemini.received)
        return
    async with FakeProviderServer(default=Fault.http(status, body, headers)) as server:
        url = server.root_url if provider == "anthropic" else server.base_url
        yield url, lambda: len(server.received)


def leaks(text: str) -> bool:
    return SECRET in text or SECRET[8:] in text  # the key, or its distinctive tail


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("status", [401, 500, 429])
@pytest.mark.parametrize("provider", ["openai", "openrouter", "anthropic", "gemini"])
async def test_a_settings_key_never_leaks(
    provider: str, status: int, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with failing_server(provider, status) as (url, hits):
        settings = Settings(
            provider=provider, model="m", api_key=SECRET, base_url=url, max_retries=1
        )
        client = build_client(settings)
        agent = Agent(client, config=RunConfig(stream=stream))
        try:
            with pytest.raises(AgentLoopError) as info:
                await agent.run("hi")
        finally:
            await client.aclose()
        assert hits() >= 1

    error = info.value
    assert isinstance(error, ProviderError)
    run = agent.current_run
    assert run is not None and run.stop_reason is error
    places = {
        "str": str(error),
        "repr": repr(error),
        "attempt_log": repr(error.attempt_log),
        "body": str(error.body),
        "traceback": "".join(traceback.format_exception(error)),
        "run": json.dumps(run.to_dict()),
        "summary": repr(error.summary),
        "client": repr(client) + repr(settings),
        "logs": caplog.text,
        "records": "\n".join(
            f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records
        ),
    }
    pickled = pickle.dumps(error)
    assert SECRET.encode() not in pickled
    restored = pickle.loads(pickled)
    places["unpickled"] = f"{restored} {restored!r} {restored.attempt_log!r}"
    leaked = [name for name, text in places.items() if leaks(text)]
    assert leaked == []
    assert "Request with key" in places["traceback"]  # the echoed body was seen, redacted
    assert error.attempt_log and error.attempts == len(error.attempt_log)
