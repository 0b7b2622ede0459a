"""The live sessions of an agent by id: what ``agent.session(id)`` finds again (SPEC 20).

"The same id gives the same live ``Session`` object while it is referenced": the agent keeps a
weak reference to each session it made, by id. A ``weakref.WeakValueDictionary`` did that with a
keyed reference and a removal callback per session, both in Python: about 2 us of every
``agent.session()`` and of every session's end, at N = 1,000 concurrent runs once per run. Here
a plain weak reference (no callback) per session, in a plain dict; the entries of sessions that
have died are dropped when the dict has doubled since the last sweep, so the work stays constant
per session and the dict at most twice the live sessions.
"""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

__all__ = ["LiveSessions"]

_S = TypeVar("_S")

_FIRST_SWEEP = 64
"""Entries before the first sweep (a handful of sessions never sweeps)."""


class LiveSessions(Generic[_S]):
    """Sessions by id, held weakly: ``get`` answers while the application holds the session."""

    __slots__ = ("_refs", "_sweep_at")

    def __init__(self) -> None:
        self._refs: dict[str, weakref.ref[Any]] = {}
        self._sweep_at = _FIRST_SWEEP

    def add(self, session_id: str, session: _S) -> None:
        """Remember ``session`` under ``session_id`` (weakly)."""
        refs = self._refs
        refs[session_id] = weakref.ref(session)
        if len(refs) >= self._sweep_at:
            self._sweep()

    def get(self, session_id: str) -> _S | None:
        """The live session of that id, or None (never made, or no longer referenced)."""
        ref = self._refs.get(session_id)
        return None if ref is None else ref()

    def __len__(self) -> int:
        """Entries kept, dead ones not swept yet included."""
        return len(self._refs)

    def _sweep(self) -> None:
        """Drop the entries of sessions that died; the next sweep at twice what is left."""
        refs = self._refs
        for key, ref in list(refs.items()):  # a copy: another thread may add meanwhile
            if ref() is None and refs.get(key) is ref:
                del refs[key]
        self._sweep_at = max(_FIRST_SWEEP, 2 * len(refs))
