"""Which session a UI request runs on: the application's choice, or one per thread by default.

An app takes ``session=``, the application's callable ``(request, thread_id) -> Session`` (sync
or async), where it authenticates the caller and picks or refuses the conversation: a thread id
sent by a client is never trusted by itself (SPEC 18). It refuses by raising; the app answers
403 with the exception's text. Without one, ``ThreadSessions`` keeps one in-memory session per
thread id for the app's lifetime, seeded from the client's message history when new.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from agentloop.messages import Message

if TYPE_CHECKING:
    from agentloop.engine.agent import Agent
    from agentloop.engine.session import Session

__all__ = ["SessionPicker", "ThreadSessions", "pick_session"]

SessionPicker: TypeAlias = Callable[[Any, str], "Session[Any] | Awaitable[Session[Any]]"]
"""``session(request, thread_id) -> Session``: authenticate, then pick (or raise to refuse)."""


class ThreadSessions:
    """The default picker: one in-memory session per thread id, seeded when new."""

    def __init__(self, agent: Agent[Any]) -> None:
        self.agent = agent
        self._sessions: dict[str, Session[Any]] = {}

    def get(self, thread_id: str, seed: Callable[[], Sequence[Message]]) -> Session[Any]:
        """The thread's session; a new one starts from ``seed()`` (the client's history)."""
        session = self._sessions.get(thread_id)
        if session is None:
            history = list(seed())
            session = self.agent.session(history=history or None)
            self._sessions[thread_id] = session
        return session


async def pick_session(
    picker: SessionPicker | None,
    default: ThreadSessions,
    request: Any,
    thread_id: str,
    seed: Callable[[], Sequence[Message]],
) -> Session[Any]:
    """The session a request runs on: the app's ``picker``, else the default per-thread one."""
    if picker is None:
        return default.get(thread_id, seed)
    chosen = picker(request, thread_id)
    if inspect.isawaitable(chosen):
        chosen = await chosen
    return chosen
