"""RetryingClient: the pure decision, the sleeping loop, streams, and properties."""

from __future__ import annotations

import asyncio
import math
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.errors import (
    AuthError,
    BadRequestError,
    Cancelled,
    ConfigurationError,
    InsufficientCredits,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    ProviderUnreachable,
    RateLimited,
    RateLimitEscalation,
    ResponseInvalid,
    StreamError,
)
from agentloop.messages import Message
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.providers.anthropic import AnthropicClient
from agentloop.providers.retrying import (
    RetryingClient,
    RetryPolicy,
    RetryState,
    decide,
    is_retryable,
)

REQUEST = ModelRequest(messages=[Message.user("hi")])


def ok(text: str = "ok") -> ModelResponse:
    return ModelResponse(Message.assistant(text), model="fake")


def text_events(*chunks: str) -> list[StreamEvent | BaseException]:
    events: list[StreamEvent | BaseException] = [StreamEvent("text_delta", text=c) for c in chunks]
    events.append(StreamEvent("done", response=ok("".join(chunks))))
    return events


Step = ModelResponse | BaseException | list[StreamEvent | BaseException]


class FakeClient:
    """An in-process ModelClient that plays a script, one step per request."""

    def __init__(self, steps: Sequence[Step], model: str = "fake") -> None:
        self.steps = list(steps)
        self.calls = 0
        self.closed = False
        self._model = model

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return "fakeprov"

    def _next(self) -> Step:
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        return step

    async def complete(self, request: ModelRequest) -> ModelResponse:
        step = self._next()
        if isinstance(step, BaseException):
            raise step
        assert isinstance(step, ModelResponse)
        return step

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        step = self._next()
        if isinstance(step, BaseException):
            raise step
        assert isinstance(step, list)
        for item in step:
            if isinstance(item, BaseException):
                raise item
            yield item

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class Sleeper:
    waits: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@dataclass
class Events:
    retries: list[tuple[str, int, float]] = field(default_factory=list)

    def on_retry(self, error: BaseException, attempt: int, wait_seconds: float) -> None:
        self.retries.append((type(error).__name__, attempt, wait_seconds))

    def on_fallback(self, from_model: str, to_model: str, error: BaseException) -> None:
        raise AssertionError("not expected")

    def on_model_switched(self, from_model: str, to_model: str) -> None:
        raise AssertionError("not expected")


def client(inner: FakeClient | AnthropicClient, sleeper: Sleeper, **kwargs: Any) -> RetryingClient:
    return RetryingClient(inner, sleep=sleeper, random=lambda a, b: 0.0, **kwargs)


def unavailable() -> ProviderUnavailable:
    return ProviderUnavailable("503", status_code=503, phase="status", request_sent=True)


def rate_limited(retry_after: float | None = None) -> RateLimited:
    return RateLimited("429", status_code=429, retry_after=retry_after, phase="status")


# --- the pure decision ---------------------------------------------------------------------


def test_decide_backs_off_exponentially_with_jitter_and_cap() -> None:
    policy = RetryPolicy(max_retries=10, base_delay=1.0, max_delay=5.0, jitter=0.1)
    state = RetryState()
    waits = []
    for _ in range(5):
        decision = decide(policy, state, unavailable(), 0.1)
        waits.append(decision.wait_seconds)
        state = decision.state
    assert waits == pytest.approx([1.1, 2.2, 4.4, 5.5, 5.5])
    assert state.attempts == 5 and state.transport_retries == 5


def test_decide_gives_up_after_max_retries() -> None:
    policy = RetryPolicy(max_retries=1)
    first = decide(policy, RetryState(), unavailable())
    assert first.retry
    second = decide(policy, first.state, unavailable())
    assert not second.retry and second.state.attempts == 2


def test_decide_rate_limit_waits_for_the_hint_capped() -> None:
    policy = RetryPolicy()
    assert decide(policy, RetryState(), rate_limited(7)).wait_seconds == 7
    assert decide(policy, RetryState(), rate_limited(None)).wait_seconds == 5.0
    assert decide(policy, RetryState(), rate_limited(600)).wait_seconds == 60.0


def test_decide_escalates_on_the_fourth_rate_limit() -> None:
    policy = RetryPolicy()
    state = RetryState()
    for _ in range(3):
        decision = decide(policy, state, rate_limited(600))
        assert decision.retry
        state = decision.state
    final = decide(policy, state, rate_limited(600))
    assert final.escalate and not final.retry and final.retry_after == 60.0


def test_decide_server_hint_wins_over_transport_backoff() -> None:
    error = ProviderUnavailable("503", status_code=503, retry_after=2.5)
    assert decide(RetryPolicy(), RetryState(), error).wait_seconds == 2.5


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (unavailable(), True),
        (ProviderTimeout("t"), True),
        (ResponseInvalid("bad"), True),
        (rate_limited(), True),
        (ProviderUnreachable("dns"), False),
        (AuthError("401"), False),
        (BadRequestError("400"), False),
        (InsufficientCredits("quota"), False),
        (RateLimitEscalation(4, 1.0), False),
        (StreamError("mid"), False),
        (ValueError("x"), False),
        (Cancelled(), False),
    ],
)
def test_is_retryable_follows_the_class_table(error: BaseException, expected: bool) -> None:
    assert is_retryable(error) is expected


def test_should_retry_hint_overrides_the_class() -> None:
    no = unavailable()
    no.should_retry = False
    yes = AuthError("401")
    yes.should_retry = True
    assert not is_retryable(no)
    assert is_retryable(yes)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_retries": -1},
        {"max_retries": True},
        {"max_retries": 1.5},
        {"base_delay": -0.1},
        {"max_delay": math.inf},
        {"jitter": 1.5},
        {"jitter": math.nan},
        {"rate_limit_default_delay": "5"},
        {"rate_limit_max_delay": -1},
        {"rate_limit_retries": -2},
    ],
)
def test_invalid_values_raise_configuration_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        RetryingClient(FakeClient([ok()]), **kwargs)


# --- the loop --------------------------------------------------------------------------------


async def test_two_503_then_success_records_waits() -> None:
    sleeper, events = Sleeper(), Events()
    inner = FakeClient([unavailable(), unavailable(), ok()])
    request = ModelRequest(messages=[Message.user("hi")], events=events)
    response = await client(inner, sleeper).complete(request)
    assert response.text == "ok"
    assert inner.calls == 3
    assert sleeper.waits == pytest.approx([0.1, 0.2])
    assert events.retries == [("ProviderUnavailable", 1, 0.1), ("ProviderUnavailable", 2, 0.2)]


async def test_exhausted_retries_fill_the_attempt_log() -> None:
    sleeper = Sleeper()
    ticks = iter(range(100))
    inner = FakeClient([unavailable()])
    retrying = RetryingClient(
        inner, sleep=sleeper, clock=lambda: float(next(ticks)), random=lambda a, b: b
    )
    with pytest.raises(ProviderUnavailable) as info:
        await retrying.complete(REQUEST)
    error = info.value
    assert inner.calls == 4
    assert error.attempts == 4 and len(error.attempt_log) == 4
    assert [r.attempt for r in error.attempt_log] == [1, 2, 3, 4]
    assert [r.wait_seconds for r in error.attempt_log] == pytest.approx([0.11, 0.22, 0.44, 0.0])
    assert error.retry_wait_seconds == pytest.approx(0.77)
    assert all(r.duration_seconds == 1.0 for r in error.attempt_log)
    assert error.attempt_log[0].status_code == 503
    assert error.attempt_log[0].error_type == "ProviderUnavailable"


async def test_non_retryable_error_costs_one_attempt() -> None:
    sleeper = Sleeper()
    inner = FakeClient([AuthError("401", status_code=401), ok()])
    with pytest.raises(AuthError) as info:
        await client(inner, sleeper).complete(REQUEST)
    assert inner.calls == 1 and sleeper.waits == []
    assert info.value.attempts == 1 and len(info.value.attempt_log) == 1


async def test_fourth_rate_limit_escalates() -> None:
    sleeper = Sleeper()
    inner = FakeClient([rate_limited(7)])
    with pytest.raises(RateLimitEscalation) as info:
        await client(inner, sleeper).complete(REQUEST)
    assert inner.calls == 4 and sleeper.waits == [7, 7, 7]
    assert info.value.attempts == 4 and info.value.retry_after == 7
    assert isinstance(info.value.__cause__, RateLimited)
    assert len(info.value.attempt_log) == 4 and info.value.retry_wait_seconds == 21


async def test_rate_limits_have_their_own_budget() -> None:
    sleeper = Sleeper()
    inner = FakeClient([rate_limited(), unavailable(), rate_limited(), unavailable(), ok()])
    retrying = client(inner, sleeper, max_retries=2)
    assert (await retrying.complete(REQUEST)).text == "ok"
    assert sleeper.waits == pytest.approx([5.0, 0.1, 5.0, 0.2])


async def test_zero_rate_limit_retries_escalates_at_once() -> None:
    inner = FakeClient([rate_limited(3)])
    with pytest.raises(RateLimitEscalation) as info:
        await client(inner, Sleeper(), rate_limit_retries=0).complete(REQUEST)
    assert inner.calls == 1 and info.value.attempts == 1


@pytest.mark.parametrize("error", [ValueError("bug"), Cancelled()])
async def test_foreign_errors_pass_through_untouched(error: BaseException) -> None:
    inner = FakeClient([error, ok()])
    with pytest.raises(type(error)):
        await client(inner, Sleeper()).complete(REQUEST)
    assert inner.calls == 1


async def test_cancellation_during_backoff_propagates_immediately() -> None:
    inner = FakeClient([rate_limited(60), ok()])
    retrying = RetryingClient(inner)  # the real asyncio.sleep
    task = asyncio.create_task(retrying.complete(REQUEST))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1.0)
    assert inner.calls == 1


async def test_a_raising_listener_is_ignored() -> None:
    class Loud(Events):
        def on_retry(self, error: BaseException, attempt: int, wait_seconds: float) -> None:
            raise RuntimeError("observer bug")

    inner = FakeClient([unavailable(), ok()])
    request = ModelRequest(messages=[Message.user("hi")], events=Loud())
    assert (await client(inner, Sleeper()).complete(request)).text == "ok"


async def test_identity_and_close_delegate() -> None:
    inner = FakeClient([ok()], model="m1")
    retrying = RetryingClient(inner)
    assert retrying.model == "m1" and retrying.provider == "fakeprov"
    await retrying.aclose()
    assert inner.closed


# --- streams ---------------------------------------------------------------------------------


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


async def test_stream_failing_before_output_is_retried_silently() -> None:
    sleeper = Sleeper()
    inner = FakeClient([unavailable(), [unavailable()], text_events("a", "b")])
    events = await collect(client(inner, sleeper).stream(REQUEST))
    assert [e.kind for e in events] == ["text_delta", "text_delta", "done"]
    assert inner.calls == 3 and len(sleeper.waits) == 2


async def test_stream_failure_after_output_raises_stream_error() -> None:
    sleeper = Sleeper()
    broken: list[StreamEvent | BaseException] = [
        StreamEvent("text_delta", text="par"),
        unavailable(),
    ]
    inner = FakeClient([broken, text_events("x")])
    received: list[StreamEvent] = []
    with pytest.raises(StreamError) as info:
        async for event in client(inner, sleeper).stream(REQUEST):
            received.append(event)
    error = info.value
    assert [e.text for e in received] == ["par"]
    assert isinstance(error.partial, Message) and error.partial.text == "par"
    assert error.status_code == 503 and error.request_sent is True
    assert isinstance(error.__cause__, ProviderUnavailable)
    assert error.attempts == 1 and error.attempt_log[0].wait_seconds == 0.0
    assert inner.calls == 1 and sleeper.waits == []


async def test_stream_replay_opt_in_resets_and_retries() -> None:
    broken: list[StreamEvent | BaseException] = [
        StreamEvent("text_delta", text="par"),
        unavailable(),
    ]
    inner = FakeClient([broken, text_events("whole")])
    events = await collect(client(inner, Sleeper(), replay_streams=True).stream(REQUEST))
    assert [e.kind for e in events] == ["text_delta", "attempt_reset", "text_delta", "done"]
    assert events[-1].response is not None and events[-1].response.text == "whole"


async def test_stream_without_terminal_event_is_retried_never_complete() -> None:
    truncated: list[StreamEvent | BaseException] = []
    inner = FakeClient([truncated, truncated, truncated, truncated])
    with pytest.raises(ResponseInvalid) as info:
        await collect(client(inner, Sleeper()).stream(REQUEST))
    assert inner.calls == 4 and info.value.attempts == 4
    assert "without a terminal event" in str(info.value)


async def test_stream_non_retryable_error_before_output_is_raised_as_is() -> None:
    inner = FakeClient([AuthError("401", status_code=401)])
    with pytest.raises(AuthError) as info:
        await collect(client(inner, Sleeper()).stream(REQUEST))
    assert inner.calls == 1 and info.value.attempts == 1


async def test_stream_stops_at_done() -> None:
    after_done = [*text_events("a"), StreamEvent("text_delta", text="ignored")]
    events = await collect(client(FakeClient([after_done]), Sleeper()).stream(REQUEST))
    assert events[-1].kind == "done" and len(events) == 2


# --- properties -----------------------------------------------------------------------------

ERRORS: list[type[ProviderError]] = [
    ProviderUnavailable,
    ProviderTimeout,
    ResponseInvalid,
    RateLimited,
    AuthError,
    BadRequestError,
    ProviderUnreachable,
    InsufficientCredits,
]


@settings(max_examples=150, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(ERRORS), max_size=12),
    max_retries=st.integers(0, 4),
    rate_limit_retries=st.integers(0, 4),
)
async def test_attempt_accounting_properties(
    kinds: list[type[ProviderError]], max_retries: int, rate_limit_retries: int
) -> None:
    steps: list[Step] = [*(kind("e") for kind in kinds), ok()]
    inner = FakeClient(steps)
    retrying = client(
        inner, Sleeper(), max_retries=max_retries, rate_limit_retries=rate_limit_retries
    )
    try:
        await retrying.complete(REQUEST)
    except ProviderError as error:
        assert error.attempts == inner.calls == len(error.attempt_log)
        last = kinds[inner.calls - 1]
        if not last.retryable:
            assert isinstance(error, last)  # a non-retryable error is raised as it came
        assert error.retry_wait_seconds == pytest.approx(
            sum(r.wait_seconds for r in error.attempt_log)
        )
    assert inner.calls <= max_retries + rate_limit_retries + 1
    first_fatal = next((i for i, k in enumerate(kinds) if not k.retryable), None)
    if first_fatal is not None:
        assert inner.calls <= first_fatal + 1
    if RateLimited not in kinds:
        assert inner.calls <= max_retries + 1


@settings(max_examples=100, deadline=None)
@given(retry_index=st.integers(0, 80), sample=st.floats(-0.1, 0.1))
def test_backoff_stays_within_the_jittered_cap(retry_index: int, sample: float) -> None:
    policy = RetryPolicy()
    wait = policy.backoff(retry_index, sample)
    assert 0.0 <= wait <= policy.max_delay * 1.1 + 1e-9


# --- end to end through a real local HTTP server ---------------------------------------------


@dataclass
class LocalServer:
    """An aiohttp server on 127.0.0.1 answering /v1/messages from a list of (status, headers)."""

    replies: list[tuple[int, dict[str, str]]]
    hits: int = 0

    async def handle(self, request: web.Request) -> web.Response:
        status, headers = self.replies[min(self.hits, len(self.replies) - 1)]
        self.hits += 1
        body: dict[str, Any]
        if status == 200:
            body = {
                "content": [{"type": "text", "text": "served"}],
                "model": "claude-local",
                "stop_reason": "end_turn",
            }
        else:
            body = {"type": "error", "error": {"type": "api_error", "message": f"HTTP {status}"}}
        return web.json_response(body, status=status, headers=headers)


@pytest.fixture
async def local() -> AsyncIterator[tuple[LocalServer, str]]:
    state = LocalServer([])
    app = web.Application()
    app.router.add_post("/v1/messages", state.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield state, f"http://127.0.0.1:{server.port}"
    finally:
        await server.close()


@pytest.fixture
async def anthropic_at() -> AsyncIterator[Callable[[str], AnthropicClient]]:
    made: list[AnthropicClient] = []

    def make(url: str) -> AnthropicClient:
        made.append(AnthropicClient("claude-local", api_key="sk-ant-e2e-secret", base_url=url))
        return made[-1]

    yield make
    for item in made:
        await item.aclose()


async def test_e2e_503_503_200_succeeds_with_retries_reported(
    local: tuple[LocalServer, str], anthropic_at: Callable[[str], AnthropicClient]
) -> None:
    state, url = local
    state.replies = [(503, {}), (503, {}), (200, {})]
    events, sleeper = Events(), Sleeper()
    request = ModelRequest(messages=[Message.user("hi")], events=events)
    response = await client(anthropic_at(url), sleeper).complete(request)
    assert response.text == "served" and state.hits == 3
    assert events.retries == [("ProviderUnavailable", 1, 0.1), ("ProviderUnavailable", 2, 0.2)]


async def test_e2e_429_retry_after_7_is_waited_then_escalates(
    local: tuple[LocalServer, str], anthropic_at: Callable[[str], AnthropicClient]
) -> None:
    state, url = local
    state.replies = [(429, {"Retry-After": "7"})]
    sleeper = Sleeper()
    with pytest.raises(RateLimitEscalation) as info:
        await client(anthropic_at(url), sleeper).complete(REQUEST)
    error = info.value
    assert sleeper.waits == [7.0, 7.0, 7.0] and state.hits == 4
    assert error.attempts == 4 and error.retry_after == 7.0
    assert [r.wait_seconds for r in error.attempt_log] == [7.0, 7.0, 7.0, 0.0]
    assert all(r.status_code == 429 and r.request_sent for r in error.attempt_log)


async def test_e2e_401_costs_one_attempt(
    local: tuple[LocalServer, str], anthropic_at: Callable[[str], AnthropicClient]
) -> None:
    state, url = local
    state.replies = [(401, {})]
    sleeper = Sleeper()
    with pytest.raises(AuthError) as info:
        await client(anthropic_at(url), sleeper).complete(REQUEST)
    assert state.hits == 1 and sleeper.waits == [] and info.value.attempts == 1
    record = info.value.attempt_log[0]
    assert record.status_code == 401 and record.phase == "status" and record.request_sent is True
    assert "sk-ant-e2e-secret" not in repr(info.value.attempt_log) + str(info.value)


async def test_e2e_connection_refused_is_retried_and_logged_as_unsent(
    anthropic_at: Callable[[str], AnthropicClient],
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeper = Sleeper()
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(ProviderUnavailable) as info:
        await client(anthropic_at(url), sleeper).complete(REQUEST)
    assert info.value.attempts == 4 and len(sleeper.waits) == 3
    assert all(r.phase == "connect" and r.request_sent is False for r in info.value.attempt_log)
