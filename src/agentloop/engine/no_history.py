"""A new session's history before its first commit: one shared empty list that refuses writes.

A session made without history (``agent.session()``, the common case at N = 1,000 concurrent
runs) used to hold an empty list of its own across every wait of its first run, one more
object for the collector to scan. It holds ``NO_HISTORY`` instead until something is written:
its first commit (``engine.commit``), an append-only base (``engine.appendonly``, through
``Conversation._append_only``). ``own_history`` gives the session its own list then. The
shared list refuses every write (``TypeError``) so that a writer this misses fails loudly
instead of reaching every session at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop.messages import Message

__all__ = ["NO_HISTORY", "own_history"]


class _Unwritten(list["Message"]):
    """An empty list that refuses every write: ``NO_HISTORY``, shared by every new session.

    A write would reach every session at once, so it raises instead (fail closed); a session
    replaces it with a list of its own before its first commit (``own_history``).
    """

    __slots__ = ()

    def _refused(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("NO_HISTORY is shared by every new session: replace it, never write it")

    append = extend = insert = remove = pop = clear = sort = reverse = _refused
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refused


NO_HISTORY: list[Message] = _Unwritten()
"""A new session's history while it has none (shared: never written, ``own_history``)."""


def own_history(session: Any) -> list[Message]:
    """``session._history``, a list of its own (``NO_HISTORY`` replaced) to commit into."""
    history: list[Message] = session._history
    if history is NO_HISTORY:
        history = session._history = []
    return history
