"""A replay test's child process: ``_plan``'s run as a DBOS workflow, observed and traced.

``run ID`` runs it (``KILL`` says where the process SIGKILLs itself); ``recover ID`` launches
DBOS, which recovers the killed run, and prints its output. Events go to ``EVENTS``, spans to
``SPANS`` (``_replay_plan``); the system database is ``DBOS_URL``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _plan
import _replay_plan
from dbos import DBOS
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agentloop import Agent
from agentloop.durable.dbos import DBOSAgent, DBOSRun
from agentloop.guardrails import InputGuardrail
from agentloop.otel import OtelObserver
from agentloop.testing import FunctionModel


async def main(mode: str, workflow_id: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_replay_plan.SpanFile()))
    observers = [_replay_plan.Seen(), OtelObserver(provider.get_tracer("test"))]
    agent = Agent(
        _replay_plan.Priced(FunctionModel(_plan.plan_step)),
        tools=[_plan.work],
        guardrails=[InputGuardrail(_replay_plan.moderation)],
        observers=observers,
    )
    durable = DBOSAgent(agent, name="replays")
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": os.environ["DBOS_URL"],
            "log_level": "WARNING",
            "executor_id": "local",
            "application_version": "tests",
        }
    )
    DBOS.launch()
    try:
        if mode == "run":
            run = await durable.run("go", workflow_id=workflow_id)
        else:
            run = await DBOSRun[str | None](workflow_id).result(poll_seconds=0.05)
        print(run.output, run.usage.input_tokens, flush=True)
    finally:
        os._exit(0)  # DBOS.destroy() joins its queue threads for a second: nothing to keep here


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
