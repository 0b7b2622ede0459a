"""``check_published``: a durable decide's check of a paused run's toolsets (SPEC 17 x 22).

Pure logic over a real agent and toolset: the run's deps reach the filter; a decide in a
process that cannot read the deps (``LookupError`` from the loader) leaves the judgement to the
worker, as before the check; a ``Deny`` loads nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Agent, Approve, Deny, RunContext, tool
from agentloop.engine.pause_tools import check_published
from agentloop.errors import InvalidInput
from agentloop.messages import ToolCallPart
from agentloop.model import ToolSpec
from agentloop.pausing import PendingCall
from agentloop.testing import ScriptedModel
from agentloop.toolsets import FunctionToolset


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return order


def offered(ctx: RunContext[Any], spec: ToolSpec) -> bool:
    return bool(ctx.deps and ctx.deps.get("refunds"))


AGENT = Agent(ScriptedModel([]), toolsets=[FunctionToolset([refund]).filtered(offered)])
PENDING = (PendingCall(ToolCallPart("c1", "refund", {"order": "A1"}), "approval"),)


async def test_the_runs_deps_decide_and_unreadable_deps_are_left_to_the_worker() -> None:
    loads: list[str] = []

    def loader(deps: Any) -> Any:
        async def load() -> Any:
            loads.append("loaded")
            if isinstance(deps, Exception):
                raise deps
            return deps

        return load

    with pytest.raises(InvalidInput, match="would run tool 'refund'"):
        await check_published(AGENT, PENDING, {"c1": Approve()}, loader({}), run_id="r", turn=0)
    await check_published(
        AGENT, PENDING, {"c1": Approve()}, loader({"refunds": True}), run_id="r", turn=0
    )
    await check_published(
        AGENT, PENDING, {"c1": Approve()}, loader(LookupError("r")), run_id="r", turn=0
    )
    loads.clear()
    await check_published(AGENT, PENDING, {"c1": Deny()}, loader({}), run_id="r", turn=0)
    assert loads == []  # nothing to judge: the deps are not read
