"""``agent.stream()`` (SPEC 12): every event, the hard error after RunFinished, clean early exit."""

from __future__ import annotations

import asyncio

import pytest

from agentloop import Agent, CancelToken, Observer, RunConfig, ToolContext, tool
from agentloop import events as ev
from agentloop.errors import Cancelled, InvalidInput, ProviderUnavailable
from agentloop.testing import ScriptedModel, call, reply


@tool
async def slow(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "slept"


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


class Collect(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)


async def test_the_stream_yields_what_observers_see_and_ends_with_run_finished() -> None:
    seen = Collect()
    model = ScriptedModel([call("echo", {"text": "x"}), reply("done")])
    agent = Agent(model, tools=[echo], observers=[seen], config=RunConfig(stream=True))
    async with agent.stream("go") as events:
        streamed = [event async for event in events]
    assert streamed == seen.events  # the very same objects, in the same order
    assert isinstance(streamed[-1], ev.RunFinished)
    assert events.run.output == "done" and events.run is streamed[-1].run
    assert any(isinstance(e, ev.TextDelta) for e in streamed)


async def test_a_hard_error_is_raised_after_run_finished() -> None:
    agent = Agent(ScriptedModel([ProviderUnavailable("down", provider="p")]))
    got: list[ev.Event] = []
    with pytest.raises(ProviderUnavailable):
        async with agent.stream("go") as events:
            async for event in events:
                got.append(event)
    assert isinstance(got[-1], ev.RunFinished)
    assert isinstance(events.run.stop_reason, ProviderUnavailable)


async def test_leaving_early_cancels_the_run_and_leaks_no_task() -> None:
    before = asyncio.all_tasks()
    model = ScriptedModel([call("slow", {"seconds": 30}), reply("never")])
    agent = Agent(model, tools=[slow])
    async with agent.stream("go") as events:
        async for event in events:
            if isinstance(event, ev.ToolCallStarted):
                break
    assert isinstance(events.run.stop_reason, Cancelled)
    assert asyncio.all_tasks() == before
    assert agent.history == []
    again = Agent(ScriptedModel([reply("fine")]))
    assert (await again.run("x")).output == "fine"


async def test_the_agent_runs_again_after_an_early_exit() -> None:
    agent = Agent(ScriptedModel([reply("one"), reply("two")]))
    async with agent.stream("a"):
        pass
    assert isinstance(agent.runs[0].stop_reason, Cancelled) or agent.runs[0].output == "one"
    run = await agent.run("b")
    assert run.stop_reason is None


async def test_no_event_is_dropped_for_a_slow_consumer() -> None:
    seen = Collect()
    steps = [call("echo", {"text": str(i)}) for i in range(20)] + [reply("ok")]
    agent = Agent(ScriptedModel(steps), tools=[echo], observers=[seen])
    got = []
    async with agent.stream("go") as events:
        async for event in events:
            got.append(event)
            await asyncio.sleep(0.001)
    assert got == seen.events and len(got) > 100


async def test_a_busy_agent_refuses_a_second_stream_at_once() -> None:
    agent = Agent(ScriptedModel([call("slow", {"seconds": 0.2}), reply("ok")]), tools=[slow])
    async with agent.stream("first") as first:
        with pytest.raises(InvalidInput):
            async with agent.stream("second"):
                pass
        last = [e async for e in first][-1]
        assert isinstance(last, ev.RunFinished) and last.run.output == "ok"


async def test_a_cancel_token_ends_the_stream_with_cancelled() -> None:
    token = CancelToken()
    agent = Agent(ScriptedModel([call("slow", {"seconds": 30}), reply("never")]), tools=[slow])
    with pytest.raises(Cancelled):
        async with agent.stream("go", cancel=token) as events:
            async for event in events:
                if isinstance(event, ev.ToolCallStarted):
                    token.cancel()


async def test_cancelling_the_consumer_task_finalizes_the_run() -> None:
    agent = Agent(ScriptedModel([call("slow", {"seconds": 30}), reply("never")]), tools=[slow])
    started = asyncio.Event()

    async def consume() -> None:
        async with agent.stream("go") as events:
            async for event in events:
                if isinstance(event, ev.ToolCallStarted):
                    started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert isinstance(agent.runs[0].stop_reason, Cancelled)
    assert agent.runs[0].ended_at is not None


async def test_deps_reach_tools_through_the_stream() -> None:
    @tool
    def whoami(ctx: ToolContext[str]) -> str:
        """Who."""
        return ctx.deps

    agent = Agent(ScriptedModel([call("whoami"), reply("ok")]), tools=[whoami])
    async with agent.stream("go", deps="ann") as events:
        results = [e.result.content async for e in events if isinstance(e, ev.ToolCallFinished)]
    assert results == ["ann"]


def test_stream_rejects_non_text_input() -> None:
    with pytest.raises(InvalidInput):
        Agent(ScriptedModel([])).stream(42)  # type: ignore[arg-type]
