"""What a durable run tells its observers about the calls a recovery answered from the record.

When DBOS recovers a workflow, or Temporal replays one from its history, the engine runs the
run again from the top and its recorded model calls, tool calls and guardrail verdicts come
back from the record: the events of those calls are emitted again, in a process where nothing
was spent on them. ``Replays`` is a listener on the run's event bus (listeners see an event
before any observer) that marks them: ``ModelResponded``, ``ToolCallFinished`` and
``GuardrailChecked`` get ``replayed=True`` (the OpenTelemetry observer then marks their spans
``agentloop.replayed`` and counts no usage on them), so a dashboard counts each call once.

How it knows. Under DBOS, a step whose function did not run was answered from the database: the
seams (``_dbos_steps``) say so per model call, per tool call (by call id) and per guardrail
verdict, just before the engine emits the call's event. Under Temporal, the workflow code runs
again while ``workflow.unsafe.is_replaying()`` is True; the events it emits then were emitted
before. A child agent's events (``path``) are never marked: a child runs inside a tool step or
activity, which a replay does not run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentloop import events as ev
from agentloop.engine.agent import Agent

__all__ = ["Replays", "guard_key", "listen"]

_MARK: dict[type[ev.Event], Any] = {
    ev.ModelResponded: ev.ModelResponded.replayed,
    ev.ToolCallFinished: ev.ToolCallFinished.replayed,
    ev.GuardrailChecked: ev.GuardrailChecked.replayed,
}
"""The ``replayed`` slot of each event that can be marked (set past frozen, as the bus stamps)."""


def guard_key(name: str, kind: str, turn: int) -> tuple[str, str, int]:
    """What ties a guardrail verdict to its ``GuardrailChecked`` event (which names no call).

    A guardrail's checks of one kind in one turn run one after the other (tool results are
    screened call by call), and each event is emitted as soon as its verdict is known.
    """
    return (name, kind, turn)


class Replays:
    """Which of a run's calls were answered from the record, and the listener that marks them.

    ``replaying`` (Temporal): asked for every event that can be marked. Without it (DBOS) the
    step seams set ``model`` (the last model call), ``tools`` (call ids) and ``guards``.
    """

    __slots__ = ("guards", "model", "replaying", "tools")

    def __init__(self, replaying: Callable[[], bool] | None = None) -> None:
        self.replaying = replaying
        self.model = False
        self.tools: set[str] = set()
        self.guards: set[tuple[str, str, int]] = set()

    def __call__(self, event: ev.Event) -> None:
        """Mark ``event`` replayed when its call was answered from the record."""
        slot = _MARK.get(type(event))
        if slot is None or event.path:
            return
        if self.replaying is not None:
            replayed = self.replaying()
        elif isinstance(event, ev.ModelResponded):
            replayed = self.model
        elif isinstance(event, ev.ToolCallFinished):
            replayed = event.call.id in self.tools
        else:
            assert isinstance(event, ev.GuardrailChecked)
            key = guard_key(event.guardrail, event.kind, event.turn)
            replayed = key in self.guards
            self.guards.discard(key)
        if replayed:
            slot.__set__(event, True)

    def guarded(self, key: tuple[str, str, int], replayed: bool) -> None:
        """A verdict came back (``replayed``: from the record): its event follows."""
        if replayed:
            self.guards.add(key)
        else:
            self.guards.discard(key)


def listen(twin: Agent[Any], replays: Replays) -> None:
    """Put ``replays`` on the event bus of ``twin``'s session, when anyone observes its runs.

    Without observers nothing is emitted, and nothing is marked (a run pays nothing).
    """
    bus = twin.default_session._bus
    if bus.active:
        bus.attach(replays)
