"""Every call the model made ends in exactly one ``ToolCallFinished`` or stays pending (SPEC 12).

And a reply that came whole still streams its parts' deltas in its order (reasoning first).
Through the public API: the events of ``agent.stream()`` and of an observer.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import Agent, Block, Hook, Observer, RunConfig, ToolContext, ToolError, tool
from agentloop.errors import AgentLoopError, Cancelled, LoopDetected, ToolLimitReached
from agentloop.events import (
    Event,
    ModelResponded,
    TextDelta,
    ThinkingDelta,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
)
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart
from agentloop.model import INVALID_JSON_KEY, ModelRequest, ModelResponse, StreamEvent
from agentloop.safety.loops import LoopDetection
from agentloop.safety.recovery import Fail, FailureAnalysis, RecoveryAction, Retry, ToolFailure
from agentloop.testing import FunctionModel, ScriptedModel, call, reply
from agentloop.transcript import INTERRUPTED_TEXT

pytestmark = pytest.mark.usefixtures("no_real_sleep")


class Events(Observer):
    """Every event, in order."""

    def __init__(self) -> None:
        self.seen: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.seen.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.seen if isinstance(e, kind)]


def check_every_call_ends(events: Sequence[Event]) -> dict[str, list[ToolCallFinished]]:
    """The invariant; returns each call's ``ToolCallFinished`` events by call id.

    Every call a reply held is requested once; every ``ToolCallStarted`` is followed by exactly
    one ``ToolCallFinished`` of the same attempt, and a ``ToolCallFinished`` never comes without
    its ``ToolCallStarted``; every requested call ends (nothing is pending in these runs).
    """
    made = [c.id for e in events if isinstance(e, ModelResponded) for c in e.response.tool_calls]
    requested = [e.call.id for e in events if isinstance(e, ToolCallRequested)]
    assert Counter(requested) == Counter(made), "each call the replies held is requested once"
    open_attempts: dict[str, int] = {}
    finished: dict[str, list[ToolCallFinished]] = {}
    for event in events:
        if isinstance(event, ToolCallStarted):
            assert event.call.id not in open_attempts, f"started twice: {event}"
            open_attempts[event.call.id] = event.attempt
        elif isinstance(event, ToolCallFinished):
            assert open_attempts.pop(event.call.id, None) == event.attempt, f"unpaired: {event}"
            finished.setdefault(event.call.id, []).append(event)
    assert open_attempts == {}, f"started, never finished: {open_attempts}"
    assert set(finished) == set(requested), f"requested, never finished: {requested}"
    return finished


# -- the tools of the property ----------------------------------------------------------------


@tool
def good(x: int = 0) -> str:
    """Fine."""
    return f"good {x}"


@tool
def soft() -> str:
    """A soft failure of its own."""
    raise ToolError("soft failure")


@tool
def guarded() -> str:
    """Always vetoed by the hook below."""
    return "never"


@tool
async def stopper(ctx: ToolContext[Agent[Any]]) -> str:
    """Cancels its own run, then waits: the cancel cuts it in flight."""
    ctx.deps.cancel()
    await asyncio.Event().wait()
    return "never"


class VetoGuarded(Hook):
    async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> Block | None:
        return Block("no guarded calls") if call.name == "guarded" else None


KINDS: dict[str, Callable[[int], ToolCallPart]] = {
    "good": lambda i: ToolCallPart(f"c{i}", "good", {"x": i}),
    "unknown": lambda i: ToolCallPart(f"c{i}", "nope", {"x": i}),
    "bad_args": lambda i: ToolCallPart(f"c{i}", "good", {"x": "not a number"}),
    "vetoed": lambda i: ToolCallPart(f"c{i}", "guarded", {}),
    "soft": lambda i: ToolCallPart(f"c{i}", "soft", {}),
    "cut": lambda i: ToolCallPart(f"c{i}", "good", {INVALID_JSON_KEY: '{"x": 1'}),
    "cancel": lambda i: ToolCallPart(f"c{i}", "stopper", {}),
}


def turn_of(kinds: Sequence[str], first: int) -> ModelResponse:
    calls = tuple(KINDS[k](first + n) for n, k in enumerate(kinds))
    stop = "length" if "cut" in kinds else "tool_use"
    return ModelResponse(Message("assistant", calls), stop_reason=stop)


def script_of(turns: Sequence[Sequence[str]]) -> list[Any]:
    steps: list[Any] = []
    for index, kinds in enumerate(turns):
        steps.append(turn_of(kinds, 10 * index))
    steps.append(reply("done"))
    return steps


@settings(max_examples=60, deadline=None)
@given(
    turns=st.lists(
        st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=4), min_size=1, max_size=4
    ),
    parallel=st.booleans(),
    loop_stop=st.sampled_from([10, 2]),
)
def test_every_call_gets_exactly_one_finished_whatever_the_mix(
    turns: list[list[str]], parallel: bool, loop_stop: int
) -> None:
    watch = Events()
    config = RunConfig(
        parallel_tool_calls=parallel,
        loop_detection=LoopDetection(warn_threshold=1, stop_threshold=loop_stop),
    )
    agent = Agent(
        ScriptedModel(script_of(turns)),
        tools=[good, soft, guarded, stopper],
        hooks=[VetoGuarded()],
        observers=[watch],
        config=config,
    )
    try:
        agent.run_sync("go", deps=agent)
    except AgentLoopError as error:
        assert isinstance(error, Cancelled | LoopDetected), error
    finished = check_every_call_ends(watch.seen)
    # the default recovery makes one attempt per call: one ToolCallFinished each
    assert all(len(events) == 1 for events in finished.values())
    for events in finished.values():
        [event] = events
        name = event.call.name
        if name in ("nope", "guarded", "soft") or INVALID_JSON_KEY in event.call.arguments:
            assert event.result.is_error
        if event.result.content == INTERRUPTED_TEXT:
            assert agent.current_run is not None
            assert isinstance(agent.current_run.stop_reason, Cancelled | LoopDetected)


# -- each case, through agent.stream() --------------------------------------------------------


async def streamed(agent: Agent[Any], text: str = "go", **kwargs: Any) -> list[Event]:
    seen: list[Event] = []
    async with agent.stream(text, **kwargs) as events:
        try:
            async for event in events:
                seen.append(event)
        except AgentLoopError:
            pass
    return seen


def finished_of(events: Sequence[Event]) -> dict[str, str]:
    """Each call's one result text, the invariant checked."""
    return {i: f[0].result.content for i, f in check_every_call_ends(events).items()}


async def test_an_unknown_tool_call_streams_its_start_and_its_soft_error() -> None:
    agent = Agent(ScriptedModel([call("nope", id="c1"), reply("ok")]), tools=[good])
    events = await streamed(agent)
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.result.is_error and finished.attempt == 0 and finished.duration == 0.0
    assert finished_of(events) == {"c1": "tool 'nope' is not available"}


async def test_the_docs_observer_sees_the_unknown_calls_soft_error() -> None:
    watch = Events()
    await Agent(ScriptedModel([call("nope"), reply("ok")]), observers=[watch]).run("go")
    texts = [e.result.content for e in watch.of(ToolCallFinished) if e.result.is_error]
    assert texts == ["tool 'nope' is not available"]


async def test_a_call_cut_at_the_output_limit_ends_with_its_soft_error() -> None:
    cut = ToolCallPart("c1", "good", {INVALID_JSON_KEY: '{"x": '})
    whole = ToolCallPart("c2", "good", {"x": 2})
    first = ModelResponse(Message("assistant", (whole, cut)), stop_reason="length")
    events = await streamed(Agent(ScriptedModel([first, reply("ok")]), tools=[good]))
    assert finished_of(events) == {
        "c2": "good 2",
        "c1": "tool call 'good' was cut off at the output token limit and did not run; "
        "make it smaller",
    }


async def test_a_breaker_refusal_ends_with_its_soft_error() -> None:
    @tool
    def sick() -> str:
        """Always panics."""
        raise RuntimeError("down")

    steps = [call("sick", id=f"c{i}") for i in range(4)] + [reply("ok")]
    events = await streamed(Agent(ScriptedModel(steps), tools=[sick]))
    results = finished_of(events)
    assert results["c3"] == "tool temporarily unavailable: circuit breaker open"


async def test_a_loop_refusal_of_an_unknown_name_ends_with_the_refusal_text() -> None:
    config = RunConfig(loop_detection=LoopDetection(warn_threshold=1, stop_threshold=2))
    steps = [call("nope", id=f"c{i}") for i in range(3)] + [reply("ok")]
    agent = Agent(ScriptedModel(steps), tools=[good], config=config)
    events = await streamed(agent)
    results = finished_of(events)
    assert results["c2"].startswith("dispatch refused before execution: ")
    assert isinstance(agent.current_run.stop_reason if agent.current_run else None, LoopDetected)


async def test_a_cancel_ends_the_call_in_flight_and_those_never_reached() -> None:
    agent = Agent(
        ScriptedModel([[call("stopper", id="c1"), call("good", id="c2")], reply("ok")]),
        tools=[good, stopper],
    )
    events = await streamed(agent, deps=agent)
    assert finished_of(events) == {"c1": INTERRUPTED_TEXT, "c2": INTERRUPTED_TEXT}
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert all(e.result.is_error for e in finished)
    # the events say what finalize recorded for the cut turn
    run = agent.current_run
    assert run is not None and isinstance(run.stop_reason, Cancelled)
    assert [r.content for r in run.messages[-1].tool_results_parts] == [INTERRUPTED_TEXT] * 2


async def test_a_hard_error_before_the_calls_ran_ends_them_all() -> None:
    config = RunConfig(max_tool_calls_per_turn=1)
    agent = Agent(
        ScriptedModel([[call("good", id="c1"), call("good", id="c2")]]),
        tools=[good],
        config=config,
    )
    events = await streamed(agent)
    assert finished_of(events) == {"c1": INTERRUPTED_TEXT, "c2": INTERRUPTED_TEXT}
    assert agent.current_run is not None
    assert isinstance(agent.current_run.stop_reason, ToolLimitReached)


async def test_each_recovery_attempt_is_started_and_finished_once() -> None:
    class Twice:
        async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
            return FailureAnalysis(is_recoverable=failure.attempt < 2)

    class RetryRecoverable:
        def decide(
            self, analysis: FailureAnalysis, attempt: int, max_attempts: int
        ) -> RecoveryAction:
            return Retry() if analysis.is_recoverable else Fail()

    config = RunConfig(reflector=Twice(), recovery=RetryRecoverable())
    agent = Agent(ScriptedModel([call("soft", id="c1"), reply("ok")]), tools=[soft], config=config)
    events = await streamed(agent)
    [attempts] = check_every_call_ends(events).values()
    assert [e.attempt for e in attempts] == [0, 1, 2]


async def test_a_pending_call_stays_pending() -> None:
    @tool(requires_approval=True)
    def refund() -> str:
        """Needs a person."""
        return "refunded"

    agent = Agent(
        ScriptedModel([call("refund", id="c1")]),
        tools=[refund],
        config=RunConfig(headless=False),
    )
    events = await streamed(agent)
    assert not [e for e in events if isinstance(e, ToolCallFinished)]
    assert agent.current_run is not None and agent.current_run.paused


# -- a reply that came whole streams its parts in order ---------------------------------------


class Whole:
    """A model client that does not stream: its ``stream`` is the whole reply as ``done``."""

    def __init__(self, fn: Callable[[ModelRequest], ModelResponse]) -> None:
        self.inner = FunctionModel(fn)
        self.model, self.provider = "whole", "whole"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield StreamEvent("done", response=await self.inner.complete(request))

    async def aclose(self) -> None:
        await self.inner.aclose()


def thoughtful(request: ModelRequest) -> ModelResponse:
    parts = (ThinkingPart("first"), TextPart("one"), ThinkingPart("then"), TextPart("two"))
    return ModelResponse(Message("assistant", parts), stop_reason="end_turn")


@pytest.mark.parametrize("make", [lambda: Whole(thoughtful), lambda: FunctionModel(thoughtful)])
async def test_a_reply_that_came_whole_streams_reasoning_before_its_text(
    make: Callable[[], Any],
) -> None:
    events = await streamed(Agent(make()))
    deltas = [
        (type(e).__name__, e.text) for e in events if isinstance(e, TextDelta | ThinkingDelta)
    ]
    assert deltas == [
        ("ThinkingDelta", "first"),
        ("TextDelta", "one"),
        ("ThinkingDelta", "then"),
        ("TextDelta", "two"),
    ]
    kinds = [type(e) for e in events]
    assert kinds.index(TextDelta) < kinds.index(ModelResponded)


async def test_a_streamed_reply_is_not_replayed() -> None:
    events = await streamed(Agent(ScriptedModel([reply("hello there, a long text")])))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "hello there, a long text"
