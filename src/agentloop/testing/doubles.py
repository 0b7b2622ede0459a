"""Test doubles that implement the same ``ModelClient`` protocol the real providers do.

``ScriptedModel`` plays a list of steps, one per request: ``reply(text)``, ``call(name, args)``
(a list of calls is one turn), an exception instance to raise, or a callable
``request -> step``. ``FunctionModel(fn)`` computes every reply. Both stream too: the reply's
reasoning and text in its order (text in small deltas), then its calls and the terminal
``done``. ``FakeClock`` is a ``Clock`` that moves only when told (``advance``) or slept on, so
a test never waits for real time.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import field, replace
from json.encoder import encode_basestring_ascii as _json_string
from typing import Any, TypeAlias

from agentloop._util.slots import record
from agentloop.clock import Clock
from agentloop.errors import InternalError
from agentloop.messages import Message, Part, TextPart, ThinkingPart, ToolCallPart, Usage
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.observers import EVENTS, Observer
from agentloop.testing.fake_script import FakeScript, load_fake_script
from agentloop.testing.fake_server import FakeProviderServer, FakeReply, FakeToolCall, Fault

__all__ = [
    "FakeClock",
    "FakeProviderServer",
    "FakeReply",
    "FakeScript",
    "FakeToolCall",
    "Fault",
    "FunctionModel",
    "RecordingObserver",
    "ScriptExhausted",
    "ScriptedCall",
    "ScriptedModel",
    "Step",
    "call",
    "load_fake_script",
    "reply",
]


class FakeClock(Clock):
    """A ``Clock`` that moves only when told: ``advance(seconds)``, or ``await sleep(seconds)``.

    Wall time starts at ``time`` and the monotonic clock at ``monotonic``; both move together.
    ``sleep`` advances the clock by the delay and yields to the event loop once, without
    waiting; ``sleeps`` lists every delay asked for, in order. ``new_id`` counts: the first id is
    ``00000000000000000000000000000001`` (32 hex digits, like the system clock's).
    """

    __slots__ = ("_elapsed", "_ids", "_monotonic", "_time", "sleeps")

    def __init__(self, *, time: float = 1_700_000_000.0, monotonic: float = 1_000.0) -> None:
        self._time = time
        self._monotonic = monotonic
        self._elapsed = 0.0
        self._ids = itertools.count(1)
        self.sleeps: list[float] = []

    def time(self) -> float:
        """Wall-clock seconds: the start value plus every advance."""
        return self._time + self._elapsed

    def monotonic(self) -> float:
        """Monotonic seconds: the start value plus every advance."""
        return self._monotonic + self._elapsed

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds`` (finite, not negative)."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"a clock moves forward by a finite amount, not {seconds!r}")
        self._elapsed += seconds

    async def sleep(self, seconds: float) -> None:
        """Record the delay, advance by it (a delay <= 0 is none) and yield once; no real wait."""
        self.sleeps.append(seconds)
        if seconds > 0:
            self.advance(seconds)
        await asyncio.sleep(0)

    def new_id(self) -> str:
        """The next id of a counter, as 32 hex digits."""
        return f"{next(self._ids):032x}"


class ScriptExhausted(InternalError):
    """A ``ScriptedModel`` received more requests than it has steps."""


@record
class ScriptedCall:
    """A tool call to emit; ``id=None`` gets a fresh unique id when emitted."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


Step: TypeAlias = Any
"""A ModelResponse, a ScriptedCall, a list of calls (and texts), an exception, or a callable."""


def reply(text: str, *, usage: Usage | None = None, stop_reason: str = "end_turn") -> ModelResponse:
    """A terminal text reply."""
    return ModelResponse(Message.assistant(text), usage=usage or Usage(), stop_reason=stop_reason)


def call(name: str, args: Mapping[str, Any] | None = None, id: str | None = None) -> ScriptedCall:
    """A tool call step (ids are unique per emitted call unless given)."""
    return ScriptedCall(name, dict(args or {}), id)


class _Base:
    """Shared emission logic: steps to responses, complete and stream."""

    def __init__(self, model: str, provider: str) -> None:
        self._model = model
        self._provider = provider
        self.requests: list[ModelRequest] = []
        self._ids = itertools.count(1)
        self.closed = False

    @property
    def model(self) -> str:
        """The model name responses report."""
        return self._model

    @property
    def provider(self) -> str:
        """The provider name."""
        return self._provider

    def check_provider_tools(self, tools: Sequence[Any], functions: bool) -> None:
        """A test double takes every provider tool: its script plays their parts (SPEC 24)."""

    async def _step_for(self, request: ModelRequest) -> Step:
        raise NotImplementedError

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Record the request and answer with the next step."""
        self.requests.append(request)
        step = await self._step_for(request)
        while callable(step) and not isinstance(step, type):
            step = step(request)
            if inspect.isawaitable(step):
                step = await step
        return self._response(step)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The same answer as ``complete``, streamed: its parts in their order, then the calls.

        Reasoning (a ``ThinkingPart``'s text) as one ``thinking_delta``, text in deltas of 8
        characters, each where the reply holds it.
        """
        response = await self.complete(request)
        for part in response.message.parts:
            if isinstance(part, ThinkingPart):
                if part.text:
                    yield StreamEvent("thinking_delta", text=part.text)
                continue
            text = part.text if isinstance(part, TextPart) else ""
            for start in range(0, len(text), 8):
                yield StreamEvent("text_delta", text=text[start : start + 8])
        for index, part in enumerate(response.tool_calls):
            arguments = _arguments_json(part.arguments)
            yield StreamEvent("tool_call_delta", index=index, call_id=part.id, name=part.name)
            for start in range(0, len(arguments), 8):
                yield StreamEvent(
                    "tool_call_delta", index=index, arguments=arguments[start : start + 8]
                )
        yield StreamEvent("done", response=response)

    async def aclose(self) -> None:
        """Nothing to release."""
        self.closed = True

    def _response(self, step: Step) -> ModelResponse:
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ModelResponse):
            return step if step.model else replace(step, model=self._model)
        if isinstance(step, ScriptedCall | ToolCallPart | str):
            step = [step]
        if isinstance(step, Sequence):
            parts = [self._part(item) for item in step]
            message = Message("assistant", tuple(parts))
            stop = "tool_use" if message.tool_calls else "end_turn"
            return ModelResponse(message, model=self._model, stop_reason=stop)
        raise TypeError(f"not a scripted step: {step!r}")

    def _part(self, item: Any) -> Part:
        if isinstance(item, str):
            return TextPart(item)
        if isinstance(item, ToolCallPart):
            return item
        if isinstance(item, ScriptedCall):
            call_id = item.id or f"call_{next(self._ids)}"
            return ToolCallPart(call_id, item.name, dict(item.arguments))
        raise TypeError(f"not a scripted step item: {item!r}")


def _arguments_json(arguments: Mapping[str, Any]) -> str:
    """``json.dumps(dict(arguments))``, the same text.

    A mapping of strings to strings is written directly: ``json.dumps`` makes an encoder per call
    (1.6 us against 0.4 for one key).
    """
    pairs = []
    for key, value in arguments.items():
        if type(key) is not str or type(value) is not str:
            return json.dumps(dict(arguments))
        pairs.append(f"{_json_string(key)}: {_json_string(value)}")
    return "{" + ", ".join(pairs) + "}"


class ScriptedModel(_Base):
    """Answers request N with step N; ``.requests`` records every request."""

    def __init__(self, steps: Iterable[Step], model: str = "scripted") -> None:
        super().__init__(model, "scripted")
        self.steps = list(steps)
        self._next = 0

    async def _step_for(self, request: ModelRequest) -> Step:
        if self._next >= len(self.steps):
            last = request.messages[-1] if request.messages else None
            raise ScriptExhausted(
                f"ScriptedModel has {len(self.steps)} step{'s' * (len(self.steps) != 1)} but "
                f"received request #{len(self.requests)} (last message: {_describe(last)})"
            )
        step = self.steps[self._next]
        self._next += 1
        return step

    @property
    def remaining(self) -> int:
        """Steps not yet played."""
        return len(self.steps) - self._next


class FunctionModel(_Base):
    """Answers every request with ``fn(request)`` (sync or async), interpreted as a step."""

    def __init__(self, fn: Callable[[ModelRequest], Any], model: str = "function") -> None:
        super().__init__(model, "function")
        self.fn = fn

    async def _step_for(self, request: ModelRequest) -> Step:
        step = self.fn(request)
        if inspect.isawaitable(step):
            step = await step
        return step


def _describe(message: Message | None) -> str:
    if message is None:
        return "none"
    text = message.text or ", ".join(p.__class__.__name__ for p in message.parts)
    return f"{message.role}: {text[:80]!r}"


class RecordingObserver(Observer):
    """An observer that records every event as ``(name, args)`` in ``events``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, tuple[Any, ...]]] = []

    def names(self) -> list[str]:
        """Event names in order."""
        return [name for name, _ in self.events]

    def of(self, event: str) -> list[tuple[Any, ...]]:
        """The argument tuples of one event."""
        return [args for name, args in self.events if name == event]


def _recording(event: str) -> Callable[..., None]:
    def record(self: RecordingObserver, *args: Any) -> None:
        self.events.append((event, args))

    record.__name__ = event
    return record


for _event in EVENTS:
    setattr(RecordingObserver, _event, _recording(_event))
