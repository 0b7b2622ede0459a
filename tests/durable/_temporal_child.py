"""A Temporal test's worker process: the ``heartbeat`` agent's worker until ``STOP`` exists.

``AGENT=approvals``: the ``approvals`` agent's instead, whose model asks for ``work("a")`` and
``refund("A1")`` (which needs approval) in one turn, then answers ``done: <what refund said>``.
``AGENT=replays``: the ``replays`` agent's, the ``heartbeat`` plan with priced replies, a
moderation check, an event log and a span file (``_replay_plan``).

Its tool ``work`` appends ``start KEY`` to ``EFFECTS``, SIGKILLs the process when ``KILL`` names
the key, then appends ``done KEY``. The worker touches ``READY`` once it polls. ``HEARTBEAT`` is
the agent's heartbeat timeout in seconds. Argument: the dev server's address.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client

from agentloop import Agent, tool
from agentloop.durable.temporal import TemporalAgent
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call

KEYS = ["a", "b"]


@tool
def work(key: str) -> str:
    """Do one unit of work with a side effect, in two halves."""
    effects = Path(os.environ["EFFECTS"])
    with effects.open("a") as out:
        out.write(f"start {key}\n")
    if os.environ.get("KILL") == key:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
    with effects.open("a") as out:
        out.write(f"done {key}\n")
    return f"did {key}"


def plan(request: ModelRequest) -> Any:
    """One ``work`` call a turn, in the order of ``KEYS``; then ``done``."""
    done = sum(1 for m in request.messages if m.role == "tool")
    return [call("work", {"key": KEYS[done]})] if done < len(KEYS) else "done"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first); ``KILL=refund`` dies after its effect."""
    with Path(os.environ["EFFECTS"]).open("a") as out:
        out.write(f"refund {order}\n")
    if os.environ.get("KILL") == "refund":
        os.kill(os.getpid(), signal.SIGKILL)
    return f"refunded {order}"


def refund_plan(request: ModelRequest) -> Any:
    """``work("a")`` and ``refund("A1")`` in one turn; then what the refund said."""
    results = [p for m in request.messages if m.role == "tool" for p in m.tool_results_parts]
    if not results:
        return [call("work", {"key": "a"}), call("refund", {"order": "A1"})]
    return "done: " + next(p.content for p in results if p.name == "refund")


def build_approvals() -> TemporalAgent[str | None]:
    heartbeat = timedelta(seconds=float(os.environ.get("HEARTBEAT", "30")))
    agent = Agent(FunctionModel(refund_plan), tools=[work, refund])
    return TemporalAgent(agent, name="approvals", heartbeat_timeout=heartbeat)


def build() -> TemporalAgent[str | None]:
    heartbeat = timedelta(seconds=float(os.environ.get("HEARTBEAT", "30")))
    agent = Agent(FunctionModel(plan), tools=[work])
    return TemporalAgent(agent, name="heartbeat", heartbeat_timeout=heartbeat)


def build_replays() -> TemporalAgent[str | None]:
    import _replay_plan
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from agentloop.guardrails import InputGuardrail
    from agentloop.otel import OtelObserver

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_replay_plan.SpanFile()))
    heartbeat = timedelta(seconds=float(os.environ.get("HEARTBEAT", "30")))
    agent = Agent(
        _replay_plan.Priced(FunctionModel(plan)),
        tools=[work],
        guardrails=[InputGuardrail(_replay_plan.moderation)],
        observers=[_replay_plan.Seen(), OtelObserver(provider.get_tracer("test"))],
    )
    return TemporalAgent(agent, name="replays", heartbeat_timeout=heartbeat)


BUILDS = {"approvals": build_approvals, "replays": build_replays}


async def main(address: str) -> None:
    durable = BUILDS.get(os.environ.get("AGENT", ""), build)()
    client = await Client.connect(address)
    async with durable.worker(client):
        await asyncio.to_thread(_ready_until_stopped)
    os._exit(0)


def _ready_until_stopped() -> None:
    Path(os.environ["READY"]).touch()
    while not Path(os.environ["STOP"]).exists():
        time.sleep(0.05)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
