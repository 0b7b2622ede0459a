"""What each run keeps of its session's history at its end (``Run.conversation``), shared.

``Run.conversation`` is the session's history as it was when the run ended. A copy per run made
a session of N runs hold N growing lists (7.9 MiB of lists after 1,000 runs of two messages
each). Each run's end (``engine.ending.closed``) now keeps a link (``agentloop._util.chain``):
the messages committed since the session's previous link, and that link. The session holds its
latest link (``_link``) and the history list it was taken of (``_linked``); the run holds the
link (``Run._link``) and its ``conversation`` stays unset: its first read makes the list and
keeps it in the link's place (a paused run's later end replaces it). So a run's end costs what
it committed, and every past run still reads as its own conversation, whatever the history
became since.

That rests on one rule: **the session's history list only grows at its end.** A step that
changes what it holds otherwise either makes it a new list (compaction, a store reload, a
crashed run reopened: another list is another chain, as ``Measured`` treats it too) or says
where the change began, ``edited(session, index)`` (an append-only conversation's new base, a
filtered handoff's end; SPEC 26, 28): the session's chain goes back to the last link before
``index``. A list found shorter than the last link, or whose message there moved, starts a new
chain rather than trust it.
"""

from __future__ import annotations

from typing import Any

from agentloop._util.chain import back_to

__all__ = ["edited"]


def edited(session: Any, index: int) -> None:
    """The session's history changed in place from ``index`` on: its chain goes back there."""
    if session._linked is session._history:
        session._link = back_to(session._link, index)
