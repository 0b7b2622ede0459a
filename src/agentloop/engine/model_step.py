"""A run's model step: the request, the call, the reply checked and recorded as a turn.

``RunLoop`` (``agentloop.engine.loop``) takes these steps from ``ModelStep``, the run's state
(``RunState``) with the step's methods and no slot of its own: the loop awaits the common
model call itself (no guardrails, not streamed), one coroutine fewer a turn, and
``_model_step`` for the others (a guardrail's race, a stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloop import events as ev
from agentloop._provider_parts import NO_CALLS
from agentloop.engine.estimate import estimated_usage
from agentloop.engine.provider_tools import continued, emit_provider_events
from agentloop.engine.state import RunState
from agentloop.engine.turn import (
    ClientEventBridge,
    bridge,
    build_request,
    call_model,
    checked_reply,
    dropped,
    governor_waits,
    model_failed,
)
from agentloop.errors import ContextLengthExceeded
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, Usage
from agentloop.model import ModelRequest, ModelResponse
from agentloop.run import _NO_USAGE, Turn

if TYPE_CHECKING:
    from agentloop.clock import Clock
    from agentloop.config import RunConfig
    from agentloop.engine.conversation import Conversation
    from agentloop.engine.guarding import RunGuard

__all__ = ["ModelStep"]


class ModelStep(RunState):
    """The model step of ``RunLoop``: what it reads of the loop, and the step's methods.

    The loop is the run's state itself (one object a run holds across its model calls, not
    two): the step reads the state's fields on ``self``. ``latency``: the last model call's,
    in seconds (its turn's ``latency_seconds``).
    """

    __slots__ = ()

    session: Conversation[Any]
    latency: float | None
    config: RunConfig
    clock: Clock
    output: Any
    guarding: RunGuard | None
    quiet: bool
    """The run's client never reads ``request.events`` (``engine.turn.reports``)."""
    own: dict[str, Any]
    started: float

    def _plain_request(self) -> ModelRequest | None:
        """A turn's checkpoints, then the common model call's request (None: ``_model_call``).

        The common call (nothing to offer, the context ready, no guardrails, not streamed) is
        awaited by ``drive`` itself: one coroutine fewer between the caller and the provider.
        ``check_cancel``, ``ready``'s quiet path and ``_request`` are written out (calls fewer).
        """
        if self.tokens:  # ``check_cancel``: no token, nothing to check
            self.check_cancel()
        session, index = self.session, self.turn_index
        limits = session.safety  # ``before_request``, called when it has a line to check
        if index >= limits.max_turns or not limits.budget_on or limits._gate is not None:
            limits.before_request(self.run, index)
        quiet = self._tokens + self._overhead <= self._quiet and not self._force  # (``ready``)
        if (
            self.guarding is not None
            or self.config.stream
            or self.stream
            or self.own["_toolsets"].toolsets  # ``_offering``, written out (a call a turn)
            or self.plan is not None
            or self.appendonly is not None
            or self.run.last_agent is not None
            or not ((quiet and self._count and not self._pending) or self.ready())
        ):
            return None  # (``_model_call``)
        bus, client, offer = session._bus, self.client, self.offer
        bus.turn = index
        events = self.events
        if events is None and (bus.active or not self.quiet):  # else nobody reads it
            events = bridge(self, bus, session.safety)
        if bus.active:
            bus.emit(
                ev.TurnStarted(self.run.id, index, model=client.model, provider=client.provider)
            )
        output = self.output
        spec = output.spec if offer.native_output and output is not None else None
        if self.shown is None:  # ``_request``'s common request, written out
            request = ModelRequest(
                tuple(self.transcript), offer.specs, self.system, self.settings, None,
                events, spec, session.id, None, offer.provider_tools,
            )  # fmt: skip
        else:
            request = build_request(self, self.system, self.settings, spec, session.id)
        self.started = session._dispatcher.monotonic()
        if bus.active and self.tokens:  # a listener told ``TurnStarted`` may have cancelled
            self.check_cancel()
        return request

    async def _model_step(self) -> ModelResponse | None:
        """One model call; None when a context rejection sends the turn back for compaction."""
        config = self.config
        client, request = self.client, self._request()
        started = self.session._dispatcher.monotonic()  # ``clock.monotonic``, without its call
        if not (config.stream or self.stream):  # guarded: ``race`` awaits this coroutine
            self.check_cancel()
            try:
                reply = await client.complete(request)
            except Exception as exc:
                self._failed(exc, started)
                return None
            return self._responded(request, reply, started)
        try:
            response = await call_model(
                client, request, self, self.session._bus, True, self.clock, self.output, started
            )
        except ContextLengthExceeded as error:
            self.salvage(error, self.turn_index, len(self.sent()))
            return None
        return self._responded(request, response, started, True)

    def _failed(self, exc: Exception, started: float) -> None:
        """A model call raised ``exc``: what it ends in is raised (``model_failed``).

        A context rejection is salvaged instead: the turn goes back for compaction.
        """
        try:
            model_failed(exc, self.client, self, self.clock, started)
        except ContextLengthExceeded as error:
            self.salvage(error, self.turn_index, len(self.sent()))

    def _responded(
        self, request: ModelRequest, reply: object, started: float, checked: bool = False
    ) -> ModelResponse:
        """A reply checked (unless ``checked``), its latency, spend and events.

        What every model call does after it; ``replied``'s steps written out, without its call.
        """
        session = self.session
        bus = limits = session._bus  # (the session's dispatcher: its bus and its limits)
        self.latency = session._dispatcher.monotonic() - started
        if checked:  # a streamed reply, checked as it was collected (``call_model``)
            response: ModelResponse = reply  # type: ignore[assignment]
        else:
            response = checked_reply(reply, self.client, self, self.clock)
            if response.thinking_dropped and bus.active:
                bus.emit(dropped(response, self))
        usage = response.usage
        if not (usage.input_tokens or usage.output_tokens) and limits.budget.counts_tokens():
            usage = estimated_usage(self.config.token_counter, self, request, response)
        if limits._gate is None and limits._begun and limits.budget_on:  # ``spent``, written out:
            output = usage.output_tokens  # no line, counted in the gate's numbers (no call)
            limits._tokens += usage.input_tokens + output
            limits._output_tokens += output
        else:
            limits.spent(usage, response.model or self.client.model)
        if self.plan is not None and self.plan.native:  # what the provider's search loaded
            self.plan.searched(response.message)
        if self.settings.tool_choice_once:
            self.release_tool_choice()
        if bus.active:
            if self.offer.provider_tools:
                emit_provider_events(bus.emit, self.run.id, self.turn_index, response.message)
            bus.emit(ev.ModelResponded(self.run.id, self.turn_index, response))
        return response

    def _request(self) -> ModelRequest:
        """The next model call's request, its ``TurnStarted`` told (what a guardrail holds)."""
        output = self.output
        bus, client = self.session._bus, self.client
        bus.turn = self.turn_index
        events = self.events
        if events is None and (bus.active or not self.quiet):  # else nobody reads it
            events = bridge(self, bus, self.session.safety)
        if bus.active:
            bus.emit(
                ev.TurnStarted(
                    self.run.id, self.turn_index, model=client.model, provider=client.provider
                )
            )
        if self.guarding is not None:
            self.guarding.hold()
        spec = output.spec if self.offer.native_output and output is not None else None
        offer = self.offer
        if self.appendonly is None and self.shown is None:  # ``build_request``, written out
            return ModelRequest(  # for the common request: the transcript, the tools offered
                tuple(self.transcript), offer.specs, self.system, self.settings, None,
                events, spec, self.session.id, None, offer.provider_tools,
            )  # fmt: skip
        return build_request(self, self.system, self.settings, spec, self.session.id)

    def _record(self, response: ModelResponse) -> Turn:
        events, waits = self.events, None
        if type(events) is ClientEventBridge and events.waits:  # a governor waited (SPEC 25)
            waits = governor_waits(events)
        message, usage, run = response.message, response.usage, self.run
        parts, thinking = message.parts, ""
        kind = type(parts[0]) if len(parts) == 1 else None
        if kind is TextPart:  # a reply of one text: ``Message.text`` and no call, unread
            calls: tuple[ToolCallPart, ...] = ()
            text = parts[0].text  # type: ignore[union-attr]
        elif kind is ToolCallPart:  # one call: its parts are its calls (``tool_calls``), no text
            calls, text = parts, ""  # type: ignore[assignment]
        else:
            calls = message.tool_calls
            text = message.text
            for part in parts:  # ``_thinking_text``'s look, without its call for a reply
                if type(part) is ThinkingPart:  # without reasoning
                    thinking = _thinking_text(message)
                    break
        turn = Turn(  # positional, as keywords cost ~0.7 us to match: index, model, tool_calls,
            # tool_results, usage, stop_reason, text, thinking, latency_seconds, durations,
            # warnings, agent (set when the turn is done), batch
            self.turn_index, response.model or self.client.model, list(calls), [], usage,
            response.stop_reason, text, thinking, self.latency, None, waits, None,
            self.config.batch,
        )  # fmt: skip
        run.turns.append(turn)
        total = run.usage  # a run's first usage is its sum (``_NO_USAGE + usage``, unmade)
        if total is _NO_USAGE and type(usage) is Usage and usage.provider_tool_calls is NO_CALLS:
            run.usage = usage
        else:
            run.usage = total + usage
        if message.parts and (calls or text or continued(response)):
            self.append(message)
        return turn


def _thinking_text(message: Message) -> str:
    """The readable reasoning of a reply that has some."""
    return "".join(p.text for p in message.parts if type(p) is ThinkingPart)
