"""Per-tool circuit breakers: sustained sick failures become a temporary soft refusal.

Only failures that say the *tool* is sick count: timeouts and unexpected exceptions. A
``ToolError``, an ``is_error`` output or a validation failure means the model's input was wrong
(the tool ran fine) and never counts, so a model's typos can never lock a tool.

States per tool::

    closed --(failure_threshold consecutive sick results)--> open
    open --(recovery_seconds elapsed; the next caller is the single probe)--> half_open
    half_open --(probe success or neutral)--> closed
    half_open --(probe sick)--> open (fresh cooldown)
    half_open --(no probe result within probe_timeout)--> open (cooldown from the lease end)

Every transition starts a new *generation*; an ``Admission`` remembers the generation it was
granted in, and a result from an older generation never moves the state machine (a success
that arrives while open cannot close it). The health score never blocks; only the state does.

``snapshot()`` / ``restore()`` carry the breakers into another process (``Agent.resume``): times
travel as wall-clock seconds (monotonic clocks do not survive a process), and a probe that was in
flight is lost with its process, so a restored half-open breaker is open with its cooldown served.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from agentloop.safety._config import require_non_negative

__all__ = [
    "Admission",
    "BreakerState",
    "HealthStatus",
    "Outcome",
    "ToolBreaker",
    "ToolBreakers",
    "ToolHealth",
    "health_status",
]

BreakerState: TypeAlias = Literal["closed", "open", "half_open"]
HealthStatus: TypeAlias = Literal["healthy", "degraded", "unhealthy"]
Outcome: TypeAlias = Literal["success", "sick", "neutral"]

_EWMA_KEEP = 0.7
_HEALTHY_SCORE = 0.8
_DEGRADED_SCORE = 0.5


@dataclass(frozen=True, slots=True)
class ToolBreaker:
    """Open after ``failure_threshold`` consecutive sick failures (0 never opens)."""

    failure_threshold: int = 3
    recovery_seconds: float = 30.0
    probe_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("failure_threshold", "recovery_seconds", "probe_timeout"):
            require_non_negative("ToolBreaker", name, getattr(self, name))


@dataclass(frozen=True, slots=True)
class Admission:
    """Permission to run ``tool`` once; hand it back to ``ToolBreakers.record``."""

    tool: str
    probe: bool
    generation: int


@dataclass(frozen=True, slots=True)
class ToolHealth:
    """One tool's breaker state and statistics (the score is informative; it never blocks)."""

    tool: str
    state: BreakerState
    status: HealthStatus
    score: float
    consecutive_failures: int
    total_calls: int
    successes: int
    failures: int
    success_rate: float
    ewma_success: float


def health_status(score: float) -> HealthStatus:
    """``healthy`` at 0.8 and above, ``degraded`` at 0.5 and above, else ``unhealthy``."""
    if score >= _HEALTHY_SCORE:
        return "healthy"
    if score >= _DEGRADED_SCORE:
        return "degraded"
    return "unhealthy"


class _Circuit:
    """The mutable state of one tool's breaker."""

    __slots__ = (
        "consecutive_failures",
        "ewma",
        "failures",
        "generation",
        "neutral",
        "opened_at",
        "probe_started",
        "state",
        "successes",
    )

    def __init__(self) -> None:
        self.state: BreakerState = "closed"
        self.generation = 0
        self.consecutive_failures = 0
        self.opened_at = 0.0
        self.probe_started = 0.0
        self.successes = 0
        self.failures = 0
        self.neutral = 0
        self.ewma = 1.0

    def transition(self, state: BreakerState) -> None:
        self.state = state
        self.generation += 1

    def count(self, outcome: Outcome) -> None:
        """Health statistics: neutral results are calls, but neither success nor failure."""
        if outcome == "neutral":
            self.neutral += 1
            return
        sample = 1.0 if outcome == "success" else 0.0
        self.ewma = _EWMA_KEEP * self.ewma + (1.0 - _EWMA_KEEP) * sample
        if outcome == "success":
            self.successes += 1
        else:
            self.failures += 1


def _restored(data: Mapping[str, Any], shift: float) -> _Circuit:
    circuit = _Circuit()
    state = data["state"]
    if state not in ("closed", "open", "half_open"):
        raise ValueError(f"unknown breaker state {state!r}")
    circuit.state = state
    circuit.generation = int(data["generation"])
    circuit.consecutive_failures = int(data["consecutive_failures"])
    circuit.opened_at = float(data["opened_at"]) + shift
    circuit.probe_started = float(data["probe_started"]) + shift
    circuit.successes, circuit.failures, circuit.neutral = (int(n) for n in data["counts"])
    circuit.ewma = float(data["ewma"])
    return circuit


class ToolBreakers:
    """One circuit breaker per tool name, created on first use.

    Args:
        config: thresholds shared by every tool's breaker.
        clock: monotonic seconds; inject a fake in tests.
    """

    def __init__(
        self, config: ToolBreaker | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config or ToolBreaker()
        self._clock = clock
        self._circuits: dict[str, _Circuit] = {}

    def __repr__(self) -> str:
        return f"ToolBreakers({self.config!r})"

    def admit(self, tool: str) -> Admission | None:
        """Ask to run ``tool`` now; None means refused (the breaker is open or probing).

        After the cooldown the first caller becomes the single probe; until its result is
        recorded (or its lease ends) every other caller is refused.
        """
        circuit = self._circuits.get(tool)
        if circuit is None:
            circuit = self._circuits[tool] = _Circuit()
        if circuit.state == "closed":
            return Admission(tool, False, circuit.generation)
        now = self._clock()
        self._expire_lease(circuit, now)
        if circuit.state == "open" and now - circuit.opened_at >= self.config.recovery_seconds:
            circuit.transition("half_open")
            circuit.probe_started = now
            return Admission(tool, True, circuit.generation)
        return None

    def would_admit(self, tool: str) -> bool:
        """Whether ``admit(tool)`` would succeed now, without taking the probe slot."""
        circuit = self._circuits.get(tool)
        if circuit is None or circuit.state == "closed":
            return True
        now = self._clock()
        state, opened_at = self._settled(circuit, now)
        return state == "open" and now - opened_at >= self.config.recovery_seconds

    def record(self, admission: Admission, outcome: Outcome) -> None:
        """Report how an admitted call ended.

        Args:
            admission: what ``admit`` returned for the call.
            outcome: ``"sick"`` for a timeout or an unexpected exception (counts toward
                opening); ``"neutral"`` for a result that proves the tool ran but rejected its
                input (``ToolError``, ``is_error`` output, validation failure): it never counts
                as a failure and, for a probe, closes the breaker like a success;
                ``"success"`` otherwise.
        """
        circuit = self._circuits.get(admission.tool)
        if circuit is None:
            circuit = self._circuits[admission.tool] = _Circuit()
        circuit.count(outcome)
        now = self._clock()
        self._expire_lease(circuit, now)
        if admission.generation != circuit.generation:
            if outcome == "sick" and circuit.state == "open":
                circuit.opened_at = max(circuit.opened_at, now)
            return
        if circuit.state == "closed":
            self._record_closed(circuit, outcome, now)
        elif circuit.state == "half_open":
            self._record_probe(circuit, outcome, now)

    def release(self, admission: Admission) -> None:
        """Hand back an admission whose call never produced a result (e.g. it was cancelled).

        A released probe returns the breaker to open with its cooldown already served, so the
        next caller probes at once. Other admissions need no release.
        """
        circuit = self._circuits.get(admission.tool)
        if circuit is None or not admission.probe:
            return
        if circuit.state == "half_open" and circuit.generation == admission.generation:
            circuit.transition("open")
            circuit.opened_at = circuit.probe_started - self.config.recovery_seconds

    def snapshot(self, *, wall: float | None = None) -> dict[str, Any]:
        """Every breaker as plain JSON data, times as wall-clock seconds (``wall`` = now)."""
        shift = (time.time() if wall is None else wall) - self._clock()
        tools = {}
        for name, c in self._circuits.items():
            tools[name] = {
                "state": c.state,
                "generation": c.generation,
                "consecutive_failures": c.consecutive_failures,
                "opened_at": c.opened_at + shift,
                "probe_started": c.probe_started + shift,
                "counts": [c.successes, c.failures, c.neutral],
                "ewma": c.ewma,
            }
        return {"tools": tools}

    def restore(self, data: Mapping[str, Any], *, wall: float | None = None) -> None:
        """Replace every breaker with a ``snapshot()``; raises ``ValueError`` on malformed data."""
        shift = self._clock() - (time.time() if wall is None else wall)
        try:
            circuits = {str(name): _restored(c, shift) for name, c in data["tools"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a ToolBreakers snapshot: {exc!r}") from exc
        for circuit in circuits.values():
            if circuit.state == "half_open":  # its probe died with its process
                circuit.transition("open")
                circuit.opened_at = circuit.probe_started - self.config.recovery_seconds
        self._circuits = circuits

    def health(self, tool: str) -> ToolHealth:
        """The state and statistics of ``tool`` (a tool never seen is healthy and closed)."""
        circuit = self._circuits.get(tool) or _Circuit()
        state, _ = self._settled(circuit, self._clock())
        decided = circuit.successes + circuit.failures
        rate = circuit.successes / decided if decided else 1.0
        score = 0.3 * rate + 0.7 * circuit.ewma
        return ToolHealth(
            tool=tool,
            state=state,
            status=health_status(score),
            score=score,
            consecutive_failures=circuit.consecutive_failures,
            total_calls=decided + circuit.neutral,
            successes=circuit.successes,
            failures=circuit.failures,
            success_rate=rate,
            ewma_success=circuit.ewma,
        )

    def health_summary(self) -> dict[str, ToolHealth]:
        """``health`` of every tool seen so far, sorted by name."""
        return {tool: self.health(tool) for tool in sorted(self._circuits)}

    def _record_closed(self, circuit: _Circuit, outcome: Outcome, now: float) -> None:
        if outcome != "sick":
            circuit.consecutive_failures = 0
            return
        circuit.consecutive_failures += 1
        threshold = self.config.failure_threshold
        if threshold and circuit.consecutive_failures >= threshold:
            circuit.transition("open")
            circuit.opened_at = now

    def _record_probe(self, circuit: _Circuit, outcome: Outcome, now: float) -> None:
        if outcome == "sick":
            circuit.consecutive_failures += 1
            circuit.transition("open")
            circuit.opened_at = now
        else:
            circuit.consecutive_failures = 0
            circuit.transition("closed")

    def _settled(self, circuit: _Circuit, now: float) -> tuple[BreakerState, float]:
        """The state and cooldown start once an expired probe lease is released (pure)."""
        lease = self.config.probe_timeout
        if circuit.state == "half_open" and lease and now >= circuit.probe_started + lease:
            return "open", circuit.probe_started + lease
        return circuit.state, circuit.opened_at

    def _expire_lease(self, circuit: _Circuit, now: float) -> None:
        state, opened_at = self._settled(circuit, now)
        if state != circuit.state:
            circuit.transition(state)
            circuit.opened_at = opened_at
