"""A ``resume`` whose interrupts another process already settled: what happened, then the end.

An operator may decide (or cancel) a thread's paused run from elsewhere: ``agentloop continue
--agent``, the run viewer, another worker. The customer's page still holds the interrupts, and
``@ag-ui/client`` refuses to send a new message while it does (``Thread has 1 pending
interrupt(s) not addressed by resume``); a ``RUN_ERROR`` leaves them pending, so the thread
could never be used again from that page. A ``resume`` that answers calls of the thread's
latest run, settled while the client waited, is therefore answered with what happened there,
never with the client's own answers (nothing runs, nothing is recorded):

    MESSAGES_SNAPSHOT                   the request's messages, as a continued run echoes them
    CUSTOM agentloop:DecidedElsewhere   ``{"calls": [ids], "decisions": {id: kind}}``
    TOOL_CALL_RESULT per call           what the model read (a soft error marked), if it ran
    TEXT_MESSAGE_*                      the run's text answer, when it has one
    RUN_FINISHED / RUN_ERROR            the run's end: success, the next interrupts, cancelled

``RUN_FINISHED`` clears the client's interrupts (or replaces them when the run paused again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ag_ui import core

from agentloop.ui import _ag_ui_frames as frame

if TYPE_CHECKING:
    from agentloop.run import Run
    from agentloop.ui._ag_ui_events import AGUIEvents

__all__ = ["settled_run", "settled_frames"]


def settled_run(run: Run[Any] | None, resume: Sequence[core.ResumeEntry]) -> Run[Any] | None:
    """``run`` when the calls ``resume`` answers are its own and no longer wait.

    Its own: calls of a run that ended (decided and gone on, or cancelled), or calls another
    process decided before the run paused again on others. A run whose calls still wait (or
    whose continuation elsewhere has not ended yet: the store says paused until it does) is
    not settled: the answers go to ``continue_stream``, which refuses them there.
    """
    if run is None or not resume:
        return None
    asked = {entry.interrupt_id for entry in resume}
    if run.paused:
        decided = {k for record in run.decisions for k in record.get("decisions") or {}}
        waiting = {p.id for p in run.pending}
        return run if asked <= decided and not asked & waiting else None
    calls = {c.id for m in run.messages for c in m.tool_calls}
    return run if asked <= calls else None


def settled_frames(out: AGUIEvents, run: Run[Any], resume: Sequence[core.ResumeEntry]) -> str:
    """The frames before the run's end: the decisions taken elsewhere, the results, the answer."""
    asked = [entry.interrupt_id for entry in resume]
    decided: dict[str, str] = {}
    for record in run.decisions:
        for call_id, decision in (record.get("decisions") or {}).items():
            if call_id in asked and isinstance(decision, dict):
                decided[call_id] = str(decision.get("kind"))
    value = {"calls": asked, "decisions": decided}
    text = out.encoder.encode(core.CustomEvent(name="agentloop:DecidedElsewhere", value=value))
    results = {p.call_id: p for m in run.messages for p in m.tool_results_parts}
    for call_id in asked:
        part = results.get(call_id)
        if part is not None:
            made = frame.TOOL_ERROR if part.is_error else frame.TOOL_RESULT
            text += made(f"{out.run_id}-{call_id}", call_id, part.content)
    if isinstance(run.output, str) and run.output:
        message = f"{out.run_id}-answer"
        text += frame.TEXT_START(message) + frame.TEXT_CONTENT(message, run.output)
        text += frame.TEXT_END(message)
    return text
