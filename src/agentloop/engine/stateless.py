"""A stateless run that pauses stays reachable while its agent lives (SPEC 20).

``agent.run(input, history=...)`` runs on a fresh, unsaved session that nobody else holds: once
the run ends it is garbage, which is what keeps thousands of stateless calls free. One that
pauses on pending calls must stay reachable, ``agent.session(run.session_id).continue_run(...)``,
so the agent holds its session while (and only while) the session's last run is paused: each
run's end (``engine.commit``) tells the keeper, which holds a paused session and lets go of one
that was continued to its end or cancelled. A stateless run that did not pause is never kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop.engine.conversation import Conversation

__all__ = ["kept_while_paused"]


def kept_while_paused(agent: Any, session: Any) -> Any:
    """``session`` (an ``agent``'s stateless one), kept by ``agent`` while a run of it is paused."""
    session._keeper = _Keeper(agent)
    return session


class _Keeper:
    """Called at each run's end of one stateless session: hold it while it is paused."""

    __slots__ = ("agent",)

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def __call__(self, session: Conversation[Any]) -> None:
        agent = self.agent
        held: dict[str, Any] | None = agent.__dict__.get("_paused_stateless")
        last = session._latest
        if last is not None and last.pending:
            if held is None:
                held = agent._paused_stateless = {}
            held[session.id] = session  # a strong reference: the agent's, while it lives
            agent._adopt(session)  # agent.session(id) finds it (a weak reference)
        elif held is not None:
            held.pop(session.id, None)
