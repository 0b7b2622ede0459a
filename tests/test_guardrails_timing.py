"""Guardrails against the clock (SPEC 19), on looptime's fake loop time: never a real sleep.

Parallel input checks racing the first model call (both ``run()`` and ``stream()``: a parallel
check needs its checkpoint before tool dispatch when streaming too, openai-agents PR #2688),
timeouts, and the streaming holdback of output guardrails.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentloop import Agent, Message, ModelResponse, RunConfig, ToolCallPart, tool
from agentloop import events as ev
from agentloop.errors import GuardrailTripped, ProviderUnavailable
from agentloop.guardrails import DEFAULT_TIMEOUT, InputGuardrail, OutputGuardrail
from agentloop.model import ModelRequest, StreamEvent
from agentloop.observers import Observer
from agentloop.testing import FunctionModel, call, reply

pytestmark = [pytest.mark.looptime, pytest.mark.usefixtures("no_real_sleep")]

SECRET = "sk-proj-Zq8xK2mV9pL4tR7wY1nB5cD3"


def now() -> float:
    return asyncio.get_running_loop().time()


class Timed(Observer):
    """Every event with the loop time it was delivered at."""

    def __init__(self) -> None:
        self.events: list[tuple[float, ev.Event]] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append((now(), event))

    def kinds(self) -> list[str]:
        return [type(e).__name__ for _, e in self.events]

    def at(self, kind: type[Any]) -> list[float]:
        return [round(t, 3) for t, e in self.events if isinstance(e, kind)]


async def consume(agent: Agent[Any], prompt: str, streaming: bool) -> Any:
    """The run, through ``run()`` or through ``stream()`` (its hard error raised either way)."""
    if not streaming:
        return await agent.run(prompt)
    async with agent.stream(prompt) as events:
        async for _ in events:
            pass
    return events.run


def slow_check(delay: float, verdict: str | None) -> Any:
    async def check(ctx: Any, value: Any) -> str | None:
        await asyncio.sleep(delay)
        return verdict

    return check


# -- parallel input guardrails ---------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_parallel_trip_at_300ms_stops_the_tool_asked_for_at_50ms(streaming: bool) -> None:
    ran: list[float] = []
    asked: list[float] = []

    @tool
    async def act() -> str:
        """Act on the world."""
        ran.append(now())
        return "acted"

    async def answer(request: ModelRequest) -> Any:
        asked.append(now())
        await asyncio.sleep(0.05)
        return call("act") if len(asked) == 1 else reply("done")

    seen = Timed()
    guard = InputGuardrail(slow_check(0.3, "injection"), parallel=True, name="injection")
    agent = Agent(FunctionModel(answer), tools=[act], guardrails=[guard], observers=[seen])
    start = now()
    with pytest.raises(GuardrailTripped, match="'injection' tripped: injection"):
        await consume(agent, "go", streaming)
    assert ran == [] and asked == [start]  # asked at once, beside the check; the tool never ran
    assert round(now() - start, 3) == 0.3
    assert "ToolCallRequested" not in seen.kinds() and "ToolCallStarted" not in seen.kinds()
    assert agent.history == [] and agent.runs[-1].stop_reason is not None


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_parallel_trip_cancels_the_model_call_in_flight(streaming: bool) -> None:
    cancelled: list[float] = []

    async def answer(request: ModelRequest) -> Any:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(now())
            raise
        return reply("late")

    guard = InputGuardrail(slow_check(0.3, "no"), parallel=True)
    agent = Agent(FunctionModel(answer), guardrails=[guard])
    start = now()
    with pytest.raises(GuardrailTripped):
        await consume(agent, "go", streaming)
    assert [round(t - start, 3) for t in cancelled] == [0.3]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_slow_parallel_pass_leaves_the_run_unchanged(streaming: bool) -> None:
    ran: list[float] = []

    @tool
    async def act() -> str:
        """Act."""
        ran.append(now())
        return "acted"

    def build(guardrails: list[Any]) -> Agent[Any]:
        steps = iter([call("act"), reply("all done")])

        async def answer(request: ModelRequest) -> Any:
            await asyncio.sleep(0.05)
            return next(steps)

        return Agent(FunctionModel(answer), tools=[act], guardrails=guardrails)

    start = now()
    plain = await consume(build([]), "go", streaming)
    start = now()
    guarded = await consume(build([InputGuardrail(slow_check(1.0, None), parallel=True)]), "go",
                            streaming)  # fmt: skip
    assert guarded.output == plain.output == "all done"
    assert [t.text for t in guarded.turns] == [t.text for t in plain.turns]
    assert [m.to_dict() for m in guarded.messages][1:] == [m.to_dict() for m in plain.messages][1:]
    assert round(ran[-1] - start, 3) == 1.0  # the tool waited for the verdict, then ran
    assert round(now() - start, 3) == 1.05


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_run_does_not_end_before_a_parallel_check_passed(streaming: bool) -> None:
    async def answer(request: ModelRequest) -> Any:
        await asyncio.sleep(0.05)
        return reply("final")

    for verdict in (None, "tripped late"):
        guard = InputGuardrail(slow_check(0.3, verdict), parallel=True)
        agent = Agent(FunctionModel(answer), guardrails=[guard])
        start = now()
        if verdict is None:
            assert (await consume(agent, "go", streaming)).output == "final"
        else:
            with pytest.raises(GuardrailTripped, match="tripped late"):
                await consume(agent, "go", streaming)
            assert agent.history == [] and agent.runs[-1].output is None
        assert round(now() - start, 3) == 0.3


async def test_a_parallel_check_holds_the_first_replys_events_until_it_passed() -> None:
    steps: Any = None

    async def answer(request: ModelRequest) -> Any:
        await asyncio.sleep(0.05)
        return next(steps)

    @tool
    async def look() -> str:
        """Look."""
        return "it"

    for verdict in (None, "injection"):
        steps = iter([["Looking. ", call("look")], reply("found it")])
        guard = InputGuardrail(slow_check(0.3, verdict), parallel=True)
        agent = Agent(FunctionModel(answer), tools=[look], guardrails=[guard])
        start = now()
        got, outcome = await streamed(agent)
        said = [(round(t - start, 3), type(e).__name__) for t, e in got
                if isinstance(e, ev.TextDelta | ev.ToolCallDelta | ev.ModelResponded)]  # fmt: skip
        if verdict is None:
            assert outcome.output == "found it"
            # the first reply was ready at 0.05; it went out with the verdict, at 0.3
            first = said[: [k for _, k in said].index("ModelResponded") + 1]
            assert {t for t, _ in first} == {0.3}
            assert {k for _, k in first} == {"TextDelta", "ToolCallDelta", "ModelResponded"}
        else:
            assert isinstance(outcome, GuardrailTripped)
            assert said == [(0.3, "ModelResponded")]  # the reply's text and calls never went out
            responded = next(e for _, e in got if isinstance(e, ev.ModelResponded))
            assert responded.response.message.tool_calls == ()
            assert "Looking" not in repr(got)


@pytest.mark.parametrize("verdict", [None, "injection"])
async def test_a_parallel_verdict_reached_during_the_blocking_checks_is_used(
    verdict: str | None,
) -> None:
    asked: list[float] = []

    async def answer(request: ModelRequest) -> Any:
        asked.append(now())
        return reply("ok")

    guards = [
        InputGuardrail(slow_check(0.5, None), name="blocking"),
        InputGuardrail(slow_check(0.1, verdict), parallel=True, name="parallel"),
    ]
    agent = Agent(FunctionModel(answer), guardrails=guards)
    start = now()
    if verdict is None:
        assert (await agent.run("go")).output == "ok"
        assert [round(t - start, 3) for t in asked] == [0.5]
    else:  # the blocking check still runs to its end; the trip then stops the run unasked
        with pytest.raises(GuardrailTripped, match="'parallel'"):
            await agent.run("go")
        assert asked == []


async def test_a_model_failure_before_the_verdict_ends_the_run_and_stops_the_check() -> None:
    cancelled: list[bool] = []

    async def check(ctx: Any, value: Any) -> None:
        try:
            await asyncio.sleep(1)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def answer(request: ModelRequest) -> Any:
        await asyncio.sleep(0.05)
        raise ProviderUnavailable("down")

    agent = Agent(FunctionModel(answer), guardrails=[InputGuardrail(check, parallel=True)])
    with pytest.raises(ProviderUnavailable):
        await agent.run("go")
    assert cancelled == [True]


async def test_a_blocking_check_runs_before_the_first_request() -> None:
    asked: list[float] = []

    async def answer(request: ModelRequest) -> Any:
        asked.append(now())
        return reply("ok")

    start = now()
    guards = [InputGuardrail(slow_check(0.2, None)), InputGuardrail(slow_check(0.5, None),
                                                                    name="slower")]  # fmt: skip
    await Agent(FunctionModel(answer), guardrails=guards).run("go")
    assert [round(t - start, 3) for t in asked] == [0.5]  # both, concurrently, then the request


async def test_the_first_trip_cancels_the_other_checks() -> None:
    seen = Timed()
    guards = [InputGuardrail(slow_check(5, None), name="slow"),
              InputGuardrail(slow_check(0.1, "stop"), name="fast")]  # fmt: skip
    agent = Agent(FunctionModel(lambda r: reply("x")), guardrails=guards, observers=[seen])
    start = now()
    with pytest.raises(GuardrailTripped, match="'fast'"):
        await agent.run("go")
    assert round(now() - start, 3) == 0.1
    assert [e.guardrail for _, e in seen.events if isinstance(e, ev.GuardrailChecked)] == ["fast"]


# -- timeouts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "reason"),
    [(0.5, "the check timed out after 0.5s"), (30.0, "the check timed out after 30s")],
)
async def test_a_check_past_its_timeout_trips(seconds: float, reason: str) -> None:
    start = now()
    if seconds == DEFAULT_TIMEOUT:  # the default: 30 s
        guard = InputGuardrail(slow_check(100, None), name="hung")
    else:
        guard = InputGuardrail(slow_check(100, None), name="hung", timeout=seconds)
    with pytest.raises(GuardrailTripped) as caught:
        await Agent(FunctionModel(lambda r: reply("x")), guardrails=[guard]).run("go")
    assert caught.value.reason == reason and round(now() - start, 3) == seconds

    output = OutputGuardrail(slow_check(100, None), timeout=seconds, name="hung")
    with pytest.raises(GuardrailTripped, match="timed out"):
        await Agent(FunctionModel(lambda r: reply("x")), guardrails=[output]).run("go")


async def test_no_timeout_waits_for_the_check() -> None:
    guard = InputGuardrail(slow_check(100, None), timeout=None)
    start = now()
    run = await Agent(FunctionModel(lambda r: reply("x")), guardrails=[guard]).run("go")
    assert run.output == "x" and round(now() - start) == 100


# -- the streaming holdback ------------------------------------------------------------------


class Paced:
    """A streaming model whose events arrive at set loop times (``(delay, event)`` per reply)."""

    model = "paced"
    provider = "paced"

    def __init__(self, replies: list[list[tuple[float, StreamEvent]]]) -> None:
        self.replies = replies

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("streamed only")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        for delay, event in self.replies.pop(0):
            await asyncio.sleep(delay)
            yield event

    async def aclose(self) -> None:
        pass


def text(t: str) -> StreamEvent:
    return StreamEvent("text_delta", text=t)


def done(message: Message) -> StreamEvent:
    return StreamEvent("done", response=ModelResponse(message, stop_reason="end_turn"))


def answer_in_two_pieces(first: str, second: str) -> list[tuple[float, StreamEvent]]:
    """``first`` at 0.0, ``second`` at 0.1, the reply complete at 0.2."""
    return [(0, text(first)), (0.1, text(second)), (0.1, done(Message.assistant(first + second)))]


async def streamed(agent: Agent[Any]) -> tuple[list[tuple[float, ev.Event]], Any]:
    """The events as the consumer got them (with loop times) and the run or its error."""
    got: list[tuple[float, ev.Event]] = []
    try:
        async with agent.stream("go") as events:
            async for event in events:
                got.append((round(now(), 3), event))
    except GuardrailTripped as error:
        return got, error
    return got, events.run


def delivered(got: list[tuple[float, ev.Event]], kind: type[Any]) -> list[tuple[float, Any]]:
    return [(t, e) for t, e in got if isinstance(e, kind)]


async def test_without_output_guardrails_text_streams_at_once() -> None:
    model = Paced([answer_in_two_pieces("Hello, ", "world")])
    agent = Agent(model, guardrails=[InputGuardrail(lambda c, v: None)])
    got, run = await streamed(agent)
    assert [(t, e.text) for t, e in delivered(got, ev.TextDelta)] == [
        (0, "Hello, "),
        (0.1, "world"),
    ]
    assert run.output == "Hello, world"


async def test_the_answer_is_held_until_the_output_guardrail_passed() -> None:
    model = Paced([answer_in_two_pieces("Hello, ", "world")])
    agent = Agent(model, guardrails=[OutputGuardrail(slow_check(0.3, None), name="judge")])
    got, run = await streamed(agent)
    assert run.output == "Hello, world"
    # the reply was complete at 0.2 and judged by 0.5: nothing of its text went out before
    texts = delivered(got, ev.TextDelta) + delivered(got, ev.ModelResponded)
    assert {t for t, _ in texts} == {0.5}
    kinds = [type(e).__name__ for _, e in got]
    assert kinds == ["RunStarted", "TurnStarted", "TextDelta", "TextDelta", "ModelResponded",
                     "GuardrailChecked", "TurnFinished", "RunFinished"]  # fmt: skip


async def test_a_rejected_answer_is_never_released() -> None:
    model = Paced(
        [
            answer_in_two_pieces("The key is ", SECRET),
            answer_in_two_pieces("I will not ", "share it"),
        ]
    )

    def no_key(ctx: Any, value: Any) -> str | None:
        return "quotes a key" if "sk-" in value else None

    agent = Agent(model, guardrails=[OutputGuardrail(no_key, retry=True)])
    got, run = await streamed(agent)
    assert run.output == "I will not share it"
    assert SECRET not in repr(got) and "The key is" not in repr(got)
    assert [e.text for _, e in delivered(got, ev.TextDelta)] == ["I will not ", "share it"]
    first = delivered(got, ev.ModelResponded)[0][1]
    assert first.response.text == "[answer withheld: rejected by guardrail 'no_key']"
    rejected = delivered(got, ev.GuardrailChecked)[0][1]
    assert (rejected.tripped, rejected.soft, rejected.reason) == (True, True, "quotes a key")


async def test_a_tripped_answer_is_never_released() -> None:
    model = Paced([answer_in_two_pieces("The key is ", SECRET)])
    agent = Agent(model, guardrails=[OutputGuardrail(lambda c, v: "no", name="strict")])
    got, error = await streamed(agent)
    assert isinstance(error, GuardrailTripped)
    assert delivered(got, ev.TextDelta) == [] and SECRET not in repr(got)
    assert [type(e).__name__ for _, e in got][-2:] == ["GuardrailChecked", "RunFinished"]


async def test_a_reply_that_calls_a_tool_is_released_when_the_call_streams_in() -> None:
    calling = Message.assistant("Let me look. ", [ToolCallPart("c1", "look", {})])
    model = Paced(
        [
            [
                (0, text("Let me look. ")),
                (0.1, StreamEvent("tool_call_delta", index=0, call_id="c1", name="look")),
                (0.1, StreamEvent("tool_call_delta", index=0, arguments="{}")),
                (0.1, done(calling)),
            ],
            answer_in_two_pieces("Found ", "it"),
        ]
    )

    @tool
    async def look() -> str:
        """Look."""
        return "it"

    agent = Agent(model, tools=[look], guardrails=[OutputGuardrail(lambda c, v: None)])
    got, run = await streamed(agent)
    assert run.output == "Found it"
    # known not to be the answer at 0.1 (a tool call), so held only until then
    assert [(t, e.text) for t, e in delivered(got, ev.TextDelta)] == [
        (0.1, "Let me look. "),
        (0.5, "Found "),
        (0.5, "it"),
    ]
    order = [type(e).__name__ for _, e in got]
    assert order.index("ModelResponded") < order.index("ToolCallRequested")


async def test_a_stream_that_fails_never_releases_its_text() -> None:
    async def broken() -> AsyncIterator[StreamEvent]:
        yield text(f"half an answer {SECRET}")
        raise ProviderUnavailable("connection reset")

    class Breaking(Paced):
        async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
            async for event in broken():
                yield event

    agent = Agent(Breaking([]), guardrails=[OutputGuardrail(lambda c, v: None)])
    got: list[ev.Event] = []
    with pytest.raises(ProviderUnavailable):
        async with agent.stream("go") as events:
            async for event in events:
                got.append(event)
    assert SECRET not in repr(got) and type(got[-1]).__name__ == "RunFinished"


async def test_a_typed_answer_streams_its_final_result_only_after_it_passed() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        city: str

    def call_events(index: int, call_id: str, name: str, arguments: str) -> list[Any]:
        return [
            (0, StreamEvent("tool_call_delta", index=index, call_id=call_id, name=name)),
            (0.1, StreamEvent("tool_call_delta", index=index, arguments=arguments)),
        ]

    def both(city: str) -> list[tuple[float, StreamEvent]]:
        message = Message.assistant(
            "", [ToolCallPart("n", "note", {}), ToolCallPart("f", "final_result", {"city": city})]
        )
        return [
            *call_events(0, "n", "note", "{}"),
            *call_events(1, "f", "final_result", f'{{"city": "{city}"}}'),
            (0, StreamEvent("done", response=ModelResponse(message, stop_reason="tool_use"))),
        ]

    @tool
    async def note() -> str:
        """Note."""
        return "noted"

    def not_atlantis(ctx: Any, value: Any) -> str | None:
        return "made up" if value.city == "Atlantis" else None

    model = Paced([both("Atlantis"), both("Paris")])
    agent = Agent(model, tools=[note], output_type=Answer,
                  guardrails=[OutputGuardrail(not_atlantis, retry=True)])  # fmt: skip
    got, run = await streamed(agent)
    assert run.output == Answer(city="Paris")
    arguments = "".join(e.arguments_delta for _, e in delivered(got, ev.ToolCallDelta))
    assert "Atlantis" not in arguments and "Atlantis" not in repr(got)
    assert arguments.count("{}") == 2 and "Paris" in arguments  # the note's, twice; the answer
    assert "Atlantis" not in repr(run.messages)


async def test_a_passing_guardrail_changes_no_event_but_adds_its_own() -> None:
    @tool
    async def look() -> str:
        """Look."""
        return "it"

    def build(guardrails: list[Any]) -> Agent[Any]:
        steps = iter([call("look"), reply("the answer is it")])
        model = FunctionModel(lambda request: next(steps))
        return Agent(model, tools=[look], guardrails=guardrails, config=RunConfig(stream=True))

    plain, _ = await streamed(build([]))
    guarded, _ = await streamed(build([OutputGuardrail(lambda c, v: None)]))
    kinds = [type(e).__name__ for _, e in guarded if not isinstance(e, ev.GuardrailChecked)]
    assert kinds == [type(e).__name__ for _, e in plain]
    texts = [e.text for _, e in guarded if isinstance(e, ev.TextDelta)]
    assert "".join(texts) == "the answer is it"
