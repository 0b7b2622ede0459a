"""A ``useChat`` answer for calls that were already settled: what happened, in the same message.

An operator may decide (or cancel) a chat's paused run from elsewhere (``agentloop continue
--agent``, the run viewer, another worker), or the page may send its approval twice (a retry).
Refusing the answer (409) left the page showing an error and never the decided call's output.
An approval or tool output for calls of the chat's latest run that no longer wait is answered
with what that run did, never with the page's own answer (nothing runs, nothing is recorded):

    start, start-step                      the message the page is answering, continued
    data-agentloop (transient)             ``{"type": "DecidedElsewhere", "calls", "decisions"}``
    tool-output-* per call                 what the model read (denied, an error, the output)
    text-*                                 the run's text answer, when it has one
    finish-step, then the run's end        as a live run ends it (the next approval requests
                                           when it paused again, abort when cancelled)

The run's end is the one ``Chunks`` writes for a live run (``RunPaused``, ``RunFinished``), so
there is one way to say it. ``AGUIApp`` does the same in its protocol (``_ag_ui_elsewhere.py``).
"""

from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING, Any

from agentloop.events import RunFinished, RunPaused
from agentloop.ui._settled import decision_kinds, results_of
from agentloop.ui._vercel_chunks import Chunk, Chunks

if TYPE_CHECKING:
    from agentloop.run import Run

__all__ = ["settled_chunks"]


def settled_chunks(chunks: Chunks, run: Run[Any], asked: Set[str]) -> list[Chunk]:
    """Every chunk of the answer to ``asked``, settled by ``run``, up to its ``finish``."""
    kinds = decision_kinds(run, sorted(asked))
    out: list[Chunk] = [{"type": "start", "messageId": chunks.message_id}, {"type": "start-step"}]
    value = {"type": "DecidedElsewhere", "calls": sorted(asked), "decisions": kinds}
    out.append({"type": "data-agentloop", "data": value, "transient": True})
    results = results_of(run)
    for call_id in sorted(asked):
        part = results.get(call_id)
        if kinds.get(call_id) == "deny":
            out.append({"type": "tool-output-denied", "toolCallId": call_id})
        elif part is not None and part.is_error:
            out.append(
                {"type": "tool-output-error", "toolCallId": call_id, "errorText": part.content}
            )
        elif part is not None:
            out.append(
                {"type": "tool-output-available", "toolCallId": call_id, "output": part.content}
            )
    if isinstance(run.output, str) and run.output:
        out += chunks.whole("text", run.output)
    out.append({"type": "finish-step"})
    if run.paused:
        out += chunks.feed(RunPaused(run.id, len(run.turns), run.pending))
    return out + chunks.feed(RunFinished(run.id, len(run.turns), run))
