"""Evaluators: pydantic-evals' built-ins by name, ours for tool use and spend, and the base class.

An evaluator is a dataclass whose ``evaluate(ctx)`` (sync or async) returns a ``bool`` (an
assertion), a number (a score), a ``str`` (a label), an ``EvaluationReason`` (one of those with
its reason) or a mapping of names to those. The dataclass fields are what a dataset file writes
(``- Name``, ``- Name: arg``, ``- Name: {kw: v}``), as pydantic-evals does.

The trajectory of a case is the tool calls of its runs, in order (the typed answer's
``final_result`` call is the output, not a step). ``Trajectory``'s modes are ADK's: ``exact``
(only these calls, in this order), ``in_order`` (these, in this order, others between) and
``any_order`` (these, in any order, others allowed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Literal

from agentloop.engine.output import FINAL_RESULT
from agentloop.run import Run

__all__ = [
    "BUILTIN_EVALUATORS",
    "Contains",
    "Equals",
    "EqualsExpected",
    "EvaluationReason",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorContext",
    "IsInstance",
    "MaxCost",
    "MaxDuration",
    "MaxTurns",
    "ToolCalled",
    "Trajectory",
    "trajectory_of",
]


@dataclass(frozen=True)
class EvaluationReason:
    """A value (``bool``, number or ``str``) with the reason it was given."""

    value: bool | int | float | str
    reason: str | None = None


@dataclass(frozen=True)
class EvaluationResult:
    """One named result in a report: its value and reason."""

    value: bool | int | float | str
    reason: str | None = None


@dataclass(frozen=True)
class EvaluatorContext:
    """What an evaluator sees of one case: its fields, the output, the time it took, its runs."""

    name: str
    inputs: Any
    metadata: Any
    expected_output: Any
    output: Any
    duration: float
    runs: Sequence[Run[Any]] = ()


class Evaluator:
    """The base of every evaluator: subclass it (as a dataclass) and define ``evaluate(ctx)``.

    ``evaluation_name`` (a field or attribute) names its result; the class name otherwise.
    """

    inline: ClassVar[bool] = False
    """Runs on the event loop without a thread (the built-ins: pure and quick)."""

    def evaluate(self, ctx: EvaluatorContext) -> Any:
        """Judge one case (sync or async)."""
        raise NotImplementedError(f"{type(self).__name__} must define evaluate(ctx)")

    def result_name(self) -> str:
        """The name its result is reported under."""
        return getattr(self, "evaluation_name", None) or type(self).__name__

    def spec(self) -> Any:
        """How a dataset file writes it: ``Name``, ``{Name: arg}`` or ``{Name: {kw: v}}``."""
        name = type(self).__name__
        if not dataclasses.is_dataclass(self):
            return name
        given = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.init and not _is_default(f, getattr(self, f.name))
        }
        first = next((f.name for f in dataclasses.fields(self) if f.init and not f.kw_only), None)
        if not given:
            return name
        if len(given) == 1 and first in given:
            return {name: given[first]}
        return {name: given}


def _is_default(f: dataclasses.Field[Any], value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return bool(value == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(value == f.default_factory())
    return False


@dataclass(frozen=True)
class Equals(Evaluator):
    """The output equals ``value``."""

    value: Any
    _: KW_ONLY
    evaluation_name: str | None = None
    inline: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> bool:
        """``output == value``."""
        return bool(ctx.output == self.value)


@dataclass(frozen=True)
class EqualsExpected(Evaluator):
    """The output equals the case's ``expected_output`` (no expectation: no result)."""

    evaluation_name: str | None = None
    inline: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> bool | dict[str, Any]:
        """``output == expected_output``."""
        if ctx.expected_output is None:
            return {}
        return bool(ctx.output == ctx.expected_output)


@dataclass(frozen=True)
class Contains(Evaluator):
    """The output contains ``value``: a substring, an item or a mapping's key/value pairs."""

    value: Any
    _: KW_ONLY
    case_sensitive: bool = True
    as_strings: bool = False
    evaluation_name: str | None = None
    inline: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        """Whether the output holds ``value``, and if not, why."""
        output, value = ctx.output, self.value
        if self.as_strings or isinstance(output, str):
            output, value = str(output), str(value)
            if not self.case_sensitive:
                output, value = output.lower(), value.lower()
            found = value in output
        elif isinstance(output, Mapping) and isinstance(value, Mapping):
            found = all(k in output and output[k] == v for k, v in value.items())
        else:
            try:
                found = value in output
            except TypeError:
                return EvaluationReason(False, f"cannot look for {value!r} in {type(output)}")
        return EvaluationReason(found, None if found else f"{self.value!r} not in the output")


@dataclass(frozen=True)
class IsInstance(Evaluator):
    """The output is an instance of a class named ``type_name`` (any class in its MRO)."""

    type_name: str
    evaluation_name: str | None = None
    inline: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        """Whether a class of the output's MRO has that name."""
        names = [cls.__name__ for cls in type(ctx.output).__mro__]
        found = self.type_name in names
        why = None if found else f"output is a {type(ctx.output).__name__}, not {self.type_name}"
        return EvaluationReason(found, why)


@dataclass(frozen=True)
class MaxDuration(Evaluator):
    """The task took at most ``seconds``."""

    seconds: float
    inline: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        """``duration <= seconds``."""
        ok = ctx.duration <= float(self.seconds)
        return EvaluationReason(ok, None if ok else f"took {ctx.duration:.3f} s")


def trajectory_of(runs: Sequence[Run[Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The (name, arguments) of every tool call the runs made, in order (no ``final_result``)."""
    return [
        (call.name, dict(call.arguments))
        for run in runs
        for turn in run.turns
        for call in turn.tool_calls
        if call.name != FINAL_RESULT
    ]


def _arguments_match(expected: Mapping[str, Any] | None, got: Mapping[str, Any], how: str) -> bool:
    if expected is None or how == "ignore":
        return True
    if how == "exact":
        return dict(expected) == dict(got)
    return all(k in got and got[k] == v for k, v in expected.items())


@dataclass(frozen=True)
class ToolCalled(Evaluator):
    """A tool was called (with ``arguments`` as a subset), ``times`` times exactly if given."""

    name: str
    _: KW_ONLY
    arguments: dict[str, Any] | None = None
    times: int | None = None
    inline: ClassVar[bool] = True

    def result_name(self) -> str:
        """``ToolCalled[name]``."""
        return f"ToolCalled[{self.name}]"

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        """Count the matching calls of the case's runs."""
        calls = trajectory_of(ctx.runs)
        count = sum(
            1
            for name, args in calls
            if name == self.name and _arguments_match(self.arguments, args, "subset")
        )
        ok = count == self.times if self.times is not None else count > 0
        wanted = f"{self.times} time(s)" if self.times is not None else "at least once"
        names = [name for name, _ in calls]
        return EvaluationReason(ok, f"called {count} time(s), wanted {wanted}; calls: {names}")


def _step(item: Any) -> tuple[str, dict[str, Any] | None]:
    if isinstance(item, str):
        return item, None
    if isinstance(item, Mapping) and isinstance(item.get("name"), str):
        arguments = item.get("arguments")
        return item["name"], dict(arguments) if isinstance(arguments, Mapping) else None
    raise ValueError(f"a trajectory step is a tool name or {{name, arguments}}, got {item!r}")


@dataclass(frozen=True)
class Trajectory(Evaluator):
    """The case's tool calls follow ``calls`` (``mode``: exact, in_order, any_order)."""

    calls: list[Any] = field(default_factory=list)
    _: KW_ONLY
    mode: Literal["exact", "in_order", "any_order"] = "exact"
    arguments: Literal["subset", "exact", "ignore"] = "subset"
    inline: ClassVar[bool] = True

    def __post_init__(self) -> None:
        """Check the steps and the modes now, not in the middle of an evaluation."""
        for item in self.calls:
            _step(item)
        if self.mode not in ("exact", "in_order", "any_order"):
            raise ValueError(f"mode must be exact, in_order or any_order, got {self.mode!r}")
        if self.arguments not in ("subset", "exact", "ignore"):
            raise ValueError(f"arguments must be subset, exact or ignore, got {self.arguments!r}")

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        """Compare the expected steps with the calls made."""
        wanted = [_step(item) for item in self.calls]
        got = trajectory_of(ctx.runs)
        problem = getattr(self, f"_{self.mode}")(wanted, got)
        return EvaluationReason(problem is None, problem or f"{self.mode}: {[n for n, _ in got]}")

    def _fits(self, step: tuple[str, dict[str, Any] | None], call: tuple[str, Any]) -> bool:
        return step[0] == call[0] and _arguments_match(step[1], call[1], self.arguments)

    def _exact(self, wanted: list[Any], got: list[Any]) -> str | None:
        for index, (step, call) in enumerate(zip(wanted, got, strict=False)):
            if not self._fits(step, call):
                return f"call {index + 1} is {call[0]}({call[1]}), expected {step[0]}"
        if len(wanted) != len(got):
            return f"{len(got)} call(s) made, {len(wanted)} expected: {[n for n, _ in got]}"
        return None

    def _in_order(self, wanted: list[Any], got: list[Any]) -> str | None:
        position = 0
        for step in wanted:
            while position < len(got) and not self._fits(step, got[position]):
                position += 1
            if position == len(got):
                return f"{step[0]} not called in order: {[n for n, _ in got]}"
            position += 1
        return None

    def _any_order(self, wanted: list[Any], got: list[Any]) -> str | None:
        left = list(got)
        for step in wanted:
            match = next((i for i, call in enumerate(left) if self._fits(step, call)), None)
            if match is None:
                return f"{step[0]} not called: {[n for n, _ in got]}"
            del left[match]
        return None


@dataclass(frozen=True)
class MaxTurns(Evaluator):
    """The case's runs took at most ``n`` turns (model calls) in all."""

    n: int
    inline: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        """Total turns <= n."""
        turns = sum(len(run.turns) for run in ctx.runs)
        return EvaluationReason(turns <= self.n, f"{turns} turn(s)")


@dataclass(frozen=True)
class MaxCost(Evaluator):
    """The case's runs cost at most ``usd``; an unknown cost fails."""

    usd: float
    inline: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        """Total cost <= usd (an unpriced model's cost is unknown: a failure)."""
        costs = [run.cost for run in ctx.runs]
        if any(cost is None for cost in costs):
            return EvaluationReason(False, "cost unknown (a model without a price)")
        total = sum(c for c in costs if c is not None)
        return EvaluationReason(total <= self.usd, f"cost ${total:.6f}")


BUILTIN_EVALUATORS: tuple[type[Evaluator], ...] = (
    Equals,
    EqualsExpected,
    Contains,
    IsInstance,
    MaxDuration,
    ToolCalled,
    Trajectory,
    MaxTurns,
    MaxCost,
)
