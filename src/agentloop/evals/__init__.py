"""Evals: a dataset of cases, evaluators, a report, in pydantic-evals' names and file format.

::

    dataset = Dataset.from_file("cases.yaml")          # pydantic-evals' files load as they are
    report = await dataset.evaluate(agent, max_concurrency=8, repeat=1)
    report.render()  # a rich table; report.to_json(), report.to_html(), report.diff(baseline)

Evaluators: pydantic-evals' ``Equals``, ``EqualsExpected``, ``Contains``, ``IsInstance``,
``MaxDuration`` and ``LLMJudge`` (through any of our clients), and ours for agents:
``ToolCalled``, ``Trajectory`` (ADK's ``exact``/``in_order``/``any_order``), ``MaxTurns``,
``MaxCost``. A custom one subclasses ``Evaluator``. Extra ``evals`` (PyYAML for files, rich for
the table); ``agentloop eval FILE --agent MODULE:NAME`` runs one from a shell or CI.
"""

from agentloop.evals._dataset import Case, Dataset
from agentloop.evals._evaluators import (
    Contains,
    Equals,
    EqualsExpected,
    EvaluationReason,
    EvaluationResult,
    Evaluator,
    EvaluatorContext,
    IsInstance,
    MaxCost,
    MaxDuration,
    MaxTurns,
    ToolCalled,
    Trajectory,
)
from agentloop.evals._judge import LLMJudge
from agentloop.evals._report import EvaluationReport, ReportCase, ReportDiff, ReportTotals

__all__ = [
    "Case",
    "Contains",
    "Dataset",
    "Equals",
    "EqualsExpected",
    "EvaluationReason",
    "EvaluationReport",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorContext",
    "IsInstance",
    "LLMJudge",
    "MaxCost",
    "MaxDuration",
    "MaxTurns",
    "ReportCase",
    "ReportDiff",
    "ReportTotals",
    "ToolCalled",
    "Trajectory",
]
