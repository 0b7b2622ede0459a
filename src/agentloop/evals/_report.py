"""``EvaluationReport``: what an evaluation found, per case, in totals, and against a baseline.

A report is plain data: ``to_json()`` writes it and ``EvaluationReport.from_json()`` reads it
back (outputs, inputs and metadata as JSON values), so a report saved by CI is tomorrow's
baseline. ``diff(baseline)`` pairs cases by name and repeat: a regression passed before and
fails now, a fix the other way round; ``score_deltas`` is the change of each score's mean.
``render()`` (a rich table) and ``to_html()`` (one self-contained page) are in ``_render``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloop.evals._evaluators import EvaluationResult
from agentloop.messages import Usage

__all__ = ["EvaluationReport", "ReportCase", "ReportDiff", "ReportTotals"]

FORMAT = "agentloop-eval-report"


@dataclass
class ReportCase:
    """One case (one repeat of it): its fields, what came out, and every verdict."""

    name: str
    inputs: Any
    metadata: Any = None
    expected_output: Any = None
    repeat: int = 1
    output: Any = None
    assertions: dict[str, EvaluationResult] = field(default_factory=dict)
    scores: dict[str, EvaluationResult] = field(default_factory=dict)
    labels: dict[str, EvaluationResult] = field(default_factory=dict)
    evaluator_failures: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    error_message: str | None = None
    duration: float = 0.0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    run_ids: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No task error, no evaluator failure, every assertion true."""
        if self.error is not None or self.evaluator_failures:
            return False
        return all(result.value is True for result in self.assertions.values())

    def failures(self) -> list[str]:
        """Each reason it did not pass, one line each."""
        lines = [f"error {self.error}: {self.error_message}"] if self.error else []
        lines += [f"{name}: {text}" for name, text in self.evaluator_failures.items()]
        lines += [
            f"{name} failed" + (f": {result.reason}" if result.reason else "")
            for name, result in self.assertions.items()
            if result.value is not True
        ]
        return lines

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "name": self.name,
            "repeat": self.repeat,
            "inputs": _plain(self.inputs),
            "metadata": _plain(self.metadata),
            "expected_output": _plain(self.expected_output),
            "output": _plain(self.output),
            "assertions": _results(self.assertions),
            "scores": _results(self.scores),
            "labels": _results(self.labels),
            "evaluator_failures": dict(self.evaluator_failures),
            "error": self.error,
            "error_message": self.error_message,
            "duration": self.duration,
            "usage": self.usage.to_dict(),
            "cost": self.cost,
            "run_ids": list(self.run_ids),
            "passed": self.passed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReportCase:
        """Rebuild from ``to_dict`` output."""
        return cls(
            name=str(data["name"]),
            inputs=data.get("inputs"),
            metadata=data.get("metadata"),
            expected_output=data.get("expected_output"),
            repeat=int(data.get("repeat", 1)),
            output=data.get("output"),
            assertions=_read_results(data.get("assertions")),
            scores=_read_results(data.get("scores")),
            labels=_read_results(data.get("labels")),
            evaluator_failures={
                str(k): str(v) for k, v in (data.get("evaluator_failures") or {}).items()
            },
            error=data.get("error"),
            error_message=data.get("error_message"),
            duration=float(data.get("duration", 0.0)),
            usage=Usage.from_dict(data.get("usage") or {}),
            cost=data.get("cost"),
            run_ids=[str(r) for r in data.get("run_ids") or []],
        )


@dataclass
class ReportTotals:
    """The sums over the report's cases (``cost`` None when one case's cost is unknown)."""

    cases: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    duration: float = 0.0


@dataclass
class ReportDiff:
    """This report against a baseline: cases that broke, cases that got fixed, the deltas."""

    regressions: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    pass_rate_delta: float = 0.0
    score_deltas: dict[str, float] = field(default_factory=dict)


@dataclass
class EvaluationReport:
    """Every case in dataset order (repeats adjacent), the pass rate and the totals."""

    name: str
    cases: list[ReportCase] = field(default_factory=list)
    duration: float = 0.0

    @property
    def pass_rate(self) -> float:
        """Passed cases over all cases (1.0 for an empty report)."""
        return sum(c.passed for c in self.cases) / len(self.cases) if self.cases else 1.0

    @property
    def totals(self) -> ReportTotals:
        """Counts, usage, cost and duration over the cases."""
        usage = Usage()
        cost: float | None = 0.0
        for case in self.cases:
            usage = usage + case.usage
            cost = None if cost is None or case.cost is None else cost + case.cost
        passed = sum(c.passed for c in self.cases)
        return ReportTotals(
            cases=len(self.cases),
            passed=passed,
            failed=len(self.cases) - passed,
            errors=sum(c.error is not None for c in self.cases),
            usage=usage,
            cost=cost,
            duration=self.duration,
        )

    def case(self, name: str, repeat: int = 1) -> ReportCase:
        """The case of that name (and repeat); ``KeyError`` naming it otherwise."""
        for case in self.cases:
            if case.name == name and case.repeat == repeat:
                return case
        raise KeyError(f"no case {name!r} (repeat {repeat}) in report {self.name!r}")

    def diff(self, baseline: EvaluationReport) -> ReportDiff:
        """What changed since ``baseline`` (cases paired by name and repeat)."""
        before = {(c.name, c.repeat): c for c in baseline.cases}
        regressions: list[str] = []
        fixes: list[str] = []
        for case in self.cases:
            old = before.get((case.name, case.repeat))
            if old is None or old.passed == case.passed:
                continue
            label = case.name if case.repeat == 1 else f"{case.name}#{case.repeat}"
            (fixes if case.passed else regressions).append(label)
        now, then = _score_means(self), _score_means(baseline)
        deltas = {name: now[name] - then[name] for name in now if name in then}
        return ReportDiff(regressions, fixes, self.pass_rate - baseline.pass_rate, deltas)

    def to_json(self) -> str:
        """The report as JSON text (``from_json`` reads it back)."""
        data = {
            "format": FORMAT,
            "name": self.name,
            "duration": self.duration,
            "pass_rate": self.pass_rate,
            "cases": [case.to_dict() for case in self.cases],
        }
        return json.dumps(data, indent=2, ensure_ascii=False, default=repr)

    @classmethod
    def from_json(cls, text: str) -> EvaluationReport:
        """Read a report ``to_json`` wrote; ``ValueError`` for anything else."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not an agentloop eval report (format {FORMAT!r} expected)")
        cases = [ReportCase.from_dict(case) for case in data.get("cases") or []]
        return cls(str(data.get("name", "")), cases, float(data.get("duration", 0.0)))

    def render(self, baseline: EvaluationReport | None = None) -> Any:
        """A ``rich`` table of the cases (with the change since ``baseline`` when given)."""
        from agentloop.evals._render import table

        return table(self, baseline)

    def to_html(self, *, viewer_url: str = "http://127.0.0.1:8765") -> str:
        """One self-contained HTML page; each run id links to ``viewer_url/runs/<id>``."""
        from agentloop.evals._render import html_page

        return html_page(self, viewer_url)


def _score_means(report: EvaluationReport) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for case in report.cases:
        for name, result in case.scores.items():
            if isinstance(result.value, int | float) and not isinstance(result.value, bool):
                sums.setdefault(name, []).append(float(result.value))
    return {name: sum(values) / len(values) for name, values in sums.items()}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=repr)


def _results(results: Mapping[str, EvaluationResult]) -> dict[str, Any]:
    return {name: {"value": r.value, "reason": r.reason} for name, r in results.items()}


def _read_results(data: Any) -> dict[str, EvaluationResult]:
    if not isinstance(data, Mapping):
        return {}
    return {
        str(name): EvaluationResult(item["value"], item.get("reason"))
        for name, item in data.items()
        if isinstance(item, Mapping) and isinstance(item.get("value"), bool | int | float | str)
    }
