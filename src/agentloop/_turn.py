"""One run's mutable state and one turn's model step: build the request, call, record.

``RunState.transcript`` is committed history plus this run's messages, built once per run and
appended to per turn; ``boundary`` marks the end of the last complete turn (what a salvaging
finalize commits).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from agentloop import events as ev
from agentloop.cancel import CancelToken
from agentloop.errors import (
    AgentLoopError,
    AttemptRecord,
    Cancelled,
    FailurePhase,
    InternalError,
    ProviderError,
    ResponseInvalid,
)
from agentloop.messages import Message, ToolCallPart
from agentloop.model import (
    ModelClient,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSpec,
    StreamEvent,
    ToolSpec,
)
from agentloop.observers import EventBus
from agentloop.run import Run
from agentloop.safety.redact import redact_secrets

__all__ = ["ClientEventBridge", "RunState", "build_request", "call_model", "collect_stream"]


@dataclass(eq=False)
class RunState:
    """Everything one run mutates."""

    run: Run[Any]
    tokens: tuple[CancelToken, ...]
    transcript: list[Message]
    base: int
    advertised: frozenset[str]
    specs: tuple[ToolSpec, ...]
    boundary: int = 0
    turn_index: int = 0
    audit: list[Message] = field(default_factory=list)
    events: ClientEventBridge | None = None
    call_ids: set[str] = field(default_factory=set)
    tool_calls: int = 0
    finalizing: bool = False
    watch_handles: list[tuple[CancelToken, int]] = field(default_factory=list)
    deps: Any = None
    native_output: bool = False
    invalid_outputs: int = 0
    listener: Callable[[ev.Event], None] | None = None

    def __post_init__(self) -> None:
        self.boundary = self.base
        self.audit = self.transcript[self.base :]
        self.call_ids = {c.id for m in self.transcript for c in m.tool_calls}

    @property
    def cancelled(self) -> bool:
        """Whether any watched token fired."""
        return any(t.cancelled for t in self.tokens)

    def check_cancel(self) -> None:
        """A cancellation checkpoint."""
        for token in self.tokens:
            if token.cancelled:
                raise Cancelled()

    def append(self, message: Message) -> None:
        """Add a message of this run."""
        self.transcript.append(message)
        self.audit.append(message)

    def replace(self, messages: list[Message]) -> None:
        """Compaction committed ``messages``: they are history now, nothing is pending."""
        self.transcript = list(messages)
        self.base = self.boundary = len(self.transcript)

    def complete_turn(self) -> None:
        """Mark everything so far as a complete turn (a salvage point)."""
        self.boundary = len(self.transcript)

    @property
    def pending(self) -> list[Message]:
        """This run's messages."""
        return self.transcript[self.base :]


class ClientEventBridge:
    """Turns a wrapping client's reports (retry, fallback, switch) into events."""

    __slots__ = ("_bus", "_run")

    def __init__(self, run: Run[Any], bus: EventBus) -> None:
        self._run = run
        self._bus = bus

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
    return ModelRequest(
        messages=tuple(state.transcript),
        tools=state.specs,
        system=system,
        settings=settings,
        events=state.events,
        output=output,
        session_id=session_id,
    )


async def call_model(
    client: ModelClient,
    request: ModelRequest,
    state: RunState,
    observers: EventBus,
    stream: bool,
) -> ModelResponse:
    """One model call; every failure leaves as an ``AgentLoopError``."""
    state.check_cancel()
    started = time.perf_counter()
    try:
        if stream:
            response = await _consume_stream(client, request, state, observers)
        else:
            response = await client.complete(request)
    except ProviderError as error:
        _ensure_attempt_log(error, time.perf_counter() - started)
        raise
    except AgentLoopError:
        raise
    except Exception as exc:
        raise InternalError(
            f"model client raised {type(exc).__name__}: {redact_secrets(str(exc))}"
        ) from exc
    return _checked(response, client, state.call_ids)


async def _consume_stream(
    client: ModelClient, request: ModelRequest, state: RunState, bus: EventBus
) -> ModelResponse:
    def forward(event: StreamEvent) -> None:
        state.check_cancel()
        if bus.active:
            bus.emit(_forwarded(event, state.run.id, state.turn_index))

    response = await collect_stream(client, request, forward)
    state.check_cancel()
    return response


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
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    if response is None:
        raise ResponseInvalid(
            "the stream ended without its terminal event",
            provider=client.provider,
            phase=FailurePhase.BODY,
            request_sent=True,
        )
    return response


def _forwarded(event: StreamEvent, run_id: str, turn: int) -> ev.Event:
    """A provider stream event as the engine's event."""
    if event.kind == "text_delta":
        return ev.TextDelta(run_id, turn, event.text)
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


def _checked(response: object, client: ModelClient, seen: set[str]) -> ModelResponse:
    """Reject a reply that is not an assistant message; give every tool call a unique id."""
    if not isinstance(response, ModelResponse) or response.message.role != "assistant":
        raise ResponseInvalid(
            f"the model client returned {type(response).__name__}, not an assistant reply",
            provider=client.provider,
            phase=FailurePhase.BODY,
            request_sent=True,
            body=repr(response)[:8192],
        )
    calls = response.message.tool_calls
    ids = {c.id for c in calls}
    if calls and ("" in ids or len(ids) != len(calls) or not ids.isdisjoint(seen)):
        response = replace(response, message=_restamped(response.message, seen))
    seen.update(c.id for c in response.message.tool_calls)
    return response


def _restamped(message: Message, taken: set[str]) -> Message:
    seen = set(taken)
    parts = []
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            if not part.id or part.id in seen:
                part = ToolCallPart(f"call_{uuid.uuid4().hex[:12]}", part.name, part.arguments)
            seen.add(part.id)
        parts.append(part)
    return Message("assistant", tuple(parts))
