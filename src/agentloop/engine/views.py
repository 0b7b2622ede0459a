"""A filtered handoff's view (SPEC 26): what the receiver's requests send, measured and compacted.

After a handoff with an ``input_filter`` the receiver's requests are a conversation of their
own: the filter's messages, then every message the transcript gains after the handoff. A
``View`` holds that (``RunState.shown``; ``RunState.sent()`` is what a request sends). The
context guard measures the view, not the transcript, since the view is what is sent; a
compaction pass (the threshold's, or the emergency one after a provider's context-length
rejection) compacts the view: its result becomes the view's head and the view goes on from the
transcript's end. The transcript itself is committed whole at that point (compaction is a
commit point, and the committed history keeps every message, SPEC 26), so the session's
history stays complete and valid. A pause keeps the view (``stored``) and its continuation
reads it back (``restored``) with the same head and positions. Functions take the run's
``RunState`` untyped: the state holds a ``View``, so this module does not import it back.

On an append-only conversation (SPEC 28) the view is a conversation of its own, with its own
base, so the entries recorded while it is sent (the receiver's tool and instruction changes,
``AppendOnly.record``) are the view's, not the transcript's: ``View.entries`` holds each with
the transcript position it was recorded at, and every request sends it there again. They never
reach the session's history or ``run.messages``, which go on against the session's own base; a
pause keeps them with the view.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloop.messages import Message

__all__ = ["View", "compacted", "measure", "restored", "stored"]


@dataclass(slots=True)
class View:
    """What a filtered handoff's receiver sees: ``head``, then ``transcript[at:]``."""

    head: list[Message]
    """The filter's messages (after a compaction of the view: its result)."""
    at: int
    """Where the transcript goes on after ``head`` (the handoff, or the last compaction)."""
    since: int
    """Where the receiver's own messages start in the transcript (the handoff)."""
    first: int
    """Where the run's first filtered view started (``since`` unless a receiver with a view
    handed off again with a filter): from there the transcript's messages were sent in other
    conversations than the session's."""
    entries: list[tuple[int, Message]] = field(default_factory=list)
    """This conversation's own system entries (SPEC 28), each with the transcript position it
    was recorded at (it goes before ``transcript[position]``), in order."""

    def messages(self, transcript: list[Message]) -> list[Message]:
        """The view's messages over ``transcript``: what a request sends."""
        if not self.entries:
            return [*self.head, *transcript[self.at :]]
        sent, start = list(self.head), self.at
        for position, entry in self.entries:
            if position > start:
                sent.extend(transcript[start:position])
                start = position
            sent.append(entry)
        sent.extend(transcript[start:])
        return sent

    def record(self, state: Any, entry: Message) -> None:
        """An entry of this conversation, at the transcript's end (the guard measures it)."""
        self.entries.append((len(state.transcript), entry))
        state.guard.added(entry)


def measure(state: Any) -> None:
    """The context guard measures the view anew (at the handoff, and when a paused run goes on).

    Its overhead is what the receiver's requests send beside the messages: its system prompt
    and tools, or on an append-only conversation (SPEC 28) its own base.
    """
    conversation = state.appendonly
    if conversation is None:
        state.guard.restart(state.sent(), state.system, state.offer.specs)
    else:
        conversation.measure(state)


def compacted(state: Any, messages: list[Message], commit: Callable[[list[Message]], None]) -> None:
    """A pass compacted the view to ``messages``, its new head; the transcript commits whole.

    The view's entries were in what the pass compacted, so its result holds them (SPEC 28).
    """
    view = state.shown
    assert view is not None
    commit(list(state.transcript))
    state.shown = View(list(messages), len(state.transcript), view.since, view.first)


def stored(view: View) -> dict[str, Any]:
    """What a pause keeps of the view (``restored`` reads it back)."""
    kept: dict[str, Any] = {
        "shown": [m.to_dict() for m in view.head],
        "shown_at": view.at,
        "shown_since": view.since,
        "shown_first": view.first,
    }
    if view.entries:
        kept["shown_entries"] = [[at, m.to_dict()] for at, m in view.entries]
    return kept


def restored(paused: Mapping[str, Any]) -> View | None:
    """The view a pause kept (None: the paused receiver had none)."""
    head = paused.get("shown")
    if head is None:
        return None
    at = int(paused["shown_at"])
    kept = paused.get("shown_since")  # kept since views are compacted; before, the handoff's
    since = at if kept is None else int(kept)
    kept = paused.get("shown_first")  # kept since a view's receiver may hand off with a filter
    first = since if kept is None else int(kept)
    entries = [(int(p), Message.from_dict(m)) for p, m in paused.get("shown_entries") or ()]
    return View([Message.from_dict(m) for m in head], at, since, first, entries)
