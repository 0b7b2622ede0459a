"""One turn's model step: build the request, call the model (streaming or not), check the reply.

Every failure leaves as an ``AgentLoopError``; a reply is an assistant message whose tool calls
have ids unique in the run. ``collect_stream`` is the one stream consumer (the engine's, DBOS's
model step and Temporal's model activity).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from sys import modules as _modules
from typing import TYPE_CHECKING, Any, NoReturn

from agentloop import events as ev
from agentloop._util.aio import aclose_iterator
from agentloop.batching import Waiting
from agentloop.cancel import CancelToken
from agentloop.clock import SYSTEM_CLOCK, Clock
from agentloop.engine.output import FINAL_RESULT, OutputType
from agentloop.engine.partial import Partials
from agentloop.engine.state import Paused
from agentloop.engine.stream_ids import StreamIds, unique_ids
from agentloop.errors import (
    AgentLoopError,
    AttemptRecord,
    Cancelled,
    FailurePhase,
    InternalError,
    ProviderError,
    ResponseInvalid,
)
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, Usage
from agentloop.model import (
    ModelClient,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSpec,
    StreamEvent,
)
from agentloop.observers import EventBus
from agentloop.run import Run
from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:
    from agentloop.engine.limits import Limits
    from agentloop.engine.state import RunState

__all__ = [
    "ClientEventBridge",
    "bridge",
    "build_request",
    "call_model",
    "checked_reply",
    "collect_stream",
    "dropped",
    "governor_waits",
    "model_failed",
    "replied",
    "reports",
]


class ClientEventBridge:
    """Turns a wrapping client's reports (retry, fallback, switch) into events.

    A rate governor (SPEC 25) also reads the run here: its wall-clock line (``wall_clock``)
    and its cancel signal (``check_cancel``, a checkpoint of every governor wait).
    """

    __slots__ = ("_bus", "_limits", "_run", "_tokens", "waits")

    def __init__(
        self, run: Run[Any], bus: EventBus, limits: Limits | None = None, state: Any = None
    ) -> None:
        self._run = run
        self._bus = bus
        self._limits = limits
        # the state's cancel tokens, not the state: the state holds this bridge, and a cycle
        # would leave the whole run (state, transcript, guard) to the collector's oldest pass
        self._tokens: tuple[CancelToken, ...] = () if state is None else state.tokens
        self.waits: list[str] | None = None
        """This turn's governor waits, as the turn record's warnings (the viewer's timeline)."""

    def on_rate_limit_wait(self, key: str, limit: str, wait_seconds: float) -> None:
        """A request waits for the rate governor (kept for the turn record, then an event)."""
        note = f"rate limit: waited {wait_seconds:.1f}s for {key} ({limit})"
        self.waits = [*(self.waits or ()), note]
        if self._bus.active:
            self._bus.emit(ev.RateLimitWait(self._run.id, self._bus.turn, key, limit, wait_seconds))

    def wall_clock(self) -> tuple[float, float] | None:
        """The run's wall-clock ``(spent, limit)`` in seconds, or None without that line."""
        gate = self._limits.budget if self._limits is not None else None
        return None if gate is None else gate.wall_clock_left()  # a child's: its parent's too

    def check_cancel(self) -> None:
        """A cancellation checkpoint (raises ``Cancelled``)."""
        for token in self._tokens:
            if token.cancelled:
                raise Cancelled()

    def on_retry(self, error: BaseException, attempt: int, wait_seconds: float) -> None:
        """A request is retried."""
        if self._bus.active:
            self._bus.emit(
                ev.RetryScheduled(self._run.id, self._bus.turn, error, attempt, wait_seconds)
            )

    def on_fallback(self, from_model: str, to_model: str, error: BaseException) -> None:
        """A request failed over."""
        if self._bus.active:
            self._bus.emit(ev.FellBack(self._run.id, self._bus.turn, from_model, to_model, error))

    def on_model_switched(self, from_model: str, to_model: str) -> None:
        """The serving model changed."""
        if self._bus.active:
            self._bus.emit(ev.ModelSwitched(self._run.id, self._bus.turn, from_model, to_model))


def reports(client: ModelClient) -> bool:
    """Whether ``client`` may report through ``request.events``: any but an HTTP adapter's.

    agentloop's HTTP adapters (``agentloop.providers._client.HttpClient``) never read it
    (``tests/test_run_records.py`` holds them to that); a wrapper (retrying, fallback, a rate
    governor, a durable step) or a client of your own may. A run gives its requests an
    ``events`` bridge when its client may report or somebody listens, and only then: a plain
    run holds one object fewer across each model call. The adapter's module is loaded once one
    of them exists, so this never imports it. ``isinstance``'s answer is read from the class:
    ``HttpClient`` subclasses a protocol, so ``isinstance`` would ask ``typing``'s
    ``__instancecheck__`` (about 1 us a run).
    """
    http = _modules.get("agentloop.providers._client")
    return http is None or http.HttpClient not in type(client).__mro__


def bridge(state: RunState, bus: EventBus, limits: Limits) -> ClientEventBridge:
    """The run's client-event bridge, made at its first request that needs one (``reports``)."""
    events = state.events = ClientEventBridge(state.run, bus, limits, state)
    return events


def governor_waits(events: ClientEventBridge) -> list[str] | None:
    """The governor waits a turn's model call made (None without any), taken for its record."""
    waits, events.waits = events.waits, None
    return waits


def build_request(
    state: RunState,
    system: str | None,
    settings: ModelSettings,
    output: OutputSpec | None = None,
    session_id: str | None = None,
) -> ModelRequest:
    """The request for the next model call (wrapping clients report to ``state.events``).

    ``session_id`` (the agent's) lets adapters key the provider's prompt cache per session.
    """
    tools, conversation = state.offer.specs, state.appendonly
    messages = state.sent()  # after a filtered handoff: its view (engine.views)
    compact_at = None
    if conversation is not None:  # SPEC 28: the base travels as system and tools, every time
        tools, system = conversation.base_tools, conversation.base_text
        if state.shown is None:  # a filtered handoff's view is a new conversation, without a base
            messages = messages[1:]
        compact_at = conversation.compact_at
    return ModelRequest(  # positional: ten keywords cost the call about 0.5 us to match
        tuple(messages),  # messages
        tools,
        system,
        settings,
        None,  # model
        state.events,  # events
        output,
        session_id,
        compact_at,
        state.offer.provider_tools,  # provider_tools
    )


async def call_model(
    client: ModelClient,
    request: ModelRequest,
    state: RunState,
    observers: EventBus,
    stream: bool,
    clock: Clock,
    output: OutputType[Any] | None = None,
    started: float | None = None,
) -> ModelResponse:
    """One model call; every failure leaves as an ``AgentLoopError``.

    ``output``: the agent's typed output, whose answer streams as ``PartialOutput`` events.
    ``started``: ``clock.monotonic()`` as the caller read it just before (one read fewer).
    """
    state.check_cancel()
    if started is None:
        started = clock.monotonic()
    partials = _partials(output, state, observers) if stream and output is not None else None
    try:
        if stream:
            response = await _consume_stream(client, request, state, observers, partials, clock)
        else:
            response = await client.complete(request)
    except Exception as exc:
        model_failed(exc, client, state, clock, started)
    return replied(response, client, state, clock, observers, partials)


def model_failed(
    exc: Exception, client: ModelClient, state: RunState, clock: Clock, started: float
) -> NoReturn:
    """Raise what a model call that raised ``exc`` ends in: always an ``AgentLoopError``.

    A provider's error gets its attempt log, a batch run's wait pauses the run (SPEC 25),
    anything else not ours is an ``InternalError``. Call it from the ``except`` that caught it.
    """
    if isinstance(exc, ProviderError):
        _ensure_attempt_log(exc, clock.monotonic() - started)
        raise exc
    if isinstance(exc, Waiting):  # a batch run's turn went to a provider batch (SPEC 25)
        state.waiting = exc.wait
        raise Paused from None
    if isinstance(exc, AgentLoopError):
        raise exc
    raise InternalError(
        f"model client raised {type(exc).__name__}: {redact_secrets(str(exc))}"
    ) from exc


def replied(
    response: object,
    client: ModelClient,
    state: RunState,
    clock: Clock,
    observers: EventBus,
    partials: Partials | None = None,
) -> ModelResponse:
    """A model call's reply, checked (``checked_reply``); partial output, dropped thinking told."""
    response = checked_reply(response, client, state, clock)  # one call: usage, ids
    if partials is not None:
        partials.finish(response)
    if response.thinking_dropped and observers.active:  # SPEC 28's drop_block at work
        observers.emit(dropped(response, state))
    return response


def dropped(response: ModelResponse, state: RunState) -> ev.ThinkingDropped:
    """The event of the thinking blocks a provider dropped from the request (SPEC 28)."""
    return ev.ThinkingDropped(state.run.id, state.turn_index, response.thinking_dropped)


def _partials(output: OutputType[Any], state: RunState, bus: EventBus) -> Partials | None:
    """The ``PartialOutput`` events of a typed answer; None when nobody listens."""
    if not bus.active:
        return None
    tool = FINAL_RESULT in state.offer.names
    return Partials(output, tool, bus, state.run.id, state.turn_index)


async def _consume_stream(
    client: ModelClient,
    request: ModelRequest,
    state: RunState,
    bus: EventBus,
    partials: Partials | None = None,
    clock: Clock | None = None,
) -> ModelResponse:
    """The reply of a streamed model call, each chunk forwarded as an event while somebody listens.

    ``collect_stream`` written out for the engine's hot path: no closure per call and no extra
    call per chunk; a cancel check per chunk, as before. A call's id is the run's from the first
    event that names it (``StreamIds``), so a UI starts it under the id its result carries.
    """
    run_id, turn = state.run.id, state.turn_index
    response: ModelResponse | None = None
    streamed = False
    ids: StreamIds | None = None  # made by the first call fragment a listener gets
    events = client.stream(request)
    try:
        async for event in events:
            if event.kind == "done":
                response = event.response
                continue
            streamed = True
            state.check_cancel()
            if bus.active:
                if event.kind == "tool_call_delta":
                    ids = ids or StreamIds(state.call_ids, clock or SYSTEM_CLOCK)
                    event = ids.stamped(event)
                elif event.kind == "attempt_reset" and ids is not None:
                    ids.reset()
                bus.emit(_forwarded(event, run_id, turn))
                if partials is not None:
                    partials.on_event(event)
    finally:
        if getattr(events, "ag_frame", events) is not None:  # a finished generator: nothing open
            await aclose_iterator(events)
    if response is None:
        _no_done(client)
    state.check_cancel()
    if not streamed and bus.active:
        _replay_parts(response, bus, run_id, turn)
    return response if ids is None else ids.restamped(response)


def _replay_parts(response: ModelResponse, bus: EventBus, run_id: str, turn: int) -> None:
    """The deltas of a reply that came whole (a client that does not stream), in its order.

    Reasoning then the text it precedes, as the reply holds them (SPEC 12), so a UI draws them
    in order; tool calls come whole with ``ModelResponded``. Not a reply (checked next, by
    ``checked_reply``): nothing.
    """
    if not isinstance(response, ModelResponse) or not isinstance(response.message, Message):
        return
    for part in response.message.parts:
        if isinstance(part, ThinkingPart):
            if part.text:
                bus.emit(ev.ThinkingDelta(run_id, turn, part.text))
        elif isinstance(part, TextPart) and part.text:
            bus.emit(ev.TextDelta(run_id, turn, part.text))


async def collect_stream(
    client: ModelClient,
    request: ModelRequest,
    on_event: Callable[[StreamEvent], None] | None = None,
) -> ModelResponse:
    """The reply of ``client.stream(request)``, every other event passed to ``on_event``.

    The iterator is always closed; a stream that ends without ``done`` is ``ResponseInvalid``.
    """
    response: ModelResponse | None = None
    events = client.stream(request)
    try:
        async for event in events:
            if event.kind == "done":
                response = event.response
            elif on_event is not None:
                on_event(event)
    finally:
        await aclose_iterator(events)
    if response is None:
        _no_done(client)
    return response


def _no_done(client: ModelClient) -> NoReturn:
    raise ResponseInvalid(
        "the stream ended without its terminal event",
        provider=client.provider,
        phase=FailurePhase.BODY,
        request_sent=True,
    )


def _forwarded(event: StreamEvent, run_id: str, turn: int) -> ev.Event:
    """A provider stream event as the engine's event."""
    if event.kind == "text_delta":
        return ev.TextDelta(run_id, turn, event.text)
    if event.kind == "thinking_delta":
        return ev.ThinkingDelta(run_id, turn, event.text)
    if event.kind == "tool_call_delta":
        return ev.ToolCallDelta(
            run_id, turn, event.index, event.name, event.arguments, event.call_id
        )
    return ev.AttemptReset(run_id, turn)


def _ensure_attempt_log(error: ProviderError, duration: float) -> None:
    """An unwrapped client's error gets a one-record attempt log."""
    if error.attempt_log:
        return
    error.attempt_log = (
        AttemptRecord(
            attempt=1,
            error_type=type(error).__name__,
            status_code=error.status_code,
            phase=error.phase,
            request_sent=error.request_sent,
            duration_seconds=duration,
        ),
    )


def checked_reply(
    response: object, client: ModelClient, state: RunState, clock: Clock
) -> ModelResponse:
    """Reject a reply that is not an assistant message; give every tool call a unique id.

    The ids are unique among ``state.call_ids``, which takes the reply's.
    """
    if (
        type(response) is not ModelResponse and not isinstance(response, ModelResponse)
    ) or response.message.role != "assistant":  # (the exact type first: no call)
        raise ResponseInvalid(
            f"the model client returned {type(response).__name__}, not an assistant reply",
            provider=client.provider,
            phase=FailurePhase.BODY,
            request_sent=True,
            body=repr(response)[:8192],
        )
    usage, whole = response.usage, False
    if type(usage) is Usage:  # the common reply: five ints in range, as ``_usage_checked`` sees
        a, b, c = usage.input_tokens, usage.output_tokens, usage.cache_read_tokens
        d, e = usage.cache_write_tokens, usage.reasoning_tokens
        whole = (  # each in range when their bits are: no call to ``min`` and ``max``
            type(a) is type(b) is type(c) is type(d) is type(e) is int
            and 0 <= (a | b | c | d | e) < _QUICK_BOUND
        )
    if not whole:
        response = _usage_checked(response, client)
    parts = response.message.parts
    kind = type(parts[0]) if len(parts) == 1 else None
    if kind is TextPart:  # one text: no call, nothing to read
        return response
    calls: tuple[ToolCallPart, ...] = (  # one call: its parts are its calls (``tool_calls``)
        parts if kind is ToolCallPart else response.message.tool_calls  # type: ignore[assignment]
    )
    if not calls:
        return response
    seen = state.call_ids
    if len(calls) == 1:  # the common reply: one call
        call_id = calls[0].id
        if type(seen) is set:
            if call_id and call_id not in seen:
                seen.add(call_id)
                return response
        elif call_id:  # ``NO_CALL_IDS``: the run's first call, its set made with it
            state.call_ids = {call_id}
            return response
    return unique_ids(response, calls, state, clock)


MAX_TOKEN_COUNT = 10**12
"""The largest token count a reply may report: no request comes near a trillion tokens."""
_QUICK_BOUND = 2**39
"""Below ``MAX_TOKEN_COUNT``: counts whose bits all fit under it are in range (a negative one
sets the sign bit); any other goes to ``_usage_checked``, which decides exactly."""

_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _usage_checked(response: ModelResponse, client: ModelClient) -> ModelResponse:
    """The reply with its usage as whole counts from 0 to ``MAX_TOKEN_COUNT``, else refused.

    Usage is checked here, where it enters, for the budget and the price table: a negative count
    would be free tokens and an absurd one breaks the pricing (a client of your own can report
    anything). A whole float (``12.0``) becomes an int; anything else is ``ResponseInvalid``.
    """
    usage = response.usage
    if not isinstance(usage, Usage):
        _bad_usage(client, f"usage is {type(usage).__name__}, not a Usage")
    fixed: dict[str, Any] = {}
    for name in (*_COUNTS, "reasoning_tokens"):
        value = getattr(usage, name)
        if type(value) is float and value.is_integer():
            value = fixed[name] = int(value)
        if type(value) is not int or not 0 <= value <= MAX_TOKEN_COUNT:
            _bad_usage(client, f"{name}={value!r}")
    return replace(response, usage=replace(usage, **fixed)) if fixed else response


def _bad_usage(client: ModelClient, what: str) -> NoReturn:
    raise ResponseInvalid(
        f"the model client reported impossible usage: {what} (a token count is a whole number "
        f"from 0 to {MAX_TOKEN_COUNT:,})",
        provider=client.provider,
        phase=FailurePhase.BODY,
        request_sent=True,
    )
