"""Circuit breakers: one state machine (``Circuit``) for tools and models, and per-tool breakers.

``Circuit`` is the state machine both breakers run: ``ToolBreakers`` below keeps one per tool,
``providers.fallback`` one per model (``ModelHealth`` is its frozen view). The few ways the two
differ are numbers and flags of a ``CircuitRule``, not code::

    closed --(threshold consecutive failures)--> open
    open --(cooldown elapsed; the next caller probes)--> half_open
    half_open --(probes_to_close successes in a row)--> closed
    half_open --(a hard failure, or threshold failures)--> open (fresh cooldown)
    half_open --(single probe not reported within probe_lease)--> open (cooldown from lease end)

Every transition starts a new *generation*; an admission that remembers its generation (tools)
never moves the state machine once it is stale (a success that arrives while open cannot close
it); a result while open changes nothing, except that a stale failure restarts the cooldown.

Per-tool breakers count only failures that say the *tool* is sick: timeouts and unexpected
exceptions. A ``ToolError``, an ``is_error`` output or a validation failure means the model's input
was wrong (the tool ran fine) and never counts, so a model's typos can never lock a tool. A tool's
half-open state admits a single probe; any sick probe reopens. The health score never blocks;
only the state does.

``snapshot()`` / ``restore()`` carry the breakers into another process (``Agent.resume``): times
travel as wall-clock seconds (monotonic clocks do not survive a process), and a probe that was in
flight is lost with its process, so a restored half-open breaker is open with its cooldown served.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

from agentloop._util.slots import record
from agentloop.safety._config import require_non_negative_fields

__all__ = [
    "Admission",
    "BreakerState",
    "Circuit",
    "CircuitRule",
    "HealthStatus",
    "Outcome",
    "ToolBreaker",
    "ToolBreakers",
    "ToolHealth",
    "health_status",
    "wall_shift",
]

BreakerState: TypeAlias = Literal["closed", "open", "half_open"]
HealthStatus: TypeAlias = Literal["healthy", "degraded", "unhealthy"]
Outcome: TypeAlias = Literal["success", "sick", "neutral"]

_EWMA_KEEP = 0.7
_EWMA_GAIN = 1.0 - _EWMA_KEEP
"""A success's share of the EWMA: ``(1.0 - _EWMA_KEEP) * 1.0``, the same float."""
_HEALTHY_SCORE = 0.8
_DEGRADED_SCORE = 0.5


@record
class CircuitRule:
    """How a ``Circuit`` moves.

    Attributes:
        threshold: consecutive failures that open it (0 never opens).
        cooldown: seconds open before the next caller probes.
        probes_to_close: successes in a row while half-open that close it.
        single_probe: half-open admits one caller (tools) rather than every caller (models).
        probe_lease: with ``single_probe``, seconds after which an unreported probe is lost
            (0: never).
        recount_when_probing: half-open counts failures from zero (models) rather than on from
            the count that opened it (tools).
    """

    threshold: int
    cooldown: float
    probes_to_close: int = 1
    single_probe: bool = True
    probe_lease: float = 0.0
    recount_when_probing: bool = False


class Circuit:
    """One breaker's mutable state; every method takes the rule and the monotonic ``now``."""

    __slots__ = (
        "consecutive_failures",
        "generation",
        "opened_at",
        "probe_started",
        "probe_successes",
        "state",
    )

    def __init__(
        self,
        state: BreakerState = "closed",
        consecutive_failures: int = 0,
        opened_at: float = 0.0,
        probe_successes: int = 0,
    ) -> None:
        self.state: BreakerState = state
        self.generation = 0
        self.consecutive_failures = consecutive_failures
        self.opened_at = opened_at
        self.probe_started = 0.0
        self.probe_successes = probe_successes

    def transition(self, state: BreakerState) -> None:
        """Enter ``state`` and start a new generation."""
        self.state = state
        self.generation += 1

    def settled(self, rule: CircuitRule, now: float) -> tuple[BreakerState, float]:
        """The state and cooldown start once an expired probe lease is released (pure)."""
        lease = rule.probe_lease
        if self.state == "half_open" and lease and now >= self.probe_started + lease:
            return "open", self.probe_started + lease
        return self.state, self.opened_at

    def would_admit(self, rule: CircuitRule, now: float) -> bool:
        """Whether ``admit`` would let a caller through now (pure)."""
        if self.state == "closed":
            return True
        state, opened_at = self.settled(rule, now)
        if state == "open":
            return now >= opened_at + rule.cooldown
        return not rule.single_probe

    def cooldown_left(self, rule: CircuitRule, now: float) -> float:
        """Seconds until an open circuit may be probed (0.0 when it is not open)."""
        if self.state != "open":
            return 0.0
        # clamped to the cooldown: float sums (opened_at + cooldown - now) can overshoot it
        return min(rule.cooldown, max(0.0, self.opened_at + rule.cooldown - now))

    def admit(self, rule: CircuitRule, now: float) -> bool | None:
        """Let a caller through: ``False`` an ordinary call, ``True`` a probe, None refused."""
        if self.state == "closed":
            return False
        self._expire_lease(rule, now)
        if self.state == "open":
            if now < self.opened_at + rule.cooldown:
                return None
            self.transition("half_open")
            self.probe_started = now
            self.probe_successes = 0
            if rule.recount_when_probing:
                self.consecutive_failures = 0
            return True
        return None if rule.single_probe else True

    def record(
        self,
        rule: CircuitRule,
        now: float,
        *,
        success: bool,
        hard: bool = True,
        generation: int | None = None,
    ) -> None:
        """Count a result; ``hard`` failures reopen a half-open circuit at once.

        ``generation`` is the one the call was admitted in (None: the current one).
        """
        self._expire_lease(rule, now)
        if generation is not None and generation != self.generation:
            if not success and self.state == "open":
                self.opened_at = max(self.opened_at, now)
            return
        if self.state == "closed":
            self.consecutive_failures = 0 if success else self.consecutive_failures + 1
            if not success and rule.threshold and self.consecutive_failures >= rule.threshold:
                self._open(now)
        elif self.state == "half_open":
            self._record_probe(rule, now, success, hard)

    def lose_probe(self, rule: CircuitRule) -> None:
        """A half-open circuit whose probe will never report: open, its cooldown served."""
        self.transition("open")
        self.opened_at = self.probe_started - rule.cooldown

    def _record_probe(self, rule: CircuitRule, now: float, success: bool, hard: bool) -> None:
        if success:
            self.consecutive_failures = 0
            self.probe_successes += 1
            if self.probe_successes >= rule.probes_to_close:
                self.probe_successes = 0
                self.transition("closed")
            return
        self.consecutive_failures += 1
        self.probe_successes = 0
        if hard or (rule.threshold and self.consecutive_failures >= rule.threshold):
            self._open(now)

    def _open(self, now: float) -> None:
        self.transition("open")
        self.opened_at = now
        self.probe_successes = 0

    def _expire_lease(self, rule: CircuitRule, now: float) -> None:
        state, opened_at = self.settled(rule, now)
        if state != self.state:
            self.transition(state)
            self.opened_at = opened_at


def wall_shift(clock: Callable[[], float], wall: float | None) -> float:
    """What to add to a ``clock`` reading to get wall-clock seconds (``wall`` = now)."""
    return (time.time() if wall is None else wall) - clock()


@record
class ToolBreaker:
    """Open after ``failure_threshold`` consecutive sick failures (0 never opens)."""

    failure_threshold: int = 3
    """Consecutive sick results that open a tool's breaker."""
    recovery_seconds: float = 30.0
    """Seconds open before the next call to the tool is the single probe."""
    probe_timeout: float = 30.0
    """Seconds a probe may go unreported before the breaker is open again (0: no lease)."""

    def __post_init__(self) -> None:
        require_non_negative_fields(self, "failure_threshold", "recovery_seconds", "probe_timeout")


@record
class Admission:
    """Permission to run ``tool`` once; hand it back to ``ToolBreakers.record``."""

    tool: str
    probe: bool
    generation: int


@record
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


class _ToolCircuit(Circuit):
    """A tool's circuit and its health statistics."""

    __slots__ = ("ewma", "failures", "neutral", "ordinary", "successes")

    def __init__(self) -> None:
        super().__init__()
        self.ordinary: Admission | None = None
        """The admission of an ordinary call in the current generation (``admit``)."""
        self.successes = 0
        self.failures = 0
        self.neutral = 0
        self.ewma = 1.0

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


def _restored(data: Mapping[str, Any], shift: float) -> _ToolCircuit:
    circuit = _ToolCircuit()
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
        self.config = config = config or ToolBreaker()
        self._rule = CircuitRule(
            threshold=config.failure_threshold,
            cooldown=config.recovery_seconds,
            probe_lease=config.probe_timeout,
        )
        self._clock = clock
        self._circuits: dict[str, _ToolCircuit] = {}

    def __repr__(self) -> str:
        return f"ToolBreakers({self.config!r})"

    def admit(self, tool: str) -> Admission | None:
        """Ask to run ``tool`` now; None means refused (the breaker is open or probing).

        After the cooldown the first caller becomes the single probe; until its result is
        recorded (or its lease ends) every other caller is refused.
        """
        circuit = self._circuits.get(tool)
        if circuit is None:
            circuit = self._circuits[tool] = _ToolCircuit()
        if circuit.state == "closed":  # the common case, without reading the clock
            admission = circuit.ordinary
            if admission is None or admission.generation != circuit.generation:
                admission = circuit.ordinary = Admission(tool, False, circuit.generation)
            return admission  # one immutable admission per closed generation, shared
        probe = circuit.admit(self._rule, self._clock())
        return None if probe is None else Admission(tool, probe, circuit.generation)

    def would_admit(self, tool: str) -> bool:
        """Whether ``admit(tool)`` would succeed now, without taking the probe slot."""
        circuit = self._circuits.get(tool)
        if circuit is None or circuit.state == "closed":
            return True
        return circuit.would_admit(self._rule, self._clock())

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
            circuit = self._circuits[admission.tool] = _ToolCircuit()
        if (
            outcome == "success"
            and circuit.state == "closed"
            and admission.generation == circuit.generation
        ):  # the common case: count() and the closed success below, without their calls
            circuit.successes += 1
            circuit.ewma = _EWMA_KEEP * circuit.ewma + _EWMA_GAIN  # count()'s, sample 1.0
            circuit.consecutive_failures = 0
            return
        circuit.count(outcome)
        if (
            outcome != "sick"
            and circuit.state == "closed"
            and admission.generation == circuit.generation
        ):  # what record() does for a success while closed: no clock, nothing to expire
            circuit.consecutive_failures = 0
            return
        circuit.record(
            self._rule,
            self._clock(),
            success=outcome != "sick",
            generation=admission.generation,
        )

    def release(self, admission: Admission) -> None:
        """Hand back an admission whose call never produced a result (e.g. it was cancelled).

        A released probe returns the breaker to open with its cooldown already served, so the
        next caller probes at once. Other admissions need no release.
        """
        circuit = self._circuits.get(admission.tool)
        if circuit is None or not admission.probe:
            return
        if circuit.state == "half_open" and circuit.generation == admission.generation:
            circuit.lose_probe(self._rule)

    def snapshot(self, *, wall: float | None = None) -> dict[str, Any]:
        """Every breaker as plain JSON data, times as wall-clock seconds (``wall`` = now)."""
        shift = wall_shift(self._clock, wall)
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
        shift = -wall_shift(self._clock, wall)
        try:
            circuits = {str(name): _restored(c, shift) for name, c in data["tools"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a ToolBreakers snapshot: {exc!r}") from exc
        for circuit in circuits.values():
            if circuit.state == "half_open":  # its probe died with its process
                circuit.lose_probe(self._rule)
        self._circuits = circuits

    def health(self, tool: str) -> ToolHealth:
        """The state and statistics of ``tool`` (a tool never seen is healthy and closed)."""
        circuit = self._circuits.get(tool) or _ToolCircuit()
        state, _ = circuit.settled(self._rule, self._clock())
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
