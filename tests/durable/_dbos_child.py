"""A DBOS test's child process: the plan of ``_plan.py`` as a DBOS workflow.

``run ID``: run it (``KILL`` says where the process SIGKILLs itself). ``recover ID``: launch
DBOS, which recovers the killed run, and print its result. ``worker``: launch and drain the
queue until the ``STOP`` file exists. ``enqueue N``: enqueue N runs and exit, as a web server
does. The system database is ``DBOS_URL``; ``EXECUTOR`` the executor id; ``SLOW`` seconds each
tool call takes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _plan
from dbos import DBOS

from agentloop import Agent, RunConfig, ToolContext, tool
from agentloop.durable.dbos import DBOSAgent, DBOSRun
from agentloop.testing import FunctionModel


@tool
async def work(ctx: ToolContext, key: str) -> str:
    """Do one unit of work with a side effect (a line naming the run and the key)."""
    _plan.kill_point(f"tool:{key}")
    await asyncio.sleep(float(os.environ.get("SLOW", "0")))  # a tool that takes its time
    with _plan.effects_file().open("a") as out:
        out.write(f"{ctx.run_id} {key}\n")
    return f"did {key}"


def _kill_in_commits() -> None:
    """Kill points inside DBOS's own step commits (its private API: a test-only hook).

    ``model-commit:N``: inside the transaction that records the N-th model step (rolled back:
    the model is asked again on recovery). ``tool-commit:N``: right after the N-th tool step's
    row is committed (the tool never runs again).
    """
    from dbos._sys_db import SystemDatabase

    txn = SystemDatabase._record_operation_result_txn
    record = SystemDatabase.record_operation_result

    def killing_txn(self: Any, result: Any, *args: Any, **kwargs: Any) -> None:
        txn(self, result, *args, **kwargs)
        if str(result.get("function_name", "")).endswith(".model"):
            _plan.kill_point("model-commit")

    def killing_record(self: Any, result: Any, **kwargs: Any) -> None:
        record(self, result, **kwargs)
        if ".tool." in str(result.get("function_name", "")):
            _plan.kill_point("tool-commit")

    SystemDatabase._record_operation_result_txn = killing_txn  # type: ignore[method-assign]
    SystemDatabase.record_operation_result = killing_record  # type: ignore[method-assign]


def build() -> DBOSAgent[str | None]:
    config = RunConfig(stream=os.environ.get("STREAM") == "1")
    agent = Agent(FunctionModel(_plan.plan_step), tools=[work], config=config)
    return DBOSAgent(agent, name="plan")


def launch(*, enqueue_only: bool = False) -> None:
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": os.environ["DBOS_URL"],
            "sys_db_pool_size": 4,
            "log_level": "WARNING",
            "executor_id": os.environ.get("EXECUTOR", "local"),
            "application_version": "tests",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    if enqueue_only:
        DBOSAgent.enqueue_only()
    DBOS.launch()


async def main(mode: str, workflow_id: str) -> None:
    if os.environ.get("KILL", "").startswith(("model-commit", "tool-commit")):
        _kill_in_commits()
    durable = build()
    launch()
    try:
        if mode == "run":
            run = await durable.run("go", workflow_id=workflow_id)
        else:
            run = await DBOSRun[str | None](workflow_id).result(poll_seconds=0.05)
        status = await DBOS.get_workflow_status_async(workflow_id)
        attempts = status.recovery_attempts if status else None
        print(run.output, run.id, attempts, flush=True)
    finally:
        os._exit(0)  # DBOS.destroy() joins its queue threads for a second: nothing to keep here


def work_until_stopped() -> None:
    """A worker: DBOS's queue threads run the enqueued workflows until ``STOP`` exists.

    It touches ``READY`` (when set) once launched.
    """
    build()
    launch()
    if ready := os.environ.get("READY"):
        Path(ready).touch()
    while not Path(os.environ["STOP"]).exists():
        time.sleep(0.05)
    os._exit(0)


def enqueue_and_exit(count: int) -> None:
    """A web server's life: enqueue ``count`` runs, stay up a few queue polls, exit.

    ``ENQUEUE_ONLY=1``: it calls ``DBOSAgent.enqueue_only()`` before launching.
    """
    durable = build()
    launch(enqueue_only=os.environ.get("ENQUEUE_ONLY") == "1")
    for i in range(count):
        durable.enqueue("go", workflow_id=f"web-{i}")
    time.sleep(5)  # DBOS looks for new queues every second, then polls: time to claim runs
    os._exit(0)


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        work_until_stopped()
    if sys.argv[1] == "enqueue":
        enqueue_and_exit(int(sys.argv[2]))
    asyncio.run(main(sys.argv[1], sys.argv[2]))
