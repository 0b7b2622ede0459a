"""FallbackClient: the per-model breaker state machine, in-request failover, streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
    ContextLengthExceeded,
    FallbackExhausted,
    LockPoisoned,
    ModelRefused,
    ProviderUnavailable,
    RateLimited,
    RateLimitEscalation,
)
from agentloop.messages import Message
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.providers.anthropic import AnthropicClient
from agentloop.providers.fallback import (
    BreakerPolicy,
    FallbackClient,
    Health,
    ModelHealth,
    admit,
    cooldown_remaining,
    fails_over,
    record_failure,
    record_success,
)

Step = ModelResponse | BaseException | list[StreamEvent | BaseException]


def ok(text: str = "ok", model: str = "") -> ModelResponse:
    return ModelResponse(Message.assistant(text), model=model)


class FakeClient:
    """Plays a script (the last step repeats) and records every request."""

    def __init__(self, model: str, steps: Sequence[Step] = ()) -> None:
        self.steps: list[Step] = list(steps) or [ok(model)]
        self.requests: list[ModelRequest] = []
        self.closed = False
        self._model = model

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return "fake"

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _next(self, request: ModelRequest) -> Step:
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.requests.append(request)
        return step

    async def complete(self, request: ModelRequest) -> ModelResponse:
        step = self._next(request)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, list):
            raise AssertionError("stream step in complete()")
        return step

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        step = self._next(request)
        if isinstance(step, BaseException):
            raise step
        items = step if isinstance(step, list) else [StreamEvent("done", response=step)]
        for item in items:
            if isinstance(item, BaseException):
                raise item
            yield item

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Events:
    log: list[tuple[Any, ...]] = field(default_factory=list)

    def on_retry(self, error: BaseException, attempt: int, wait_seconds: float) -> None:
        self.log.append(("retry", attempt))

    def on_fallback(self, from_model: str, to_model: str, error: BaseException) -> None:
        self.log.append(("fallback", from_model, to_model, type(error).__name__))

    def on_model_switched(self, from_model: str, to_model: str) -> None:
        self.log.append(("switched", from_model, to_model))


def fail() -> ProviderUnavailable:
    return ProviderUnavailable("down", status_code=503)


def request(events: Events | None = None) -> ModelRequest:
    return ModelRequest(messages=[Message.user("hi")], events=events)


# --- the pure state machine ------------------------------------------------------------------

POLICY = BreakerPolicy()


def test_three_consecutive_failures_open_and_a_success_resets() -> None:
    health = ModelHealth()
    health = record_failure(health, POLICY, 0.0, rate_limited=False)
    health = record_failure(health, POLICY, 0.0, rate_limited=False)
    assert record_success(health, POLICY) == ModelHealth()
    health = record_failure(health, POLICY, 5.0, rate_limited=True)
    assert health.state is Health.OPEN and health.opened_at == 5.0


def test_cooldown_then_probe_then_two_successes_close() -> None:
    opened = ModelHealth(state=Health.OPEN, opened_at=100.0)
    assert cooldown_remaining(opened, POLICY, 130.0) == 30.0
    assert admit(opened, POLICY, 159.9) is opened
    probing = admit(opened, POLICY, 160.0)
    assert probing.state is Health.PROBING
    once = record_success(probing, POLICY)
    assert once.state is Health.PROBING and once.probe_successes == 1
    assert record_success(once, POLICY) == ModelHealth()


def test_rate_limit_while_probing_reopens_at_once() -> None:
    probing = ModelHealth(state=Health.PROBING, probe_successes=1)
    reopened = record_failure(probing, POLICY, 200.0, rate_limited=True)
    assert reopened.state is Health.OPEN and reopened.opened_at == 200.0


def test_transient_failure_while_probing_restarts_the_streak() -> None:
    probing = ModelHealth(state=Health.PROBING, probe_successes=1)
    after = record_failure(probing, POLICY, 0.0, rate_limited=False)
    assert after.state is Health.PROBING and after.probe_successes == 0
    after = record_failure(after, POLICY, 0.0, rate_limited=False)
    after = record_failure(after, POLICY, 9.0, rate_limited=False)
    assert after.state is Health.OPEN and after.opened_at == 9.0


def test_late_results_while_open_change_nothing() -> None:
    opened = ModelHealth(state=Health.OPEN, opened_at=1.0)
    assert record_success(opened, POLICY) is opened
    assert record_failure(opened, POLICY, 50.0, rate_limited=True) is opened


def test_zero_trip_threshold_never_trips() -> None:
    policy = BreakerPolicy(trip_threshold=0)
    health = ModelHealth()
    for _ in range(50):
        health = record_failure(health, policy, 0.0, rate_limited=True)
    assert health.state is Health.CLOSED


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (fail(), True),
        (AuthError("401"), True),
        (RateLimitEscalation(4, 2.0), True),
        (ConfigurationError("unsupported option"), False),
        (ModelRefused("refusal", "no"), False),
        (FallbackExhausted(3.0), True),
        (BadRequestError("400"), False),
        (ContextLengthExceeded("too long"), False),
        (Cancelled(), False),
        (ValueError("bug"), False),
    ],
)
def test_fails_over_table(error: BaseException, expected: bool) -> None:
    assert fails_over(error) is expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"trip_threshold": -1},
        {"cooldown": -1.0},
        {"cooldown": float("nan")},
        {"probe_successes": 0},
    ],
)
def test_invalid_values_raise_configuration_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        FallbackClient([FakeClient("a")], **kwargs)


def test_an_empty_list_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        FallbackClient([])


# --- the client ------------------------------------------------------------------------------


async def test_a_failed_request_moves_to_the_next_model_in_the_same_request() -> None:
    primary, backup = FakeClient("p", [fail()]), FakeClient("b")
    events = Events()
    fallback = FallbackClient([primary, backup])
    response = await fallback.complete(request(events))
    assert response.model == "b" and response.text == "b"
    assert primary.requests[0].model == "p" and backup.requests[0].model == "b"
    assert events.log == [("fallback", "p", "b", "ProviderUnavailable"), ("switched", "p", "b")]
    assert fallback.health[0].consecutive_failures == 1


async def test_the_serving_model_keeps_a_model_the_inner_reported() -> None:
    fallback = FallbackClient([FakeClient("p", [ok(model="p-2024")])])
    assert (await fallback.complete(request())).model == "p-2024"


async def test_three_failed_requests_take_the_primary_out_of_rotation() -> None:
    clock = Clock()
    primary, backup = FakeClient("p", [fail()]), FakeClient("b")
    fallback = FallbackClient([primary, backup], clock=clock)
    for _ in range(3):
        await fallback.complete(request())
    assert fallback.health[0].state is Health.OPEN and primary.calls == 3
    await fallback.complete(request())
    assert primary.calls == 3 and backup.calls == 4


async def test_all_models_out_raises_exhausted_before_sending() -> None:
    clock = Clock()
    primary, backup = FakeClient("p", [fail()]), FakeClient("b", [fail()])
    fallback = FallbackClient([primary, backup], clock=clock)
    for _ in range(3):
        with pytest.raises(ProviderUnavailable):
            await fallback.complete(request())
        clock.now += 5.0
    sent = primary.calls + backup.calls
    with pytest.raises(FallbackExhausted) as info:
        await fallback.complete(request())
    assert primary.calls + backup.calls == sent
    assert info.value.retry_after == pytest.approx(55.0)
    assert info.value.is_recoverable()
    with pytest.raises(FallbackExhausted):
        await collect(fallback.stream(request()))
    assert primary.calls + backup.calls == sent


async def test_conformance_chain_trips_advances_exhausts_probes_and_recovers() -> None:
    clock = Clock()
    p, b1, b2 = FakeClient("P", [fail()]), FakeClient("B1", [fail()]), FakeClient("B2", [fail()])
    events = Events()
    fallback = FallbackClient([p, b1, b2], clock=clock)
    for _ in range(3):
        with pytest.raises(ProviderUnavailable):
            await fallback.complete(request(events))
    assert [h.state for h in fallback.health] == [Health.OPEN] * 3
    clock.now += 30.0
    with pytest.raises(FallbackExhausted):
        await fallback.complete(request(events))
    clock.now += 30.0
    p.steps = [ok("back")]
    events.log.clear()
    assert (await fallback.complete(request(events))).model == "P"
    assert fallback.health[0].state is Health.PROBING
    await fallback.complete(request(events))
    assert fallback.health[0] == ModelHealth()
    assert events.log == []  # P served before and serves again: no switch
    assert b1.calls == 3 and b2.calls == 3


async def test_a_rate_limit_escalation_during_probing_retrips_at_once() -> None:
    clock = Clock()
    primary, backup = FakeClient("p", [fail(), fail(), fail()]), FakeClient("b")
    fallback = FallbackClient([primary, backup], clock=clock)
    for _ in range(3):
        await fallback.complete(request())
    clock.now += 60.0
    primary.steps.append(RateLimitEscalation(4, 9.0))
    assert (await fallback.complete(request())).model == "b"
    assert fallback.health[0].state is Health.OPEN and fallback.health[0].opened_at == clock.now
    assert primary.calls == 4


async def test_model_switch_is_reported_when_the_serving_model_changes() -> None:
    clock = Clock()
    primary = FakeClient("p", [fail(), fail(), fail(), ok()])
    fallback = FallbackClient([primary, FakeClient("b")], clock=clock)
    events = Events()
    for _ in range(3):
        await fallback.complete(request(events))
    clock.now += 60.0
    await fallback.complete(request(events))
    switches = [e for e in events.log if e[0] == "switched"]
    assert switches == [("switched", "p", "b"), ("switched", "b", "p")]


@pytest.mark.parametrize(
    "error", [BadRequestError("bad"), ContextLengthExceeded("too long"), Cancelled(), KeyError("x")]
)
async def test_bad_requests_and_cancellations_never_fail_over_or_count(
    error: BaseException,
) -> None:
    primary, backup = FakeClient("p", [error]), FakeClient("b")
    fallback = FallbackClient([primary, backup])
    with pytest.raises(type(error)):
        await fallback.complete(request())
    assert backup.calls == 0 and fallback.health[0] == ModelHealth()


async def test_task_cancellation_never_counts() -> None:
    primary, backup = FakeClient("p", [asyncio.CancelledError()]), FakeClient("b")
    fallback = FallbackClient([primary, backup])
    with pytest.raises(asyncio.CancelledError):
        await fallback.complete(request())
    assert backup.calls == 0 and fallback.health[0] == ModelHealth()


async def test_an_auth_error_of_one_model_fails_over() -> None:
    fallback = FallbackClient([FakeClient("p", [AuthError("401")]), FakeClient("b")])
    assert (await fallback.complete(request())).model == "b"


@pytest.mark.parametrize(
    "error", [ConfigurationError("cannot forward seed"), ModelRefused("refusal", "I can't")]
)
async def test_a_refused_setting_or_a_refusal_never_falls_over_nor_counts(
    error: BaseException,
) -> None:
    backup = FakeClient("b")
    fallback = FallbackClient([FakeClient("p", [error]), backup])
    with pytest.raises(type(error)):
        await fallback.complete(request())
    assert backup.calls == 0 and fallback.health[0] == ModelHealth()


async def test_a_raising_state_update_poisons_the_fallback_state() -> None:
    ticking = {"broken": True}

    def clock() -> float:
        if ticking["broken"]:
            raise RuntimeError("clock bug")
        return 0.0

    primary = FakeClient("p")
    fallback = FallbackClient([primary], clock=clock)
    with pytest.raises(LockPoisoned) as info:
        await fallback.complete(request())
    assert info.value.what == "fallback"
    ticking["broken"] = False
    with pytest.raises(LockPoisoned):
        await fallback.complete(request())
    assert primary.calls == 0
    fallback.reset()
    assert (await fallback.complete(request())).model == "p"


async def test_identity_and_close() -> None:
    a, b = FakeClient("a"), FakeClient("b")
    fallback = FallbackClient([a, b])
    assert fallback.model == "a" and fallback.provider == "fake"
    await fallback.aclose()
    assert a.closed and b.closed


# --- streams ---------------------------------------------------------------------------------


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


async def test_stream_fails_over_before_any_event() -> None:
    truncated: list[StreamEvent | BaseException] = []
    primary = FakeClient("p", [fail(), truncated])
    fallback = FallbackClient([primary, FakeClient("b")])
    events = await collect(fallback.stream(request()))
    assert events[-1].kind == "done" and events[-1].response is not None
    assert events[-1].response.model == "b"
    events = await collect(fallback.stream(request()))  # a stream without done fails over too
    assert events[-1].response is not None and events[-1].response.model == "b"
    assert fallback.health[0].consecutive_failures == 2


async def test_stream_never_fails_over_after_an_event() -> None:
    broken: list[StreamEvent | BaseException] = [StreamEvent("text_delta", text="x"), fail()]
    primary, backup = FakeClient("p", [broken]), FakeClient("b")
    fallback = FallbackClient([primary, backup])
    with pytest.raises(ProviderUnavailable):
        await collect(fallback.stream(request()))
    assert backup.calls == 0 and fallback.health[0].consecutive_failures == 1


# --- properties ------------------------------------------------------------------------------

OUTCOMES = st.sampled_from(["ok", "fail", "rate", "bad"])


def outcome(kind: str) -> Step:
    steps: dict[str, Step] = {
        "ok": ok(),
        "fail": fail(),
        "rate": RateLimited("429"),
        "bad": BadRequestError("400"),
    }
    return steps[kind]


@settings(max_examples=150, deadline=None)
@given(
    script=st.lists(
        st.tuples(st.lists(OUTCOMES, min_size=2, max_size=2), st.floats(0, 90)), max_size=25
    )
)
async def test_exhausted_never_sends_and_open_models_are_never_called(
    script: list[tuple[list[str], float]],
) -> None:
    clock = Clock()
    clients = [FakeClient("p"), FakeClient("b")]
    fallback = FallbackClient(clients, clock=clock)
    for outcomes, advance in script:
        for client, kind in zip(clients, outcomes, strict=True):
            client.steps = [outcome(kind)]
        before = [c.calls for c in clients]
        open_now = [
            h.state is Health.OPEN and cooldown_remaining(h, fallback.policy, clock.now) > 0
            for h in fallback.health
        ]
        try:
            await fallback.complete(request())
        except FallbackExhausted as error:
            assert [c.calls for c in clients] == before and all(open_now)
            assert error.retry_after is not None and 0 < error.retry_after <= 60.0
        except (ProviderUnavailable, RateLimited, BadRequestError):
            pass
        for was_open, client, calls in zip(open_now, clients, before, strict=True):
            if was_open:
                assert client.calls == calls
        clock.now += advance


# --- end to end through real local HTTP servers ----------------------------------------------


@dataclass
class Upstream:
    """A local Messages API endpoint that always answers ``status``."""

    status: int
    model: str
    hits: int = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        if self.status != 200:
            error = {"type": "error", "error": {"type": "api_error", "message": "boom"}}
            return web.json_response(error, status=self.status)
        if (await request.json()).get("stream"):
            return web.Response(body=SSE_BODY, content_type="text/event-stream")
        body = {"content": [{"type": "text", "text": f"from {self.model}"}], "model": ""}
        return web.json_response(body)


SSE_BODY = Path(
    "/work/shared/fixtures/anthropic-sdk-python/messages-sse/basic_response.sse"
).read_bytes()


@pytest.fixture
async def upstreams() -> AsyncIterator[list[tuple[Upstream, str]]]:
    made: list[tuple[Upstream, str]] = []
    servers: list[TestServer] = []
    for status, model in ((500, "primary"), (200, "backup")):
        upstream = Upstream(status, model)
        app = web.Application()
        app.router.add_post("/v1/messages", upstream.handle)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        made.append((upstream, f"http://127.0.0.1:{server.port}"))
    try:
        yield made
    finally:
        for server in servers:
            await server.close()


async def test_e2e_failover_and_trip_through_real_servers(
    upstreams: list[tuple[Upstream, str]],
) -> None:
    (primary, p_url), (backup, b_url) = upstreams
    clock = Clock()
    clients = [
        AnthropicClient("primary", api_key="sk-ant-e2e", base_url=p_url),
        AnthropicClient("backup", api_key="sk-ant-e2e", base_url=b_url),
    ]
    fallback = FallbackClient(clients, clock=clock)
    events = Events()
    try:
        for _ in range(3):
            response = await fallback.complete(request(events))
            assert response.text == "from backup" and response.model == "backup"
        assert primary.hits == 3 and fallback.health[0].state is Health.OPEN
        streamed = await collect(fallback.stream(request(events)))
        assert primary.hits == 3 and backup.hits == 4
        assert streamed[-1].response is not None and streamed[-1].response.text == "Hello there!"
    finally:
        await fallback.aclose()
    assert events.log[0] == ("fallback", "primary", "backup", "ProviderUnavailable")
    assert [e for e in events.log if e[0] == "switched"] == [("switched", "primary", "backup")]
