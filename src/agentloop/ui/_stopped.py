"""Calls a page still shows running after its user stopped the chat: how each one ended.

The user stops a chat while a tool runs (the ``ai`` package's ``chat.stop()``,
``@ag-ui/client``'s ``abortRun()``). The run is cancelled and the engine closes the call in
that run (the soft ``INTERRUPTED_TEXT``); a new worker seeding from the client's history closes
it the same way (``close_stopped``). The page never hears of it: its client keeps the
call as it last saw it, without a result, and the end user watches a call that never ends. So
the next response on that thread says, before the new turn's events, how each call the client
still shows open ended, as the session's history holds it (the text the model read, no second
one):

- ``AGUIApp``: the client's messages echoed (``MESSAGES_SNAPSHOT``, as a resumed run does, so
  the calls are known in this stream), then a ``TOOL_CALL_RESULT`` per call (a soft error
  marked ``metadata.agentloop.error``); ``@ag-ui/client`` files it after the assistant message
  that made the call, whichever run that was.
- ``VercelAIApp``: the ``ai`` package builds one assistant message per response, and a
  ``tool-output-*`` chunk for a call of an earlier message is a stream error there (``No tool
  invocation found``, the chat ends in ``error``). The response carries instead, right after
  ``start``, a transient ``data-agentloop`` ``{"type": "StoppedCalls", "calls": [{toolCallId,
  toolName, errorText | output}]}``, which the page hands to ``chat.addToolOutput`` (its own
  way to finish a tool part in any message; docs/ui.md has the lines).

Only a client's history with an open call costs anything: the session's history is read then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentloop.messages import Message, ToolResultPart

if TYPE_CHECKING:
    from agentloop.engine.session import Session

__all__ = ["ended", "open_calls", "stopped_data"]


def open_calls(history: Sequence[Message]) -> list[str]:
    """The ids of the calls in ``history`` (a client's) that have no result there, in order."""
    answered = {p.call_id for m in history if m.role == "tool" for p in m.tool_results_parts}
    return [c.id for m in history for c in m.tool_calls if c.id not in answered]


def ended(session: Session[Any], calls: Sequence[str]) -> list[ToolResultPart]:
    """The results ``session`` holds for ``calls``, in their order.

    Looked up in its history (a new worker's seed closed them: ``close_stopped``) and in its
    latest run: a cancelled run commits no turn in flight (SPEC 5), so the call the engine
    closed at the cancel is in that run's messages, not in the history.
    """
    run = session.current_run
    held = [*session.history, *(run.messages if run is not None else ())]
    results = {p.call_id: p for m in held if m.role == "tool" for p in m.tool_results_parts}
    return [results[c] for c in calls if c in results]


def stopped_data(results: Sequence[ToolResultPart]) -> dict[str, Any]:
    """The ``data-agentloop`` chunk telling a ``useChat`` page how its open calls ended."""
    calls: list[dict[str, Any]] = []
    for part in results:
        told: dict[str, Any] = {"toolCallId": part.call_id, "toolName": part.name}
        told["errorText" if part.is_error else "output"] = part.content
        calls.append(told)
    data = {"type": "StoppedCalls", "calls": calls}
    return {"type": "data-agentloop", "data": data, "transient": True}
