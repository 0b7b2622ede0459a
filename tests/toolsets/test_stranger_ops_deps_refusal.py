"""An approval a filter refuses for want of the run's deps says so, and names ``deps=``.

Found by building an ops service from the docs alone: ``purge_queue`` (approval required) sits
in a toolset filtered by the caller's role. An on-call caller's run paused on it; the operator's
``continue_run(decisions=...)`` without ``deps=`` was refused with "the agent continuing the run
does not have" the tool, and the fixes it named were all about tools and toolsets, though the
agent had the tool: the filter, run with ``deps=None``, hid it. The refusal now says that the
toolsets were resolved with the continuation's deps and names ``continue_run(deps=...)``; a tool
that no toolset has at all reads as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from agentloop import Agent, Approve, RunContext
from agentloop.errors import InvalidInput
from agentloop.model import ToolSpec
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import FunctionToolset


@dataclass
class Caller:
    role: str


def _agent(ran: list[str]) -> Agent[Any]:
    ops = FunctionToolset(name="ops")

    @ops.tool(requires_approval=True)
    def purge_queue(queue: str) -> str:
        """Irreversibly delete every message on a queue."""
        ran.append(queue)
        return f"purged {queue}"

    def oncall_only(ctx: RunContext[Any], spec: ToolSpec) -> bool:
        return spec.name != "purge_queue" or getattr(ctx.deps, "role", None) == "oncall"

    model = ScriptedModel([call("purge_queue", {"queue": "orders"}, id="c1"), reply("Purged.")])
    return Agent(model, toolsets=[ops.filtered(oncall_only)])


def test_a_filter_that_needs_the_runs_deps_names_deps() -> None:
    ran: list[str] = []
    agent = _agent(ran)
    assert agent.run_sync("purge orders", deps=Caller("oncall")).paused
    with pytest.raises(InvalidInput) as refused:
        agent.continue_run_sync(decisions={"c1": Approve()})  # deps forgotten
    text = str(refused.value)
    assert "would run tool 'purge_queue'" in text and "stays paused" in text
    assert "resolved for the paused turn with the continuation's deps=None" in text
    assert "continue_run(deps=...)" in text
    assert ran == [] and agent.runs[-1].paused  # nothing recorded, still paused
    with pytest.raises(InvalidInput, match="deps of type Caller"):
        agent.continue_run_sync(decisions={"c1": Approve()}, deps=Caller("viewer"))
    run = agent.continue_run_sync(decisions={"c1": Approve()}, deps=Caller("oncall"))
    assert run.output == "Purged." and ran == ["orders"]


def test_a_tool_no_toolset_has_reads_as_before() -> None:
    ran: list[str] = []
    agent = _agent(ran)
    assert agent.run_sync("purge orders", deps=Caller("oncall")).paused
    empty = FunctionToolset(name="ops")
    with agent.override(toolsets=[empty]), pytest.raises(InvalidInput) as refused:
        agent.continue_run_sync(decisions={"c1": Approve()}, deps=Caller("oncall"))
    text = str(refused.value)
    assert "which the agent continuing the run does not have: nothing was recorded" in text
    assert "deps" not in text.split("nothing was recorded")[0]
