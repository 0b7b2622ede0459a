"""The durable handoff tests' agents: a front desk that hands off to billing, whose refund waits.

Shared by the DBOS and the Temporal tests; ``seen`` counts each agent's model calls (a replay
that called a model again would show), ``refunds`` each refund that ran.
"""

from __future__ import annotations

from typing import Any

from agentloop import Agent, tool
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call

refunds: list[str] = []
seen = {"front": 0, "billing": 0}


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    refunds.append(order)
    return f"refunded {order}"


def front(request: ModelRequest) -> Any:
    seen["front"] += 1
    return [call("transfer_to_billing", {}, id="h1")]


def billing(request: ModelRequest) -> Any:
    seen["billing"] += 1
    done = [p for m in request.messages if m.role == "tool" for p in m.tool_results_parts]
    done = [p for p in done if p.name == "refund"]
    if not done:
        return [call("refund", {"order": "A1"}, id="c1")]
    return f"billing: {done[0].content}"


def agents(toolset: bool = False) -> Agent[str | None]:
    """A fresh front desk (the starting agent, without the tool) and its billing receiver.

    ``toolset``: the receiver has the tool through ``Agent(toolsets=...)`` (SPEC 22).
    """
    from agentloop.toolsets import FunctionToolset

    refunds.clear()
    seen.update(front=0, billing=0)
    if toolset:
        given: dict[str, Any] = {"toolsets": [FunctionToolset([refund], name="billing_tools")]}
    else:
        given = {"tools": [refund]}
    receiver = Agent(FunctionModel(billing), name="billing", **given)
    return Agent(FunctionModel(front), handoffs=[receiver])
