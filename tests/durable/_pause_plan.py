"""The durable pause tests' agent: one approval tool, one external tool, and the model's plan.

Shared by the DBOS and the Temporal pause tests (``refunds`` records each refund that ran).
"""

from __future__ import annotations

from typing import Any

from agentloop import tool
from agentloop.model import ModelRequest
from agentloop.testing import call

refunds: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    refunds.append(order)
    return f"refunded {order}"


@tool(external=True)
def ask_customer(question: str) -> str:
    """Ask the customer (answered outside the agent)."""
    raise AssertionError("an external tool is never run by the agent")


def plan(request: ModelRequest) -> Any:
    results = [p for m in request.messages if m.role == "tool" for p in m.tool_results_parts]
    if not results:
        return [
            call("refund", {"order": "A1"}, id="c1"),
            call("ask_customer", {"question": "why?"}, id="c2"),
        ]
    return "; ".join(f"{p.name}: {p.content}" for p in results)
