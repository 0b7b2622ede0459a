"""The crash tests' agent: a deterministic plan of tool calls, a counting tool, kill points.

Imported by the child processes (``_crash_child.py``) and by the tests that continue their runs,
so both sides build the same agent. ``KILL`` (``point:n``) names where a child SIGKILLs itself.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from agentloop import Agent, tool
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.store import SQLiteStore
from agentloop.testing import FunctionModel, call

PLAN: list[list[str]] = [["a", "b"], ["c"], ["d", "e", "f"], ["g"]]
"""Per turn, the keys of the ``work`` calls the model asks for; then it answers ``done``."""

KEYS = [key for turn in PLAN for key in turn]

_counts: dict[str, int] = {}


def kill_point(point: str) -> None:
    """SIGKILL this process at the ``n``-th time it reaches ``point`` when ``KILL`` says so."""
    target = os.environ.get("KILL")
    if not target:
        return
    _counts[point] = _counts.get(point, 0) + 1
    if target == f"{point}:{_counts[point]}":
        os.kill(os.getpid(), signal.SIGKILL)


def hold_point(point: str) -> None:
    """Pause here (after touching ``HOLD_FILE``) when ``HOLD`` names ``point``.

    With ``RELEASE_FILE`` it waits until the test creates that file (at most 60 s), so a slow
    machine cannot end the hold before the test has done what it holds for; else it sleeps
    ``HOLD_SECONDS`` (2).
    """
    if os.environ.get("HOLD") == point:
        Path(os.environ["HOLD_FILE"]).touch()
        release = os.environ.get("RELEASE_FILE")
        if release is None:
            time.sleep(float(os.environ.get("HOLD_SECONDS", "2")))
            return
        deadline = time.monotonic() + 60
        while not Path(release).exists() and time.monotonic() < deadline:
            time.sleep(0.02)


def effects_file() -> Path:
    return Path(os.environ["EFFECTS"])


@tool
async def work(key: str) -> str:
    """Do one unit of work with a side effect."""
    kill_point(f"tool:{key}")
    hold_point(f"tool:{key}")
    with effects_file().open("a") as out:
        out.write(key + "\n")
    return f"did {key}"


def plan_step(request: ModelRequest) -> Any:
    """The next step from the transcript: how many tool-result messages the run has."""
    kill_point("model")
    done = sum(1 for m in request.messages if m.role == "tool")
    step: Any = [call("work", {"key": key}) for key in PLAN[done]] if done < len(PLAN) else "done"
    kill_point("model-reply")  # the reply is made, the model call has not returned
    return step


class KillingStore(SQLiteStore):
    """An SQLiteStore that dies before or after a write, or in the middle of its transaction."""

    def begin_run(self, *args: Any, **kwargs: Any) -> None:
        kill_point("begin_run")
        super().begin_run(*args, **kwargs)

    def save_turn(self, *args: Any, **kwargs: Any) -> None:
        kill_point("save_turn_before")
        super().save_turn(*args, **kwargs)
        kill_point("save_turn_after")

    def save_step(self, *args: Any, **kwargs: Any) -> None:
        kill_point("save_step_before")
        super().save_step(*args, **kwargs)
        kill_point("save_step_after")

    def finish_runs(self, *args: Any, **kwargs: Any) -> None:
        kill_point("finish_before")
        super().finish_runs(*args, **kwargs)


class _MidCommit:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def run(self, sql: str, params: Any = ()) -> None:
        self.inner.run(sql, params)
        if sql.startswith("INSERT"):
            kill_point("mid_commit")

    def many(self, sql: str, rows: Any) -> None:
        self.inner.many(sql, rows)

    def rows(self, sql: str, params: Any = ()) -> Any:
        return self.inner.rows(sql, params)


def _mid_commit_store() -> type[KillingStore]:
    from contextlib import contextmanager

    class MidCommitStore(KillingStore):
        @contextmanager
        def _transaction(self, *, write: bool) -> Any:
            with super()._transaction(write=write) as tx:
                yield _MidCommit(tx) if write else tx

    return MidCommitStore


def build(db: str, *, resume: bool) -> Agent[Any]:
    store = _mid_commit_store()(db)
    if os.environ.get("HANDOFF"):
        return _handing_off(store, resume=resume)
    model = FunctionModel(plan_step)
    if resume:
        return Agent.resume("crash", store=store, client=model, tools=[work])
    return Agent(model, tools=[work], store=store, session_id="crash")


def _handing_off(store: SQLiteStore, *, resume: bool) -> Agent[Any]:
    """``HANDOFF``: a front desk hands off at once; its receiver ``worker`` runs the plan."""

    def front(request: ModelRequest) -> Any:
        return [call("transfer_to_worker", {})]

    def receiver(request: ModelRequest) -> Any:  # the plan, after the transfer's result
        shown = [m for m in request.messages if not _transfer_result(m)]
        return plan_step(ModelRequest(messages=shown))

    worker: Any = Agent(FunctionModel(receiver), tools=[work], name="worker")
    if os.environ["HANDOFF"] == "filtered":
        from agentloop import handoff

        worker = handoff(worker, input_filter=list)
    if resume:
        return Agent.resume("crash", store=store, client=FunctionModel(front), handoffs=[worker])
    return Agent(FunctionModel(front), handoffs=[worker], store=store, session_id="crash")


def _transfer_result(message: Message) -> bool:
    return message.role == "tool" and all(
        getattr(p, "name", "") == "transfer_to_worker" for p in message.parts
    )


def first_user(messages: list[Message]) -> str:
    return next(m.text for m in messages if m.role == "user")
