"""The durable pause tests' agent: one approval tool, one external tool, and the model's plan.

Shared by the DBOS and the Temporal pause tests (``refunds`` records each refund that ran), with
the DBOS tests' launch and their wait for a pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentloop import tool
from agentloop.model import ModelRequest
from agentloop.pausing import PendingCall
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


def fixing(request: ModelRequest) -> Any:
    """A model that first calls ``refund`` without its order, then fixes the call, then ends."""
    results = [p for m in request.messages if m.role == "tool" for p in m.tool_results_parts]
    if not results:
        return [call("refund", {}, id="c1")]
    if len(results) == 1:
        assert results[0].is_error
        return [call("refund", {"order": "A1"}, id="c2")]
    return " | ".join(p.content for p in results)


@contextlib.contextmanager
def dbos_launched(database: Path) -> Iterator[None]:
    """DBOS on a SQLite system database at ``database``, launched, destroyed on the way out."""
    from dbos import DBOS

    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": f"sqlite:///{database}",
            "log_level": "ERROR",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()
    try:
        yield
    finally:
        DBOS.destroy(destroy_registry=True)


async def dbos_paused(workflow_id: str) -> tuple[PendingCall, ...]:
    """The pending calls of a DBOS run, once it has paused (60 s at the most)."""
    from agentloop.durable.dbos import DBOSAgent

    deadline = time.monotonic() + 60
    while not (pending := DBOSAgent.pending(workflow_id)):
        assert time.monotonic() < deadline, "the run never paused"
        await asyncio.sleep(0.05)
    return pending
