"""Agents as tools (SPEC 13): fresh conversations, soft child errors, cancel, usage, events."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from agentloop import Agent, Observer, RunConfig, tool
from agentloop import events as ev
from agentloop.errors import BudgetExhausted, Cancelled, ConfigurationError, ProviderUnavailable
from agentloop.messages import Usage
from agentloop.model import ModelRequest
from agentloop.safety import Budget
from agentloop.testing import FunctionModel, ScriptedModel, call, reply


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
