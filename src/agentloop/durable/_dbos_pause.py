"""A paused ``DBOSAgent`` run (SPEC 17, 25): it records its pause and leaves its queue.

A paused run holds no worker. Its workflow ends: it draws a step ID ``S`` (``DBOS.reserve_step``),
runs there the step ``<name>.decided``, which reads the decision recorded for this pause (none
yet), publishes its pending calls as the DBOS event ``agentloop.pending`` (``{"pause": n,
"pending": [PendingCall.to_dict(), ...], "step": S, "agent": name, "turn_agent": last}``, ``n``
counting the run's pauses, ``last`` the ``run.last_agent`` of a pause in a handoff receiver, whose
calls ``decide`` judges by that receiver, SPEC 26) and returns the paused ``Run``, which frees its
``worker_concurrency`` slot.

A decision is a workflow: ``decide`` starts ``agentloop.<name>.decide`` with the ID
``<run id>/decided/<n>`` (``decided_id``) under DBOS's ``reject`` reuse policy, its input the
decision set. That ID is the pause's idempotency key: the first set recorded wins, and another
``decide`` (a repeat, a second process) is ``InvalidInput`` ("is not paused"). The workflow's one
step forks the paused workflow from ``S`` into ``<run id>/continued/<n>`` (``continued_id``) on
the agent's queue (``DBOS.fork_workflow``: the steps before ``S`` are copied, so the fork replays
the run to its pause without calling the model or a tool again; at ``S`` it reads the recorded
decision and goes on). A process dying at any point leaves either no decision (the run is still
paused), or a decision workflow DBOS recovers and finishes, or the continuation on the queue.

Finding a run: the run's id names its first workflow; ``paused_at`` walks from it along the
continuations (a published pause whose decision exists leads to its continuation) to the
workflow that holds the run now, and whether it is paused. A decided call runs at most once:
before its tool step, a marker step records which execution of the workflow started it; a later
execution that finds the marker of another, and no recorded result, records ``LOST_TEXT``
instead of running the tool again (``_dbos_steps``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from dbos import DBOS, SetWorkflowID, StepOptions
from dbos import error as dbos_error

from agentloop.durable._wrap import accepted_decisions, decision_message
from agentloop.engine.handoff_carry import turn_agent
from agentloop.engine.pause import check_agent_tools
from agentloop.engine.pause_tools import check_published
from agentloop.errors import Cancelled, ConfigurationError, InvalidInput
from agentloop.pausing import Decision, PendingCall, check_decisions
from agentloop.run import Run

__all__ = [
    "DECIDERS",
    "PENDING_EVENT",
    "Paused",
    "continued_id",
    "decided_id",
    "next_workflow",
    "paused_at",
    "record_pause",
    "send_cancel",
    "send_decisions",
]

logger = logging.getLogger("agentloop")

PENDING_EVENT = "agentloop.pending"
"""The DBOS event a paused run's workflow publishes its pending calls in."""

DECIDERS: dict[str, tuple[Callable[..., Any], Any]] = {}
"""Each ``DBOSAgent``'s decision workflow and ``Agent`` by name (set when it is built)."""


def decided_id(run_id: str, pause: int) -> str:
    """The ID of the workflow that records the decision for the run's pause ``pause``."""
    return f"{run_id}/decided/{pause}"


def continued_id(run_id: str, pause: int) -> str:
    """The ID of the workflow that continues the run after its pause ``pause`` is decided."""
    return f"{run_id}/continued/{pause}"


async def record_pause(
    run: Run[Any], run_id: str, pause: int, name: str
) -> dict[str, Decision] | None:
    """In the workflow: the decisions recorded for this pause, or None once it is published.

    None means the workflow must end (return the paused run): its pause is recorded, and the
    decision's fork starts again from the step drawn here.
    """
    reservation = DBOS.reserve_step()
    options: StepOptions = {"name": f"{name}.decided"}
    message = await reservation.run_async(options, _recorded, decided_id(run_id, pause))
    if message is None:
        pending = [p.to_dict() for p in run.pending]
        published = {"pause": pause, "pending": pending, "step": reservation.step_id, "agent": name}
        published["turn_agent"] = run.last_agent  # a receiver's call is judged by it (SPEC 26)
        published["turn"] = _paused_turn(run)  # decide resolves the toolsets as of this turn
        published["session"] = run.session_id
        await DBOS.set_event_async(PENDING_EVENT, published)
        return None
    decisions = accepted_decisions(message, run.pending, pause)
    if decisions is None:  # data from the database that does not answer the pause: stop here
        raise InvalidInput(
            f"the decisions recorded for pause {pause} of run {run_id} do not answer its "
            "pending calls; the run cannot go on"
        )
    return decisions


def _paused_turn(run: Run[Any]) -> int:
    turn = (run.paused_turn or {}).get("turn", {}).get("index", 0)
    return turn if isinstance(turn, int) else 0


async def _recorded(workflow_id: str) -> Any:
    """The step ``<name>.decided``: the decision workflow's message, or None (none yet)."""
    return _message_of(await DBOS.get_workflow_status_async(workflow_id))


def _message_of(status: Any) -> Any:
    if status is None or status.input is None:
        return None
    return status.input["args"][-1]


class Paused(NamedTuple):
    """Where a run is: the workflow that holds it, and the pause it waits on (0: none)."""

    workflow: str
    pause: int = 0
    step: int = 0
    agent: str = ""
    pending: tuple[PendingCall, ...] = ()
    last_agent: str | None = None
    turn: int = 0
    session: str | None = None


def paused_at(run_id: str) -> Paused:
    """Walk the run's workflows from its first to the one that holds it now (synchronous)."""
    workflow, after = run_id, 0
    while True:
        event = DBOS.get_event(workflow, PENDING_EVENT, timeout_seconds=0)
        if not isinstance(event, Mapping) or int(event["pause"]) <= after or not event["pending"]:
            return Paused(workflow)  # running, finished, or not started
        pause = int(event["pause"])
        if DBOS.get_workflow_status(decided_id(run_id, pause)) is None:
            pending = tuple(PendingCall.from_dict(p) for p in event["pending"])
            last, turn, session = (
                event.get("turn_agent"),
                event.get("turn", 0),
                event.get("session"),
            )
            agent = str(event["agent"])
            return Paused(workflow, pause, int(event["step"]), agent, pending, last, turn, session)
        workflow, after = continued_id(run_id, pause), pause


def send_decisions(run_id: str, decisions: object) -> None:
    """Check ``decisions`` against the run's pending calls, then record them (first one wins)."""
    paused = paused_at(run_id)
    if not paused.pending:
        raise InvalidInput(
            f"DBOS run {run_id} is not paused (no pending calls): decisions answer a paused "
            "run's pending calls (DBOSAgent.pending)"
        )
    checked = check_decisions(paused.pending, decisions)
    agent = turn_agent(_decider(run_id, paused)[1], paused.last_agent)  # the paused turn's
    check_agent_tools(agent, paused.pending, checked)
    asyncio.run(_check_offered(agent, run_id, paused, checked))  # this thread runs no loop
    _start_decision(run_id, paused, decision_message(paused.pause, checked))


async def _check_offered(
    agent: Any, run_id: str, paused: Paused, decisions: dict[str, Decision]
) -> None:
    """The toolsets resolved as the continuation will: the run's deps, its paused turn."""

    async def deps() -> Any:  # the run's first workflow's input: (input, deps, run id)
        try:
            status = await DBOS.get_workflow_status_async(run_id)
            args = status.input["args"] if status is not None and status.input else ()
        except Exception as exc:  # deps this process cannot unpickle: judged by the worker
            logger.warning("run %s: its deps cannot be read here (%s)", run_id, type(exc).__name__)
            raise LookupError(run_id) from exc
        return args[1] if len(args) > 1 else None

    turn, session = paused.turn, paused.session
    await check_published(
        agent, paused.pending, decisions, deps, run_id=run_id, turn=turn, session_id=session
    )


def send_cancel(run_id: str) -> bool:
    """Record "cancelled" as the decision of the run's pause; False: it is not paused."""
    paused = paused_at(run_id)
    if not paused.pending:
        return False
    _start_decision(run_id, paused, {"pause": paused.pause, "cancel": True})
    return True


def _decider(run_id: str, paused: Paused) -> tuple[Callable[..., Any], Any]:
    decider = DECIDERS.get(paused.agent)
    if decider is None:
        raise ConfigurationError(
            f"DBOS run {run_id} is a run of the DBOSAgent '{paused.agent}': build it in this "
            "process (before DBOS.launch()) to decide its runs",
            field="dbos",
        )
    return decider


def _start_decision(run_id: str, paused: Paused, message: dict[str, object]) -> None:
    decider = _decider(run_id, paused)[0]
    workflow_id = decided_id(run_id, paused.pause)
    try:
        with SetWorkflowID(workflow_id, workflow_id_reuse_policy="reject"):
            handle = DBOS.start_workflow(decider, run_id, paused.workflow, paused.step, message)
    except dbos_error.DBOSWorkflowIDInUseError:
        raise InvalidInput(
            f"DBOS run {run_id} is not paused: its pause {paused.pause} was decided by another "
            "caller first; nothing was sent"
        ) from None
    handle.get_result()  # the continuation is on the queue when decide returns


def fork_continuation(run_id: str, head: str, step: int, pause: int, queue: str) -> str:
    """The decision workflow's step: fork ``head`` from ``step`` onto ``queue`` (once)."""
    continuation = continued_id(run_id, pause)
    if DBOS.get_workflow_status(continuation) is None:
        try:
            with SetWorkflowID(continuation):
                DBOS.fork_workflow(head, step, queue_name=queue)
        except Exception:  # a recovered decision racing its first execution: one fork stands
            if DBOS.get_workflow_status(continuation) is None:
                raise
    return continuation


async def next_workflow(run_id: str, head: str, poll_seconds: float) -> str:
    """The workflow that continues a run whose workflow ``head`` ended paused, once decided.

    Raises:
        Cancelled: The pause was cancelled instead of decided.
    """
    event = await DBOS.get_event_async(head, PENDING_EVENT, timeout_seconds=0)
    pause = int(event["pause"])
    while True:
        status = await DBOS.get_workflow_status_async(decided_id(run_id, pause))
        message = _message_of(status)
        if isinstance(message, Mapping) and message.get("cancel"):
            raise Cancelled()
        continuation = continued_id(run_id, pause)
        if message is not None and await DBOS.get_workflow_status_async(continuation) is not None:
            return continuation
        await asyncio.sleep(poll_seconds)
