"""The budget gate: refuse the next request once a run has spent its budget.

A ``Budget`` draws hard lines per run (tokens, output tokens, completed turns, wall-clock
seconds, tool calls, US dollars); ``None`` or ``0`` disables a line. The ``BudgetGate`` is
checked before every model request: spending happens after a response, so the request that
crosses a line always completes and the *next* check refuses with ``BudgetExhausted``. Each
dimension warns once per run at its soft line, ``floor(limit * soft_fraction)``.
``snapshot()`` / ``restore()`` carry a run's spend into another process (a continued run); the
wall-clock line counts the time the run was running, not the time its process was dead.

The cost line (``cost_usd``) prices each response with ``agentloop.pricing``: ``prices[model]``
when given, else the ``genai-prices`` table (cached input at its own rate). It fails closed: a
response from a model nobody can price makes the next check refuse with a
``ConfigurationError`` naming the model (it is never counted as free), for every later run of
the gate too.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from agentloop._util.peers import hint_init
from agentloop._util.slots import record
from agentloop.errors import AgentLoopError, BudgetExhausted, ConfigurationError
from agentloop.messages import Usage
from agentloop.pricing import Price, estimate_cost, table_available
from agentloop.safety._config import require_non_negative

__all__ = ["DIMENSIONS", "Budget", "BudgetGate", "BudgetWarning", "Price", "soft_line"]

DIMENSIONS = ("tokens", "output_tokens", "turns", "wall_clock", "tool_calls", "cost_usd")
"""Every budget dimension, in the order the gate checks them."""


_TOKENS = "tokens= caps input + output tokens together (output_tokens= the output alone)"


@hint_init(
    {
        "request_limit": "turns= (completed turns; RunConfig(max_turns=) caps model calls)",
        "requests_limit": "turns= (completed turns; RunConfig(max_turns=) caps model calls)",
        "tool_calls_limit": "tool_calls=",
        "total_tokens_limit": "tokens=",
        "input_tokens_limit": _TOKENS,
        "request_tokens_limit": _TOKENS,
        "output_tokens_limit": "output_tokens=",
        "response_tokens_limit": "output_tokens=",
        "max_turns": "turns= here, or RunConfig(max_turns=) on the agent",
    }
)
@record
class Budget:
    """Hard lines per run (None or 0 disables a line); one warning each at ``soft_fraction``.

    ``cost_usd`` prices responses from the ``genai-prices`` table (extra ``cost``) and from
    ``prices`` (keyed by the exact model name a response reports; an entry wins over the
    table). Without the table, ``cost_usd`` needs ``prices``.
    """

    tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    wall_clock: float | None = None
    tool_calls: int | None = None
    soft_fraction: float = 0.8
    cost_usd: float | None = None
    prices: Mapping[str, Price] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        for name in DIMENSIONS:
            value = getattr(self, name)
            if value is not None:
                require_non_negative("Budget", name, value)
        if not 0.0 < self.soft_fraction <= 1.0:
            raise ConfigurationError(
                f"Budget.soft_fraction must be in (0.0, 1.0], got {self.soft_fraction!r}",
                field="soft_fraction",
            )
        if self.prices is not None:
            for model, price in self.prices.items():
                if not isinstance(price, Price):
                    raise ConfigurationError(
                        f"Budget.prices[{model!r}] must be a Price, got {price!r}", field="prices"
                    )
            object.__setattr__(self, "prices", dict(self.prices))  # a private copy; pickles
        if self.cost_usd and not self.prices and not table_available():
            raise ConfigurationError(
                "Budget.cost_usd needs prices: install the price table "
                "(pip install 'agentloop[cost]') or pass prices={model: Price(...)}",
                field="prices",
            )

    def limit(self, dimension: str) -> float | None:
        """The hard line of ``dimension``; None when the line is disabled (None or 0)."""
        value: float | None = getattr(self, dimension)
        return value or None


def soft_line(limit: float, fraction: float) -> float:
    """``floor(limit * fraction)`` for whole-number limits, computed exactly; else the product.

    The fraction is taken at its shortest decimal form (0.8 is exactly 4/5), so the soft line
    never exceeds the hard one: ``soft_line(200, 0.8) == 160``, ``soft_line(1, 0.8) == 0``.
    """
    if isinstance(limit, int):
        return math.floor(limit * Fraction(repr(fraction)))
    return min(limit * fraction, limit)


@record
class BudgetWarning:
    """A dimension crossed its soft line (or its hard line before warning) in this run."""

    dimension: str
    spent: float
    limit: float


_TOKEN_LINES = frozenset({"tokens", "output_tokens", "cost_usd"})
_NONE_WARNED: set[str] = set()  # never added to: a gate holds it until its first warning
_NONE_UNPRICED: list[str] = []  # never appended to: a gate holds it until a model is unpriced
_NO_PRICES: Mapping[str, Price] = MappingProxyType({})
_NOTHING_SPENT: dict[str, float] = {**dict.fromkeys(DIMENSIONS, 0), "cost_usd": 0.0}
"""A run's spend at its start, copied per run (never changed itself)."""
_UNBEGUN: Mapping[str, float] = MappingProxyType(_NOTHING_SPENT)
"""An unbegun gate's spend (``BudgetGate._unbegun``): read-only, so nothing counts into it."""
_NO_WARNINGS: list[BudgetWarning] = []  # never appended to: a gate without lines returns it


def _lines_of(budget: Budget) -> tuple[tuple[str, float, float], ...]:
    """A budget's lines ``(dimension, hard, soft)``; cached, as every session's gate asks."""
    found = _LINES.get(id(budget))
    if found is not None and found[0] is budget:
        return found[1]
    lines = tuple(
        (dimension, limit, soft_line(limit, budget.soft_fraction))
        for dimension in DIMENSIONS
        if (limit := budget.limit(dimension)) is not None
    )
    if len(_LINES) >= 64:
        _LINES.clear()
    _LINES[id(budget)] = (budget, lines)  # holds the budget: its id stays its own
    return lines


_LINES: dict[int, tuple[Budget, tuple[tuple[str, float, float], ...]]] = {}


@functools.cache
def _default_budget() -> Budget:
    """The budget of a gate given none: one shared ``Budget()`` (it is frozen)."""
    return Budget()


class BudgetGate:
    """Counts a run's spending and decides, before each request, whether it may be sent.

    Args:
        budget: the lines.
        clock: monotonic seconds for the wall-clock line; inject a fake in tests.
    """

    def __init__(
        self, budget: Budget | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._arm(budget, clock)
        self.begin()

    def _arm(self, budget: Budget | None, clock: Callable[[], float]) -> None:
        self.budget = budget = budget or _default_budget()
        self._clock = clock
        self._lines = _lines_of(budget)
        self._prices: Mapping[str, Price] = dict(budget.prices) if budget.prices else _NO_PRICES
        self._unpriced: list[str] = _NONE_UNPRICED
        self.checks = bool(self._lines)
        """Whether ``pre_request`` has anything to check: a line, or a model it cannot price."""
        """Models no one could price: the gate refuses (kept); a list of its own at the first."""

    @classmethod
    def _unbegun(cls, budget: Budget | None, clock: Callable[[], float]) -> BudgetGate:
        """A gate whose first ``begin`` is its first run's (``Limits`` begins every run).

        Until then its spend is nothing, read from a shared read-only mapping (no dict of its
        own per session): counting before ``begin`` raises, it never counts into the mapping.
        """
        gate = cls.__new__(cls)
        gate._arm(budget, clock)
        gate._started = clock()
        gate._spent = _UNBEGUN  # type: ignore[assignment]
        gate._warned = _NONE_WARNED
        return gate

    @staticmethod
    def _draws(budget: Budget | None) -> bool:
        """Whether ``budget`` draws a line (a gate with none never refuses nor warns)."""
        return budget is not None and bool(_lines_of(budget))

    def __repr__(self) -> str:
        return f"BudgetGate({self.budget!r})"

    def begin(self) -> None:
        """Start a run: zero every counter and re-arm every warning."""
        self._started = self._clock()
        self._spent: dict[str, float] = _NOTHING_SPENT.copy()
        self._warned: set[str] = _NONE_WARNED  # a set of its own at the first warning

    def _counted(self, started: float, *spent: int) -> None:
        """The gate ``Limits`` counted for (``spent``: tokens, output tokens, turns, tool calls).

        Begun at ``started`` with that spend; with none, unbegun (made at ``started``).
        """
        self._started = started
        if spent:
            tokens, output_tokens, turns, tool_calls = spent
            self._spent = _NOTHING_SPENT.copy()
            self._spent.update(
                tokens=tokens, output_tokens=output_tokens, turns=turns, tool_calls=tool_calls
            )

    def snapshot(self) -> dict[str, Any]:
        """This run's spend, warnings sent and elapsed seconds, as plain JSON data."""
        return {
            "spent": dict(self._spent),
            "warned": sorted(self._warned),
            "elapsed": self._clock() - self._started,
            "unpriced": list(self._unpriced),
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        """Replace the run's spend with a ``snapshot()``; raises ``ValueError`` if malformed."""
        try:
            spent = {d: data["spent"][d] for d in DIMENSIONS}
            if not all(isinstance(v, int | float) for v in spent.values()):
                raise TypeError("a spend is not a number")
            warned = {str(d) for d in data["warned"]}
            started = self._clock() - float(data["elapsed"])
            unpriced = [str(m) for m in data.get("unpriced", ())]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a BudgetGate snapshot: {exc!r}") from exc
        self._spent, self._warned, self._started = spent, warned, started
        for model in unpriced:
            self._note_unpriced(model)

    def spent(self, dimension: str) -> float:
        """What this run has spent on ``dimension`` so far (wall clock in seconds)."""
        if dimension == "wall_clock":
            return self._clock() - self._started
        return self._spent[dimension]

    def wall_clock_left(self) -> tuple[float, float] | None:
        """The wall-clock line's ``(spent, limit)`` in seconds, or None without that line.

        What a rate governor's wait is measured against (SPEC 25); an agent run as a tool
        answers with its parent's line when that one ends first (``SharedBudget``).
        """
        limit = self.budget.wall_clock
        return None if not limit else (self.spent("wall_clock"), limit)

    def record_usage(self, usage: Usage, model: str) -> None:
        """Count a response's provider-reported usage (and its cost when priced)."""
        self._spent["tokens"] += usage.input_tokens + usage.output_tokens
        self._spent["output_tokens"] += usage.output_tokens
        if self.budget.cost_usd:
            self._spent["cost_usd"] += self._cost(usage, model)

    def record_turn(self) -> None:
        """Count one completed assistant turn."""
        self._spent["turns"] += 1

    def record_tool_calls(self, n: int) -> None:
        """Count ``n`` dispatched tool calls."""
        self._spent["tool_calls"] += n

    def pre_request(self) -> tuple[list[BudgetWarning], AgentLoopError | None]:
        """Check every line before a request.

        Returns:
            The warnings not sent yet this run (a dimension crossing its hard line also
            warns if it had not), and the first exhausted dimension's ``BudgetExhausted``
            (refuse the request) or None (send it). A cost line that met a model it cannot
            price refuses with ``ConfigurationError`` (field ``prices``) naming the model.
        """
        if not self._lines and not self._unpriced:
            return _NO_WARNINGS, None  # no line to check (the default budget)
        warnings: list[BudgetWarning] = []
        exhausted: AgentLoopError | None = self._unpriced_error()
        for dimension, limit, soft in self._lines:
            spent = self.spent(dimension)
            over = spent >= limit
            if over and exhausted is None:
                exhausted = BudgetExhausted(dimension, spent, limit)
            if dimension not in self._warned and (over or (spent >= soft and spent > 0)):
                if self._warned is _NONE_WARNED:
                    self._warned = set()
                self._warned.add(dimension)
                warnings.append(BudgetWarning(dimension, spent, limit))
        return warnings, exhausted

    def counts_tokens(self) -> bool:
        """Whether a line of this gate is spent by tokens (``tokens``, ``output_tokens``, cost)."""
        return any(d in _TOKEN_LINES for d, _, _ in self._lines)

    def exhausted(self) -> AgentLoopError | None:
        """The first exhausted dimension's ``BudgetExhausted``, sending no warning.

        An unpriced model under a cost line refuses first (``ConfigurationError``).
        """
        unpriced = self._unpriced_error()
        if unpriced is not None:
            return unpriced
        for dimension, limit, _ in self._lines:
            spent = self.spent(dimension)
            if spent >= limit:
                return BudgetExhausted(dimension, spent, limit)
        return None

    def _cost(self, usage: Usage, model: str) -> float:
        cost = estimate_cost(usage, model, prices=self._prices)
        if cost is not None:
            return cost
        self._note_unpriced(model)
        return 0.0  # not free: ``_unpriced_error`` refuses the next request

    def _note_unpriced(self, model: str) -> None:
        """Keep ``model`` among those no one could price (once)."""
        if model not in self._unpriced:
            if self._unpriced is _NONE_UNPRICED:
                self._unpriced = []
            self._unpriced.append(model)
            self.checks = True

    def _unpriced_error(self) -> ConfigurationError | None:
        if not self._unpriced or not self.budget.cost_usd:
            return None
        model = self._unpriced[0]
        return ConfigurationError(
            f"Budget.cost_usd cannot price model {model!r}: the price table does not know it "
            f"and Budget.prices has no entry; refusing the next request rather than counting "
            f"it as free (pass prices={{{model!r}: Price(...)}})",
            field="prices",
        )
