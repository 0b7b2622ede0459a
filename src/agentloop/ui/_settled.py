"""Calls a client answers that another process has settled since: the run that settled them.

A web app's page answers a paused run's calls (an AG-UI ``resume``, a ``useChat`` approval);
meanwhile an operator may have decided or cancelled that run from elsewhere (``agentloop
continue --agent``, the run viewer, another worker). ``AGUIApp`` then tells the page what
happened there instead of refusing it (``_ag_ui_elsewhere.py``); ``VercelAIApp`` still answers
409, as it does to an approval sent twice (docs/ui.md). These are the facts read from the
thread's latest run, as the store holds it.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop.messages import ToolResultPart
    from agentloop.run import Run

__all__ = ["decision_kinds", "results_of", "settled_run"]


def settled_run(run: Run[Any] | None, asked: Set[str]) -> Run[Any] | None:
    """``run`` when the calls ``asked`` (a client's answers) are its own and no longer wait.

    Its own: calls of a run that ended (decided and gone on, or cancelled), or calls another
    process decided before the run paused again on others. A run whose calls still wait (or
    whose continuation elsewhere has not ended yet: the store says paused until it does) is
    not settled: the answers go to ``continue_stream``, which refuses them there.
    """
    if run is None or not asked:
        return None
    if run.paused:
        decided = {k for record in run.decisions for k in record.get("decisions") or {}}
        waiting = {p.id for p in run.pending}
        return run if asked <= decided and not asked & waiting else None
    calls = {c.id for m in run.messages for c in m.tool_calls}
    return run if asked <= calls else None


def decision_kinds(run: Run[Any], asked: Sequence[str]) -> dict[str, str]:
    """The kind of each decision another process recorded for the calls ``asked``."""
    kinds: dict[str, str] = {}
    for record in run.decisions:
        for call_id, decision in (record.get("decisions") or {}).items():
            if call_id in asked and isinstance(decision, dict):
                kinds[call_id] = str(decision.get("kind"))
    return kinds


def results_of(run: Run[Any]) -> dict[str, ToolResultPart]:
    """Each call's result in ``run``, by call id."""
    return {p.call_id: p for m in run.messages for p in m.tool_results_parts}
