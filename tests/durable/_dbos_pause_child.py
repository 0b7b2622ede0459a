"""A DBOS pausing test's child process: a run that pauses on an approval, as a DBOS workflow.

The model asks for ``work("a")`` and ``refund("A1")`` (which needs approval) in one turn, then
answers ``done: <what refund said>``. Modes: ``run ID`` enqueues the run (this process, a worker,
takes it) and prints its output (``KILL=paused``: SIGKILL itself once the run is paused);
``recover ID``: launch DBOS, which recovers the run, and print its output when it ends;
``decide ID``: an enqueue-only process approves the run's refund once it is paused (or finds it
decided) and prints ``decided``. Kill points: ``KILL=refund``: the approved refund writes its
side effect, then the process dies before it returns; ``KILL=fork``: the decider dies inside the
decision workflow, after recording the decision, before enqueueing the continuation;
``KILL=decided``: the worker dies right after the continuation recorded the decision it took
(before the refund starts). ``DBOS_URL``, ``EXECUTOR``, ``EFFECTS`` as in ``_dbos_child.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from dbos import DBOS

import agentloop.durable._dbos_pause
import agentloop.durable.dbos
from agentloop import Agent, Approve, tool
from agentloop.durable.dbos import DBOSAgent, DBOSRun
from agentloop.errors import InvalidInput
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call


def _effect(line: str) -> None:
    with Path(os.environ["EFFECTS"]).open("a") as out:
        out.write(line + "\n")


@tool
def work(key: str) -> str:
    """Do one unit of work."""
    _effect(f"work {key}")
    return f"did {key}"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    _effect(f"refund {order}")
    if os.environ.get("KILL") == "refund":
        os.kill(os.getpid(), signal.SIGKILL)
    return f"refunded {order}"


def plan(request: ModelRequest) -> Any:
    """Both calls in one turn; then what the refund call said."""
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        return [call("work", {"key": "a"}), call("refund", {"order": "A1"})]
    said = [p.content for m in results for p in m.tool_results_parts if p.name == "refund"]
    return f"done: {said[0]}"


def build() -> DBOSAgent[str | None]:
    return DBOSAgent(Agent(FunctionModel(plan), tools=[work, refund]), name="pause")


def _kill_points() -> None:
    """``KILL=fork`` and ``KILL=decided`` (test-only hooks: one of ours, one in DBOS's commit)."""
    if os.environ.get("KILL") == "fork":
        forked = agentloop.durable._dbos_pause.fork_continuation

        def dying(*args: Any) -> Any:
            os.kill(os.getpid(), signal.SIGKILL)
            return forked(*args)

        agentloop.durable.dbos.fork_continuation = dying  # type: ignore[attr-defined,assignment]
    if os.environ.get("KILL") == "decided":
        from dbos._sys_db import SystemDatabase

        record = SystemDatabase._record_operation_result_txn

        def killing(self: Any, result: Any, *args: Any, **kwargs: Any) -> None:
            record(self, result, *args, **kwargs)
            continued = "/continued/" in str(result.get("workflow_uuid"))
            if result.get("function_name") == "pause.decided" and continued:
                os.kill(os.getpid(), signal.SIGKILL)  # before the transaction commits

        SystemDatabase._record_operation_result_txn = killing  # type: ignore[method-assign]


def launch(executor: str, *, enqueue_only: bool = False) -> None:
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": os.environ["DBOS_URL"],
            "sys_db_pool_size": 4,
            "log_level": "WARNING",
            "executor_id": executor,
            "application_version": "tests",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    if enqueue_only:
        DBOSAgent.enqueue_only()
    DBOS.launch()


def _die_once_paused(workflow_id: str) -> None:
    while not DBOSAgent.pending(workflow_id):
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)


def decide(workflow_id: str) -> None:
    """Approve the run's refund once it is paused; a decision already recorded will do."""
    build()
    launch(os.environ.get("EXECUTOR", "decider"), enqueue_only=True)
    try:
        while not (pending := DBOSAgent.pending(workflow_id)):
            if DBOS.get_workflow_status(f"{workflow_id}/decided/1") is not None:
                break  # decided by this executor before it died: its launch finishes it
            time.sleep(0.05)
        else:
            DBOSAgent.decide(workflow_id, {pending[0].id: Approve()})
        while DBOS.get_workflow_status(f"{workflow_id}/continued/1") is None:
            time.sleep(0.05)
        print("decided", flush=True)
    except InvalidInput as exc:
        print(exc, flush=True)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(0)


async def main(mode: str, workflow_id: str) -> None:
    durable = build()
    launch(os.environ.get("EXECUTOR", "worker"))
    try:
        if mode == "run":
            durable.enqueue("refund A1", workflow_id=workflow_id)  # this worker takes it
            if os.environ.get("KILL") == "paused":
                await asyncio.to_thread(_die_once_paused, workflow_id)
        run = await DBOSRun[str | None](workflow_id).result(poll_seconds=0.05)
        print(run.output, flush=True)
    finally:
        os._exit(0)


if __name__ == "__main__":
    _kill_points()
    if sys.argv[1] == "decide":
        decide(sys.argv[2])
    asyncio.run(main(sys.argv[1], sys.argv[2]))
