"""Agents as tools (SPEC 13): fresh conversations, soft child errors, cancel, usage, events."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from agentloop import Agent, Observer, RunConfig, tool
from agentloop import events as ev
from agentloop.errors import BudgetExhausted, Cancelled, ConfigurationError, ProviderUnavailable
from agentloop.messages import Message, ToolCallPart, Usage
from agentloop.model import ModelRequest, ModelResponse
from agentloop.safety import Budget, LoopDetection
from agentloop.testing import FunctionModel, ScriptedModel, call, reply
from agentloop.tools import Tool


class Answer(BaseModel):
    value: int


def tool_result(request: ModelRequest, index: int = 0) -> tuple[str, bool]:
    part = request.messages[-1].tool_results_parts[index]
    return part.content, part.is_error


async def test_the_childs_output_is_the_result_and_typed_output_is_json() -> None:
    child = Agent(ScriptedModel([call("final_result", {"value": 7})]), output_type=Answer)
    helper = child.as_tool(name="solver", description="Solves a problem.")
    assert helper.parameters["required"] == ["input"]
    parent_model = ScriptedModel([call("solver", {"input": "3+4"}), reply("it is 7")])
    run = await Agent(parent_model, tools=[helper]).run("what is 3+4?")
    assert run.output == "it is 7"
    assert tool_result(parent_model.requests[1]) == ('{"value":7}', False)


async def test_each_call_is_a_fresh_conversation() -> None:
    child_model = ScriptedModel([reply("a"), reply("b")])
    child = Agent(child_model)
    helper = child.as_tool(name="sub", description="Sub.")
    parent = ScriptedModel(
        [call("sub", {"input": "one"}), call("sub", {"input": "two"}), reply("x")]
    )
    await Agent(parent, tools=[helper]).run("go")
    assert [len(r.messages) for r in child_model.requests] == [1, 1]
    assert child.history == [] and child.runs == []


async def test_a_child_hard_error_is_the_parents_soft_error() -> None:
    child = Agent(ScriptedModel([ProviderUnavailable("upstream down", provider="p")]))
    parent_model = ScriptedModel([call("sub", {"input": "x"}), reply("recovered")])
    run = await Agent(parent_model, tools=[child.as_tool(name="sub", description="S.")]).run("go")
    assert run.output == "recovered"
    assert tool_result(parent_model.requests[1]) == (
        "agent 'sub' stopped: ProviderUnavailable: upstream down",
        True,
    )


async def test_parallel_calls_to_one_child_are_independent() -> None:
    async def answer(request: ModelRequest) -> object:
        await asyncio.sleep(0.01)
        return reply(f"echo {request.messages[0].text}")

    helper = Agent(FunctionModel(answer)).as_tool(name="sub", description="S.")
    parent_model = ScriptedModel(
        [[call("sub", {"input": "a"}), call("sub", {"input": "b"})], reply("done")]
    )
    parent = Agent(parent_model, tools=[helper], config=RunConfig(parallel_tool_calls=True))
    await parent.run("go")
    assert [tool_result(parent_model.requests[1], i)[0] for i in (0, 1)] == ["echo a", "echo b"]


async def test_a_parent_cancel_cancels_the_child() -> None:
    started = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait forever."""
        started.set()
        await asyncio.sleep(60)
        return "never"

    finished: list[ev.RunFinished] = []

    class Collect(Observer):
        def on_event(self, event: ev.Event) -> None:
            if isinstance(event, ev.RunFinished) and event.path:
                finished.append(event)

    child = Agent(ScriptedModel([call("wait"), reply("x")]), tools=[wait])
    parent = Agent(
        ScriptedModel([call("sub", {"input": "x"}), reply("y")]),
        tools=[child.as_tool(name="sub", description="S.")],
        observers=[Collect()],
    )
    task = asyncio.create_task(parent.run("go"))
    await started.wait()
    parent.cancel()
    with pytest.raises(Cancelled):
        await task
    assert isinstance(parent.runs[-1].stop_reason, Cancelled)
    [child_end] = finished
    assert isinstance(child_end.run.stop_reason, Cancelled)
    assert child_end.run.ended_at is not None


async def test_the_childs_usage_counts_in_the_parent_run_and_budget() -> None:
    child = Agent(ScriptedModel([reply("a", usage=Usage(100, 50))]))
    parent_model = ScriptedModel(
        [call("sub", {"input": "x"}, id="c1"), reply("done", usage=Usage(10, 5))]
    )
    parent = Agent(parent_model, tools=[child.as_tool(name="sub", description="S.")])
    run = await parent.run("go")
    assert run.usage == Usage(110, 55)

    tight = Agent(
        ScriptedModel([call("sub", {"input": "x"}), reply("never")]),
        tools=[
            Agent(ScriptedModel([reply("a", usage=Usage(100, 50))])).as_tool(
                name="sub", description="S."
            )
        ],
        config=RunConfig(budget=Budget(tokens=120)),
    )
    with pytest.raises(BudgetExhausted):
        await tight.run("go")


async def test_child_events_reach_the_parent_with_a_path() -> None:
    seen: list[ev.Event] = []

    class Collect(Observer):
        def on_event(self, event: ev.Event) -> None:
            seen.append(event)

    grandchild = Agent(ScriptedModel([reply("deep")]))
    child = Agent(
        ScriptedModel([call("inner", {"input": "x"}), reply("mid")]),
        tools=[grandchild.as_tool(name="inner", description="I.")],
    )
    parent = Agent(
        ScriptedModel([call("outer", {"input": "x"}), reply("top")]),
        tools=[child.as_tool(name="outer", description="O.")],
        observers=[Collect()],
    )
    async with parent.stream("go") as events:
        streamed = [e async for e in events]
    assert streamed == seen
    paths = {e.path for e in seen}
    assert paths == {(), ("outer",), ("outer", "inner")}
    deep = [e for e in seen if e.path == ("outer", "inner") and isinstance(e, ev.RunFinished)]
    assert deep[0].run.output == "deep"
    assert isinstance(streamed[-1], ev.RunFinished) and streamed[-1].path == ()


def test_as_tool_needs_a_name_and_a_description() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ConfigurationError):
        agent.as_tool(name="", description="x")
    with pytest.raises(ConfigurationError):
        agent.as_tool(name="x", description="")


async def test_a_bad_input_argument_is_the_usual_soft_validation_text() -> None:
    helper = Agent(ScriptedModel([])).as_tool(name="sub", description="S.")
    parent_model = ScriptedModel([call("sub", {"input": 3}), reply("ok")])
    await Agent(parent_model, tools=[helper]).run("go")
    assert tool_result(parent_model.requests[1]) == (
        "Invalid arguments for tool 'sub': input: Input should be a string",
        True,
    )


# -- children that stop: max turns, loops, the parent's budget -----------------------------------


def counter_tool() -> Tool:
    count = iter(range(1_000))

    @tool
    def tick() -> str:
        """A new number on every call (never a loop)."""
        return str(next(count))

    return tick


def asking(
    name: str, usage: Usage | None = None, id: str = "c0", **arguments: object
) -> ModelResponse:
    """A response that calls ``name`` (with ``usage``)."""
    message = Message("assistant", (ToolCallPart(id, name, arguments),))
    return ModelResponse(message, usage=usage or Usage(), stop_reason="tool_use")


def forever(name: str, usage: Usage | None = None) -> FunctionModel:
    """A model that calls ``name`` on every request."""
    return FunctionModel(lambda request: asking(name, usage, f"c{len(request.messages)}"))


async def test_a_child_past_its_max_turns_is_soft_and_the_parent_goes_on() -> None:
    child = Agent(forever("tick"), tools=[counter_tool()], config=RunConfig(max_turns=3))
    parent_model = ScriptedModel([call("sub", {"input": "count"}), reply("gave up on it")])
    run = await Agent(parent_model, tools=[child.as_tool(name="sub", description="S.")]).run("go")
    assert run.output == "gave up on it" and run.stop_reason is None
    assert tool_result(parent_model.requests[1]) == (
        "agent 'sub' stopped: MaxTurnsExceeded: Max turns exceeded: 3",
        True,
    )


async def test_a_looping_child_is_soft_and_its_loop_is_not_the_parents() -> None:
    @tool
    def same() -> str:
        """Always the same answer."""
        return "same"

    detection = RunConfig(loop_detection=LoopDetection(warn_threshold=2, stop_threshold=3))
    child = Agent(forever("same"), tools=[same], config=detection)
    parent_model = ScriptedModel(
        [call("sub", {"input": "a"}), call("sub", {"input": "b"}), reply("moved on")]
    )
    parent = Agent(parent_model, tools=[child.as_tool(name="sub", description="S.")])
    run = await parent.run("go")
    assert run.output == "moved on"
    stopped = "agent 'sub' stopped: LoopDetected: Loop detected: same({}) repeated 3 times"
    assert tool_result(parent_model.requests[1]) == (stopped, True)
    assert tool_result(parent_model.requests[2]) == (stopped, True)  # a fresh detector per call


async def test_a_child_cannot_spend_past_the_parents_budget() -> None:
    """The child stops with BudgetExhausted (soft for the parent's model, which never reads it:
    the spend is the parent's too, so the parent's next request is refused, a hard error)."""
    finished: list[ev.ToolCallFinished] = []

    class Collect(Observer):
        def on_event(self, event: ev.Event) -> None:
            if isinstance(event, ev.ToolCallFinished) and not event.path:
                finished.append(event)

    child_model = forever("tick", usage=Usage(40, 20))
    child = Agent(child_model, tools=[counter_tool()])  # no budget of its own
    parent_model = ScriptedModel([asking("sub", Usage(5, 5), input="work"), reply("never sent")])
    parent = Agent(
        parent_model,
        tools=[child.as_tool(name="sub", description="S.")],
        config=RunConfig(budget=Budget(tokens=100)),
        observers=[Collect()],
    )
    with pytest.raises(BudgetExhausted) as caught:
        await parent.run("go")
    # 10 (parent) + 60 + 60 (two child responses; the second crosses the line and completes)
    assert (caught.value.dimension, caught.value.spent, caught.value.limit) == ("tokens", 130, 100)
    assert len(child_model.requests) == 2 and len(parent_model.requests) == 1
    [result] = [e.result for e in finished]
    assert (result.content, result.is_error) == (
        "agent 'sub' stopped: BudgetExhausted: Budget exhausted: tokens spent 130 of 100",
        True,
    )
    assert parent.runs[-1].usage == Usage(85, 45)


async def test_a_childs_own_tighter_budget_stops_only_the_child() -> None:
    child = Agent(
        forever("tick", Usage(10, 10)),
        tools=[counter_tool()],
        config=RunConfig(budget=Budget(tokens=30)),
    )
    parent_model = ScriptedModel([call("sub", {"input": "x"}), reply("fine")])
    parent = Agent(
        parent_model,
        tools=[child.as_tool(name="sub", description="S.")],
        config=RunConfig(budget=Budget(tokens=1_000)),
    )
    run = await parent.run("go")
    assert run.output == "fine"
    assert tool_result(parent_model.requests[1]) == (
        "agent 'sub' stopped: BudgetExhausted: Budget exhausted: tokens spent 40 of 30",
        True,
    )
    assert run.usage == Usage(20, 20)


async def test_tool_calls_of_children_and_grandchildren_count_in_the_root() -> None:
    texts: dict[tuple[str, ...], str] = {}

    class Collect(Observer):
        def on_event(self, event: ev.Event) -> None:
            if isinstance(event, ev.ToolCallFinished):
                texts[event.path] = event.result.content

    grandchild = Agent(forever("tick"), tools=[counter_tool()])
    child = Agent(
        ScriptedModel([call("deep", {"input": "x"}), reply("unreached")]),
        tools=[grandchild.as_tool(name="deep", description="D.")],
    )
    parent_model = ScriptedModel([call("sub", {"input": "x"}), reply("done")])
    parent = Agent(
        parent_model,
        tools=[child.as_tool(name="sub", description="S.")],
        config=RunConfig(budget=Budget(tool_calls=4)),
        observers=[Collect()],
    )
    with pytest.raises(BudgetExhausted) as caught:
        await parent.run("go")
    # the root's call to sub, the child's to deep, then two ticks: the grandchild is refused,
    # then the child, then the root
    assert (caught.value.dimension, caught.value.spent) == ("tool_calls", 4)
    spent = "BudgetExhausted: Budget exhausted: tool_calls spent 4 of 4"
    assert texts == {
        ("sub", "deep"): "1",
        ("sub",): f"agent 'deep' stopped: {spent}",
        (): f"agent 'sub' stopped: {spent}",
    }


async def test_a_parent_already_past_its_line_refuses_the_childs_first_request() -> None:
    child_model = ScriptedModel([reply("never")])
    child = Agent(child_model)
    parent_model = ScriptedModel([asking("sub", Usage(60, 60), input="x"), reply("never")])
    parent = Agent(
        parent_model,
        tools=[child.as_tool(name="sub", description="S.")],
        config=RunConfig(budget=Budget(tokens=100)),
    )
    with pytest.raises(BudgetExhausted):
        await parent.run("go")
    assert child_model.requests == []
