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

``stopped_frames`` says the same of calls a stopped chat left open (``_stopped``): their
results, before a new message's run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ag_ui import core

from agentloop.ui import _ag_ui_frames as frame
from agentloop.ui._settled import decision_kinds, results_of

if TYPE_CHECKING:
    from agentloop.messages import ToolResultPart
    from agentloop.run import Run
    from agentloop.ui._ag_ui_events import AGUIEvents

__all__ = ["settled_frames", "stopped_frames"]


def settled_frames(out: AGUIEvents, run: Run[Any], resume: Sequence[core.ResumeEntry]) -> str:
    """The frames before the run's end: the decisions taken elsewhere, the results, the answer."""
    asked = [entry.interrupt_id for entry in resume]
    value = {"calls": asked, "decisions": decision_kinds(run, asked)}
    text = out.encoder.encode(core.CustomEvent(name="agentloop:DecidedElsewhere", value=value))
    results = results_of(run)
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


def stopped_frames(out: AGUIEvents, results: Sequence[ToolResultPart]) -> str:
    """A ``TOOL_CALL_RESULT`` per call a stopped chat left open (``_stopped``), as it ended."""
    text = ""
    for part in results:
        made = frame.TOOL_ERROR if part.is_error else frame.TOOL_RESULT
        text += made(f"{out.run_id}-{part.call_id}", part.call_id, part.content)
    return text
