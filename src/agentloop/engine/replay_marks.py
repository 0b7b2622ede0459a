"""Marking what a plain store's continuation answered from its journal: ``replayed`` events.

``continue_run`` on a run its process never finished (a crash), or on a paused run whose
continuation a crash cut off, answers from the step journal (``agentloop.engine.journal``) what
already happened: the in-flight turn's model reply, the tool calls that returned, an approved
call whose result was kept. The engine emits their events again, in a process that neither asked
the model nor ran the tool. As DBOS and Temporal recoveries do (``agentloop.durable._replay``),
those events say so: ``ModelResponded`` and ``ToolCallFinished`` get ``replayed=True`` (the
OpenTelemetry observer then marks their spans ``agentloop.replayed`` and counts no usage on
them), so a dashboard counts each call once.

``ReplayMarks`` is a listener on the session's event bus (listeners see an event before any
observer; a stream's queue holds the same event object, marked before it is read). It costs
nothing to a continuation that answers nothing from the journal, or that nobody listens to: it
is attached when the journal first answers a call while somebody listens (``Journal.answered``),
or at once when a crash cut a continuation after an approved call's result was kept, and lets go
at its run's ``RunFinished`` (or when another run of the session starts). Not marked: a reply the
batch poller journaled (its first application is the result's arrival), a ``Deny`` or
``Answer`` given again from the recorded decisions (decided, not replayed: nothing ran), and a
child agent's events (``path``: the child's own session marks them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agentloop import events as ev

if TYPE_CHECKING:
    from agentloop.engine.conversation import Conversation
    from agentloop.engine.journal import Journal

__all__ = ["ReplayMarks", "mark_replays"]

_DECIDED = "decided/"
_RESULT = "/result"


class ReplayMarks:
    """The listener marking the events of what ``journal`` answered, for one run."""

    __slots__ = ("attached", "bus", "journal", "run_id")

    def __init__(self, bus: Any, journal: Journal, run_id: str) -> None:
        self.bus = bus
        self.journal = journal
        self.run_id = run_id
        self.attached = False

    def attach(self, *, always: bool = False) -> None:
        """Listen, once, while somebody listens to the bus (``always``: whoever comes later)."""
        if self.attached or self.journal.run_id != self.run_id:
            return
        if always or self.bus.active:
            self.attached = True
            self.bus.attach(self)

    def __call__(self, event: ev.Event) -> None:
        """Mark ``event`` replayed when the journal answered its call; let go at the run's end."""
        if event.run_id != self.run_id:
            if type(event) is ev.RunStarted and not event.path:
                self.detach()  # another run of the session: this one ended unseen
            return
        if event.path:
            return
        kind = type(event)
        journal = self.journal
        if kind is ev.ToolCallFinished:
            call_id = event.call.id  # type: ignore[attr-defined]
            if call_id in journal.answered_calls:
                journal.answered_calls.discard(call_id)
                ev.ToolCallFinished.replayed.__set__(event, True)  # type: ignore[attr-defined]
        elif kind is ev.ModelResponded:
            if event.turn in journal.answered_turns:
                journal.answered_turns.discard(event.turn)
                ev.ModelResponded.replayed.__set__(event, True)  # type: ignore[attr-defined]
        elif kind is ev.RunFinished:
            self.detach()

    def detach(self) -> None:
        """Stop listening (once); this run's marks are done."""
        if self.journal.marks is self:
            self.journal.marks = None
        if self.attached:
            self.attached = False
            self.bus.detach(self)


def mark_replays(
    session: Conversation[Any], journal: Journal, run_id: str, decided: Iterable[str] = ()
) -> None:
    """Before a continuation from ``journal`` runs: mark its replayed events (see the module).

    Nothing is attached when the journal holds nothing to answer (a run pays nothing).
    ``decided``: the ids of the calls this continuation decides; those whose result was kept
    (``decided/<id>/result``, a crash cut the continuation after it) are answered by the
    journal too (``agentloop.engine.call``): they are noted here.
    """
    if journal.marks is not None:
        journal.marks.detach()
    if not journal.entries:
        return
    marks = journal.marks = ReplayMarks(session._bus, journal, run_id)
    for call_id in decided:
        if f"{_DECIDED}{call_id}{_RESULT}" in journal.entries:
            journal.answered_calls.add(call_id)
    if journal.answered_calls:  # a stream's listener is attached after this: listen now
        marks.attach(always=True)
