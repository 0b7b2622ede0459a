"""The one limits gate of an agent: every line a run may not cross, in one place.

Checked before each request (``before_request``: ``max_turns``, then the ``Budget`` lines:
tokens, output tokens, turns, tool calls, cost, wall clock) and when a turn asks for tool calls
(``admit_tools``: ``max_tool_calls_per_turn`` and ``max_tool_calls``); fed after each response
(``spent``) and each completed turn (``turn_done``). One counter of a run's tool calls serves
both the cap and the budget.

The budget's own arithmetic is ``safety.budget.BudgetGate`` (a child agent's gate is a
``SharedBudget`` that also counts in its parent's). If that gate raises, it fails closed like
the tool breaker: the run ends with ``LockPoisoned("budget")`` raised from the gate's exception.
Not ``BudgetExhausted``: nothing is known to be spent, what is known is that the spend can no
longer be trusted, and a gate that cannot count must not let requests through uncounted. The
next run's ``begin`` rebuilds the per-run counts, so it trusts the gate again.

A run given its own budget (``run(..., usage_limits=Budget(...))``) gets a gate of its own for
that run; ``end_run`` gives the session's gate back. A budget with no line (the default) makes
no gate: its spend is counted here, in a few numbers, until somebody asks for the gate
(``budget``), which is then made holding what was counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentloop._util.lazy import lazy_module
from agentloop.config import RunConfig
from agentloop.errors import LockPoisoned, MaxTurnsExceeded, ToolLimitReached
from agentloop.messages import Usage
from agentloop.observers import EventBus, Observer
from agentloop.run import Run
from agentloop.safety.budget import Budget, BudgetGate

if TYPE_CHECKING:
    from agentloop import events as ev
else:  # the event classes load when somebody first listens
    ev = lazy_module("agentloop.events")

__all__ = ["Limits"]


class Limits(EventBus):
    """Turns, tool calls, tokens, cost and wall clock of one agent's runs; its event channel.

    A session's limits gate and its event channel always come together, one of each per
    session: one object (an ``EventBus`` of ``observers``, stamping events with ``session_id``)
    for the collector to track, not two. A session's is its dispatcher itself (``SafetyState``
    and ``Dispatcher`` subclass it). Nothing it holds refers back to it.
    """

    __slots__ = (
        "_begun", "_calls", "_continued_budget", "_continued_calls", "_gate", "_kept", "_lines",
        "_output_tokens", "_started", "_tokens", "_turns", "budget_on", "max_tool_calls",
        "max_turns", "monotonic", "per_turn", "tool_calls",
    )  # fmt: skip

    def __init__(
        self,
        config: RunConfig,
        observers: Sequence[Observer],
        session_id: str,
        clock: Callable[[], float],
        draws: bool | None = None,
    ) -> None:
        """``draws``: whether ``config.budget`` draws a line, when the caller knows (else asked)."""
        if observers:
            EventBus.__init__(self, observers, session_id)
        else:  # ``EventBus.__init__`` with no observer, written out: a call fewer per session
            self.session_id, self.agent, self.run, self.gate = session_id, None, None, None
            self._observers = self._listeners = ()
            self.turn, self.active = 0, False
        self.max_turns = config.max_turns
        self.max_tool_calls = config.max_tool_calls
        self.per_turn = config.max_tool_calls_per_turn
        self._lines = config.budget
        if draws is None:  # (a dispatcher knows it from its agent: asked once per agent)
            draws = BudgetGate._draws(config.budget)
        self._gate: BudgetGate | None = (  # its first run begins it
            BudgetGate._unbegun(config.budget, clock) if draws else None
        )
        """The gate counting the runs; None while the budget has no line: counted here."""
        self._started = clock()
        """When the run began, while counted here (before the first run: when this was made)."""
        self._begun = False
        """Whether a run began while counted here (else counting refuses, as an unbegun gate)."""
        self._tokens = self._output_tokens = self._turns = self._calls = 0
        """A run's spend, while counted here (what the gate's ``spent`` would say)."""
        self.monotonic = clock
        """The monotonic clock's reading (the system's ``time.monotonic`` for the system's)."""
        self._kept: tuple[BudgetGate | None] | None = None
        """The session's gate while a run with a budget of its own runs."""
        self.budget_on = True
        """False once the gate raised this run: it is poisoned until the next ``begin``."""
        self.tool_calls = 0
        """Tool calls this run has asked for (what ``max_tool_calls`` caps)."""
        self._continued_budget: dict[str, Any] | None = None
        self._continued_calls: int | None = None

    @property
    def budget(self) -> BudgetGate:
        """The gate counting the runs' spend (the config's budget, or a run's own).

        A budget with no line is counted here, without a gate, until somebody asks for it:
        then a gate is made that holds what was counted, and counts from then on.
        """
        gate = self._gate
        if gate is None:
            gate = self._gate = BudgetGate._unbegun(self._lines, self.monotonic)
            if self._begun:  # what the run spent so far
                spent = (self._tokens, self._output_tokens, self._turns, self._calls)
                gate._counted(self._started, *spent)
            else:  # no run began: nothing spent, read-only (as the session's gate was)
                gate._counted(self._started)
        return gate

    @budget.setter
    def budget(self, gate: BudgetGate) -> None:
        self._gate = gate

    def begin(self, lines: Budget | None = None) -> None:
        """Run start: zero the counters (a continued run keeps what it had spent).

        ``lines``: this run's budget instead of the config's (``run(..., usage_limits=...)``).
        """
        if lines is not None:
            self._kept = (self._gate,) if self._kept is None else self._kept
            self._gate = BudgetGate(lines, self.monotonic)
        budget, self._continued_budget = self._continued_budget, None
        calls, self._continued_calls = self._continued_calls, None
        self.tool_calls = calls or 0
        self.budget_on = True
        if self._gate is None and budget is None:  # no line: counted here
            self._started, self._begun = self.monotonic(), True
            self._tokens = self._output_tokens = self._turns = self._calls = 0
            return
        try:
            if budget is None:
                self.budget.begin()
            else:
                self.budget.restore(budget)
        except Exception as exc:
            raise self._poisoned() from exc

    def end_run(self) -> None:
        """Run end: a run that had a budget of its own gives the session's gate back."""
        if self._kept is not None:
            self._gate, self._kept = self._kept[0], None

    def continue_run(self, run: Run[Any], budget: Mapping[str, Any] | None = None) -> None:
        """``continue_run``: the next ``begin`` keeps ``run``'s spend instead of zeroing it.

        ``budget``: the stored gate snapshot. The snapshot of a turn's commit point predates
        that turn's count, so the turns and tool calls come from the run record.
        """
        self._continued_calls = sum(len(t.tool_calls) for t in run.turns)
        if budget is not None:
            data = dict(budget)
            data["spent"] = {**data["spent"], "turns": len(run.turns)}
            self.budget.restore(data)
            self._continued_budget = self.budget.snapshot()

    def before_request(self, run: Run[Any], turn: int) -> None:
        """Refuse the next request past a line; warn once per budget dimension nearing one."""
        if turn >= self.max_turns:
            raise MaxTurnsExceeded(self.max_turns)
        if not self.budget_on:
            raise LockPoisoned("budget")
        gate = self._gate  # no line to check (the default budget): no call; a subclass (a
        if gate is None or (type(gate) is BudgetGate and not gate.checks):  # child's shared
            return  # gate) always checks
        try:
            warnings, stop = gate.pre_request()
        except Exception as exc:
            raise self._poisoned() from exc
        for warning in warnings:
            self.emit(
                ev.BudgetWarning(run.id, turn, warning.dimension, warning.spent, warning.limit)
            )
        if stop is not None:
            raise stop

    def admit_tools(self, count: int) -> None:
        """A turn asks for ``count`` tool calls: refuse past a cap, else count them."""
        per_turn = self.per_turn
        if per_turn is not None and count > per_turn:
            raise ToolLimitReached(
                f"turn tool-call limit of {per_turn} reached ({count} calls requested)"
            )
        total = self.max_tool_calls
        if total is not None and self.tool_calls + count > total:
            raise ToolLimitReached(
                f"run tool-call limit of {total} reached "
                f"({self.tool_calls} made, {count} more requested)"
            )
        self.tool_calls += count
        if not self.budget_on:
            raise LockPoisoned("budget")
        gate = self._gate
        if gate is None:
            if self._begun:
                self._calls += count
                return
            gate = self.budget  # no run began: the unbegun gate refuses to count
        try:
            gate.record_tool_calls(count)
        except Exception as exc:
            raise self._poisoned() from exc

    def spent(self, usage: Usage, model: str) -> None:
        """Account a reply's usage (tokens, cost)."""
        if not self.budget_on:
            raise LockPoisoned("budget")
        gate = self._gate
        if gate is None:  # no line (no cost line either: nothing to price)
            if self._begun:
                output = usage.output_tokens
                self._tokens += usage.input_tokens + output
                self._output_tokens += output
                return
            gate = self.budget  # no run began: the unbegun gate refuses to count
        try:
            gate.record_usage(usage, model)
        except Exception as exc:
            raise self._poisoned() from exc

    def turn_done(self) -> None:
        """Account a completed turn."""
        if not self.budget_on:
            raise LockPoisoned("budget")
        gate = self._gate
        if gate is None:
            if self._begun:
                self._turns += 1
                return
            gate = self.budget  # no run began: the unbegun gate refuses to count
        try:
            gate.record_turn()
        except Exception as exc:
            raise self._poisoned() from exc

    def _poisoned(self) -> LockPoisoned:
        """The gate raised: poisoned until the next ``begin``, the run ends (fail closed).

        Each step calls the gate in a ``try`` of its own, not through a helper taking the
        step: a bound method and an argument tuple fewer per step (eight steps a run).
        """
        self.budget_on = False
        return LockPoisoned("budget")
