"""A second process for tests/test_otel_seams.py: continue a paused run from SQLite, traced.

Usage: ``_otel_continue.py DB SESSION_ID``. It approves call ``c1``, then prints one JSON line
per finished span (name, attributes, trace id, links) and the count of spans left open.
``_otel_continue.py DB SESSION_ID crash``: run a task whose second tool call kills the process
(exit 3) after the first turn committed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from agentloop import Agent, Approve, handoff, tool
from agentloop.otel import OtelObserver
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, reply


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool
def step(n: int) -> str:
    """A step of work; the second one dies with the process."""
    if n == 2:
        os._exit(3)
    return f"step {n} done"


async def crash(db: str, session_id: str) -> None:
    """Run two tool turns on ``session_id``; the process dies in the second."""
    from agentloop.testing import call

    model = ScriptedModel([call("step", {"n": 1}), call("step", {"n": 2})])
    agent = Agent(model, tools=[step], store=SQLiteStore(db), session_id=session_id)
    await agent.run("two steps")


class Tally(SpanProcessor):
    """Every span started and ended in this process."""

    def __init__(self) -> None:
        self.open: set[int] = set()
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.open.add(span.context.span_id)

    def on_end(self, span: ReadableSpan) -> None:
        self.open.discard(span.context.span_id if span.context else 0)
        self.ended.append(span)


def shown(span: ReadableSpan) -> dict[str, Any]:
    """What the parent checks of a span."""
    return {
        "name": span.name,
        "attributes": {
            k: v if isinstance(v, str | bool | int) else list(v)  # type: ignore[arg-type]
            for k, v in (span.attributes or {}).items()
        },
        "trace_id": span.context.trace_id if span.context else 0,
        "links": len(span.links),
    }


async def main(db: str, session_id: str) -> None:
    tally = Tally()
    provider = TracerProvider()
    provider.add_span_processor(tally)
    observer = OtelObserver(provider.get_tracer("child"))
    billing = Agent(ScriptedModel([reply("refunded")]), name="billing", tools=[refund])
    agent = Agent.resume(
        session_id,
        store=SQLiteStore(db),
        client=ScriptedModel([]),
        handoffs=[handoff(billing)],
        observers=[observer],
    )
    run = await agent.continue_run(decisions={"c1": Approve()})
    assert run.output == "refunded", run.output
    for span in tally.ended:
        print(json.dumps(shown(span)))
    print(json.dumps({"open": len(tally.open)}))


if __name__ == "__main__":
    if sys.argv[3:] == ["crash"]:
        asyncio.run(crash(sys.argv[1], sys.argv[2]))
    else:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
