"""``as_tool(timeout=None)`` (SPEC 13, 3): an agent tool's own timeout, not the parent's.

None is no tool timeout: the child's own ``RunConfig`` limits govern, so the parent's
``RunConfig.tool_timeout`` never cuts a child that is still working. A number is the tool's own
timeout, which cancels the child and reads the timeout text of SPEC 3. A plain tool's None still
means the parent's ``tool_timeout``. Time is looptime's fake loop time: nothing sleeps.
"""

from __future__ import annotations

import asyncio

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.errors import Cancelled, ConfigurationError
from agentloop.model import ModelRequest
from agentloop.testing import RecordingObserver, ScriptedModel, call, reply


@tool
async def research(topic: str) -> str:
    """Take five seconds to research a topic."""
    await asyncio.sleep(5)
    return f"notes on {topic}"


def child() -> Agent[str | None]:
    model = ScriptedModel([call("research", {"topic": "tides"}), reply("tides: notes")])
    return Agent(model, tools=[research])


def results(request: ModelRequest) -> list[tuple[str, bool]]:
    return [(p.content, p.is_error) for p in request.messages[-1].tool_results_parts]


@pytest.mark.looptime
async def test_none_is_no_tool_timeout_while_a_plain_tool_keeps_the_parents() -> None:
    helper = child().as_tool(name="researcher", description="Researches a topic.")
    assert helper.timeout == 0  # a Tool's own "no timeout"
    model = ScriptedModel(
        [call("researcher", {"input": "tides"}), call("research", {"topic": "x"}), reply("ok")]
    )
    parent = Agent(model, tools=[helper, research], config=RunConfig(tool_timeout=1))
    run = await parent.run("go")
    assert run.output == "ok"
    assert results(model.requests[1]) == [("tides: notes", False)]  # 5 s > the parent's 1 s
    assert results(model.requests[2]) == [("Tool 'research' timed out after 1s", True)]


@pytest.mark.looptime
async def test_a_number_is_the_tools_own_timeout_and_cancels_the_child() -> None:
    seen = RecordingObserver()
    inner = ScriptedModel([call("research", {"topic": "tides"}), reply("tides: notes")])
    helper = Agent(inner, tools=[research], observers=[seen]).as_tool(
        name="researcher", description="Researches.", timeout=2
    )
    model = ScriptedModel([call("researcher", {"input": "tides"}), reply("gave up")])
    run = await Agent(model, tools=[helper], config=RunConfig(tool_timeout=60)).run("go")
    assert run.output == "gave up"
    assert results(model.requests[1]) == [("Tool 'researcher' timed out after 2s", True)]
    ((ended,),) = seen.of("on_run_end")
    assert isinstance(ended.stop_reason, Cancelled) and len(inner.requests) == 1


@pytest.mark.looptime
async def test_the_childs_own_tool_timeout_governs_inside_it() -> None:
    inner = ScriptedModel([call("research", {"topic": "tides"}), reply("no notes")])
    slow_child = Agent(inner, tools=[research], config=RunConfig(tool_timeout=3))
    helper = slow_child.as_tool(name="researcher", description="Researches.")
    model = ScriptedModel([call("researcher", {"input": "tides"}), reply("ok")])
    await Agent(model, tools=[helper], config=RunConfig(tool_timeout=1)).run("go")
    assert results(inner.requests[1]) == [("Tool 'research' timed out after 3s", True)]
    assert results(model.requests[1]) == [("no notes", False)]


@pytest.mark.parametrize("bad", [-1, float("nan"), "10", True])
def test_a_bad_timeout_is_a_configuration_error(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="timeout") as info:
        child().as_tool(name="r", description="R.", timeout=bad)  # type: ignore[arg-type]
    assert info.value.field == "timeout"
