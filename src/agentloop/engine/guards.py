"""The engine's view of the safety stack, with the poisoning policy applied in one place.

One ``SafetyState`` per session: the detectors' windows and the budget gate are the session's
(each detector made when first asked for: no loop detector before a second tool call, no
convergence detector before a second answer; the first is kept here until then); the tool
breakers are the agent's, shared by all its sessions (a sick tool is sick for everyone).
Detection is advisory: if a detector's own update raises, detection switches itself off for the
session with one warning and the run goes on. A breaker whose update raises fails closed
(``LockPoisoned``). The budget gate: see ``agentloop.engine.limits``.

``snapshot()`` gathers every component's state (and the model health of a ``FallbackClient``,
found through wrapping clients' ``inner``) as plain JSON data; the engine stores it at each
commit point and ``restore()`` puts it back on ``Agent.resume`` and ``continue_run``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from agentloop._util.lazy import lazy_module
from agentloop.clock import Clock
from agentloop.config import RunConfig
from agentloop.engine.limits import Limits
from agentloop.errors import AgentLoopError, LockPoisoned
from agentloop.observers import EventBus, Observer
from agentloop.run import Run
from agentloop.safety.breaker import Admission, ToolBreakers
from agentloop.safety.breaker import Outcome as BreakerOutcome
from agentloop.safety.convergence import (
    ConvergenceDetector,
    ConvergenceStatus,
    convergence_error,
)
from agentloop.safety.loops import LoopDetector, LoopWarning

if TYPE_CHECKING:
    from agentloop import events as ev
else:  # the event classes load when somebody first listens
    ev = lazy_module("agentloop.events")

__all__ = ["BREAKER_TEXT", "SAFETY_FORMAT", "SafetyState"]

_NO_ARGUMENTS: Mapping[str, Any] = {}
"""No kept operation's arguments (never written to)."""

logger = logging.getLogger("agentloop")

BREAKER_TEXT = "tool temporarily unavailable: circuit breaker open"

SAFETY_FORMAT = 1
"""The version of ``SafetyState.snapshot()``'s data; a newer one is not restored."""


@runtime_checkable
class _HealthSnapshots(Protocol):
    """A client that keeps model health across processes (``FallbackClient``)."""

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, data: Mapping[str, Any]) -> None: ...


def _health_client(client: object) -> _HealthSnapshots | None:
    """The client, or the first client it wraps (``inner``), that snapshots model health."""
    for _ in range(8):
        # what isinstance(client, _HealthSnapshots) checks, without the typing machinery's
        # 8 us (a snapshot is taken at every commit point of a durable store)
        snapshot, restore = getattr(client, "snapshot", None), getattr(client, "restore", None)
        if snapshot is not None and restore is not None:
            return cast(_HealthSnapshots, client)
        client = getattr(client, "inner", None)
        if client is None:
            return None
    return None


class SafetyState(Limits):
    """Loop and convergence detection, tool breakers and the limits gate of one session.

    It is its limits gate, and so the session's event channel too (``Limits`` is an
    ``EventBus`` of ``observers``, stamping events with ``session_id``): one object for the
    collector to track, not two. ``limits`` and ``bus`` are the state itself, read through the
    class (a stored reference to itself would be a cycle only a collection frees).
    ``breakers``: the agent's, shared by its sessions (a private set when not given).
    """

    __slots__ = (
        "_answer", "_convergence", "_loops", "_op_args", "_op_available", "_op_error", "_op_text",
        "_op_tool", "breakers", "config", "detection_on",
    )  # fmt: skip

    def __init__(
        self,
        config: RunConfig,
        observers: Sequence[Observer],
        session_id: str,
        clock: Clock,
        *,
        breakers: ToolBreakers | None = None,
        monotonic: Callable[[], float] | None = None,
        draws: bool | None = None,
    ) -> None:
        """``monotonic``, ``draws``: the clock's reading and ``Limits``' ``draws``, when known."""
        self.config = config
        self._loops: LoopDetector | None = None
        self._convergence: ConvergenceDetector | None = None
        self._op_tool: str | None = None
        """The session's first tool call's operation, kept here until its detector is made."""
        self._op_args: Mapping[str, Any] = _NO_ARGUMENTS
        self._op_text = ""
        self._op_error = self._op_available = False
        self._answer: str | None = None
        """The session's first answer, kept here until its detector is made."""
        self.breakers = (
            ToolBreakers(config.tool_breaker, clock.monotonic) if breakers is None else breakers
        )
        if monotonic is None:  # (a dispatcher passes its agent's, chosen once per agent)
            # the system's function itself for the system's clock: the same readings, without
            # a bound method made (and scanned by the collector) per session
            monotonic = (
                time.monotonic if type(clock).monotonic is Clock.monotonic else clock.monotonic
            )
        Limits.__init__(self, config, observers, session_id, monotonic, draws)
        self.detection_on = True

    @property
    def limits(self) -> Limits:
        """The session's limits gate: this safety state itself."""
        return self

    @property
    def bus(self) -> EventBus:
        """The session's event channel: this safety state itself."""
        return self

    @property
    def loops(self) -> LoopDetector:
        """The session's loop detector (made when first asked for, or at a second tool call).

        A first operation kept here (``loop_record``) is the new detector's first, as if it had
        been recorded there.
        """
        loops = self._loops
        if loops is None:
            loops = self._loops = LoopDetector(self.config.loop_detection)
            tool = self._op_tool
            if tool is not None:
                arguments, self._op_tool, self._op_args = self._op_args, None, _NO_ARGUMENTS
                text, self._op_text = self._op_text, ""
                loops.record(
                    tool, arguments, text, is_error=self._op_error, available=self._op_available
                )
        return loops

    @property
    def convergence(self) -> ConvergenceDetector:
        """The session's convergence detector (made when first asked for, or at a second answer).

        A first answer kept here (``converge``) is the new detector's first.
        """
        convergence = self._convergence
        if convergence is None:
            convergence = self._convergence = ConvergenceDetector(self.config.convergence)
            answer = self._answer
            if answer is not None:
                self._answer = None
                convergence.record(answer)
        return convergence

    def loop_record(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        text: str,
        is_error: bool,
        available: bool,
    ) -> LoopWarning | None:
        """Record a tool call's attempt (``LoopDetector.record``); a warning at the warn line.

        The session's first operation can neither warn nor stop (unless a threshold is 1): it
        is kept here as given, and the detector is made only when a second one (or a read of
        ``loops``) needs it. A session with one tool call makes no detector.
        """
        loops = self._loops
        if loops is None:
            config = self.config.loop_detection
            if not config.window:  # no window: nothing is ever recorded
                return None
            if self._op_tool is None and config.warn_threshold != 1 and config.stop_threshold != 1:
                self._op_tool, self._op_args, self._op_text = tool, arguments, text
                self._op_error, self._op_available = is_error, available
                return None
            loops = self.loops
        return loops.record(tool, arguments, text, is_error=is_error, available=available)

    def converge(self, text: str) -> ConvergenceStatus | None:
        """Feed a terminal reply (``ConvergenceDetector.record``); a status at the streak.

        The session's first answer never reports (a streak of one): it is kept here, and the
        detector is made only when a second answer (or a read of ``convergence``) needs it.
        """
        convergence = self._convergence
        if convergence is None:
            if not self.config.convergence.count:  # off: nothing is ever recorded
                return None
            if self._answer is None:
                self._answer = text
                return None
            convergence = self.convergence
        return convergence.record(text)

    def snapshot(self, client: object = None) -> dict[str, Any]:
        """Every component's state as plain JSON data (``client``: the agent's model client)."""
        data: dict[str, Any] = {
            "format": SAFETY_FORMAT,
            "loops": self.loops.snapshot(),
            "convergence": self.convergence.snapshot(),
            "breakers": self.breakers.snapshot(),
            "budget": self.budget.snapshot(),
            "detection_on": self.detection_on,
            "budget_on": self.budget_on,
        }
        health = _health_client(client)
        if health is not None:
            data["models"] = health.snapshot()
        return data

    def restore(
        self,
        data: Mapping[str, Any],
        client: object = None,
        *,
        continuing: Run | None = None,
        shared: bool = True,
    ) -> None:
        """Put back a ``snapshot()``; raises ``ValueError`` when it is malformed or newer.

        ``continuing``: the run ``continue_run`` picks up; its spend is restored at its start
        (the snapshot of a turn's commit point predates that turn's count). ``shared=False``
        leaves the agent's tool breakers and model health alone: a session restored on a live
        agent never overwrites what its other sessions share.
        """
        version = data.get("format") if isinstance(data, Mapping) else None
        if not isinstance(version, int) or version > SAFETY_FORMAT:
            raise ValueError(f"safety state format {version!r} is not one this agentloop reads")
        self.loops.restore(data["loops"])
        self.convergence.restore(data["convergence"])
        if shared:
            self.breakers.restore(data["breakers"])
        if continuing is not None:
            self.continue_run(continuing, data["budget"])
        self.detection_on = bool(data.get("detection_on", True))
        self.budget_on = bool(data.get("budget_on", True))
        health = _health_client(client) if shared else None
        if health is not None and "models" in data:
            health.restore(data["models"])

    def poisoned(self, what: str, exc: Exception) -> None:
        """``what`` raised: detection switches itself off for the session, with one warning.

        The engine's calls into the detectors (the loop pre-check and record in
        ``engine.call``, convergence in ``engine.loop``) are written out where they are made, a
        call fewer each per turn; each keeps its ``try`` and ends here when a detector raises.
        """
        self.detection_on = False
        logger.warning("%s raised (%r); detection is off for the rest of this session", what, exc)

    def warned(self, run: Run, warning: LoopWarning) -> None:
        """A loop pattern reached its warning threshold: noted on the turn, told once."""
        _note(run, f"loop: {warning.pattern} ({warning.repetitions} repetitions)")
        if self.active:
            self.emit(ev.LoopWarning(run.id, self.turn, warning.pattern, warning.repetitions))

    def converged(self, run: Run, status: ConvergenceStatus) -> AgentLoopError | None:
        """A terminal reply reached the convergence streak: noted, told, the action's error."""
        _note(run, f"convergence: {status}")
        if self.active:
            self.emit(ev.ConvergenceWarning(run.id, self.turn, status))
        return convergence_error(status.action)

    def settle(self, admission: Admission, outcome: BreakerOutcome | None) -> None:
        """Record an attempt's outcome (None releases an attempt that produced no result)."""
        try:
            if outcome is None:
                self.breakers.release(admission)
            else:
                self.breakers.record(admission, outcome)
        except Exception as exc:
            raise LockPoisoned("tool_breaker") from exc

    def end_run(self) -> None:
        """Drop a stop-level pattern the run never fired; a run's own budget gate goes."""
        if self._kept is not None:  # ``Limits.end_run``, written out: a call fewer per run
            self._gate, self._kept = self._kept[0], None
        if self.detection_on and self._loops is not None:  # (none: no tool call yet)
            try:
                self._loops.end_run()
            except Exception as exc:
                self.poisoned("the loop detector", exc)


def _note(run: Run, warning: str) -> None:
    """Keep a safety warning on the run's current turn (the record, the viewer)."""
    if run.turns:
        turn = run.turns[-1]
        if turn.warnings is None:
            turn.warnings = []
        turn.warnings.append(warning)
