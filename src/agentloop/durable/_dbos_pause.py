"""A paused ``DBOSAgent`` run (SPEC 17): it waits inside its workflow, holding no process busy.

When the run pauses, its workflow publishes the pending calls as the DBOS event
``agentloop.pending`` (``{"pause": n, "pending": [PendingCall.to_dict(), ...]}``, ``n`` counting
the run's pauses) and waits on the topic ``agentloop.decisions`` with ``DBOS.recv``: a coroutine
parked on a database notification, not a thread. Both are recorded by DBOS, so a workflow
recovered after its process died publishes nothing twice and takes the message it already took,
or waits again. ``send_decisions`` (any process) checks a decision set against the published
calls (``check_decisions``: ``InvalidInput`` as the engine raises it) and sends it with an
idempotency key of the run and the pause, so only the first set sent for a pause is delivered;
the workflow checks it again (a message is data from outside: one that does not answer the
pause exactly is ignored), clears the event, and continues the run with it.

A decided call runs at most once: before its tool step, a marker step records which execution
of the workflow started it; a later execution that finds the marker of another, and no recorded
result, records ``LOST_TEXT`` instead of running the tool again (as the plain store's journal
does, ``agentloop.engine.call``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dbos import DBOS

from agentloop.durable._wrap import accepted_decisions, decision_message
from agentloop.errors import InvalidInput
from agentloop.pausing import Decision, PendingCall, check_decisions
from agentloop.run import Run

__all__ = [
    "DECISIONS_TOPIC",
    "PENDING_EVENT",
    "published",
    "send_decisions",
    "wait_for_decisions",
]

PENDING_EVENT = "agentloop.pending"
"""The DBOS event a paused run's workflow publishes its pending calls in."""

DECISIONS_TOPIC = "agentloop.decisions"
"""The DBOS message topic a paused run's workflow takes its decisions from."""

_WAIT_SECONDS = 24 * 3600.0
"""One ``DBOS.recv`` wait; the workflow waits again after it, as long as it takes."""


async def wait_for_decisions(run: Run[Any], pause: int) -> dict[str, Decision]:
    """Publish ``run``'s pending calls, then the first decision set that answers them exactly."""
    pending = [p.to_dict() for p in run.pending]
    await DBOS.set_event_async(PENDING_EVENT, {"pause": pause, "pending": pending})
    while True:
        message = await DBOS.recv_async(DECISIONS_TOPIC, timeout_seconds=_WAIT_SECONDS)
        decisions = accepted_decisions(message, run.pending, pause)
        if decisions is not None:
            await DBOS.set_event_async(PENDING_EVENT, {"pause": pause, "pending": []})
            return decisions


def published(workflow_id: str) -> tuple[int, tuple[PendingCall, ...]]:
    """The pause number and pending calls the workflow published (``(0, ())``: none)."""
    event = DBOS.get_event(workflow_id, PENDING_EVENT, timeout_seconds=0)
    if not isinstance(event, Mapping):
        return 0, ()
    return int(event["pause"]), tuple(PendingCall.from_dict(p) for p in event["pending"])


def send_decisions(workflow_id: str, decisions: object) -> None:
    """Check ``decisions`` against the run's published pending calls, then send them."""
    pause, pending = published(workflow_id)
    if not pending:
        raise InvalidInput(
            f"DBOS workflow {workflow_id} is not paused (no pending calls): decisions answer "
            "a paused run's pending calls (DBOSAgent.pending)"
        )
    message = decision_message(pause, check_decisions(pending, decisions))
    DBOS.send(
        workflow_id,
        message,
        DECISIONS_TOPIC,
        idempotency_key=f"agentloop/{workflow_id}/pause/{pause}",
    )
