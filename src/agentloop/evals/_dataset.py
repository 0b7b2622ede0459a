"""``Case`` and ``Dataset``: what to test, in pydantic-evals' names and file format.

A dataset file (YAML or JSON) holds ``name``, ``cases`` (each ``name``, ``inputs``,
``expected_output``, ``metadata``, ``evaluators``) and top-level ``evaluators``, each written
``- Name``, ``- Name: arg`` or ``- Name: {kw: v}``; pydantic-evals' files (their
``$schema`` line included) load as they are. Everything wrong with a file is one
``DatasetError`` naming the file and the case, raised before any task runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentloop.errors import DatasetError
from agentloop.evals._evaluators import BUILTIN_EVALUATORS, Evaluator
from agentloop.evals._judge import LLMJudge

if TYPE_CHECKING:
    from typing import TypeAlias

    from agentloop.engine.agent import Agent
    from agentloop.evals._report import EvaluationReport, ReportCase

    Task: TypeAlias = Agent[Any] | Callable[[Any], Any]

__all__ = ["Case", "Dataset"]

_CASE_KEYS = frozenset({"name", "inputs", "expected_output", "metadata", "evaluators"})


@dataclass
class Case:
    """One scenario: the task's ``inputs``, what should come out, metadata, its own evaluators."""

    inputs: Any
    name: str | None = None
    expected_output: Any = None
    metadata: Any = None
    evaluators: Sequence[Evaluator] = ()

    def __init__(
        self,
        *,
        inputs: Any,
        name: str | None = None,
        expected_output: Any = None,
        metadata: Any = None,
        evaluators: Iterable[Evaluator] = (),
    ) -> None:
        """Keyword arguments only, as pydantic-evals' ``Case``."""
        self.inputs = inputs
        self.name = name
        self.expected_output = expected_output
        self.metadata = metadata
        self.evaluators = tuple(evaluators)


@dataclass
class Dataset:
    """Cases and the evaluators every case gets; unnamed cases become ``case_1``, ``case_2``..."""

    cases: list[Case] = field(default_factory=list)
    evaluators: Sequence[Evaluator] = ()
    name: str | None = None

    def __init__(
        self,
        *,
        cases: Iterable[Case],
        evaluators: Iterable[Evaluator] = (),
        name: str | None = None,
    ) -> None:
        """Name the unnamed cases; a duplicate name is a ``DatasetError``."""
        self.cases = list(cases)
        self.evaluators = tuple(evaluators)
        self.name = name
        seen: set[str] = set()
        for index, case in enumerate(self.cases, 1):
            if not isinstance(case, Case):
                raise DatasetError(f"case {index} is a {type(case).__name__}, not a Case")
            if case.name is None:
                case.name = f"case_{index}"
            if case.name in seen:
                raise DatasetError(f"duplicate case name {case.name!r}", case=case.name)
            seen.add(case.name)

    # -- files -----------------------------------------------------------------------------

    @classmethod
    def from_file(
        cls, path: str | Path, *, custom_evaluator_types: Sequence[type[Evaluator]] = ()
    ) -> Dataset:
        """Load a YAML (``.yaml``/``.yml``) or JSON file."""
        path = Path(path)
        fmt: Literal["yaml", "json"] = "json" if path.suffix.lower() == ".json" else "yaml"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise DatasetError(f"cannot read {path}: {exc}", path=str(path)) from exc
        return cls.from_text(
            text, fmt=fmt, custom_evaluator_types=custom_evaluator_types, path=str(path)
        )

    @classmethod
    def from_text(
        cls,
        text: str,
        *,
        fmt: Literal["yaml", "json"] = "yaml",
        custom_evaluator_types: Sequence[type[Evaluator]] = (),
        path: str | None = None,
    ) -> Dataset:
        """Load the text of a dataset file."""
        data = _parse(text, fmt, path)
        if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
            raise DatasetError(_where(path, "a dataset needs a 'cases' list"), path=path)
        types = _known(custom_evaluator_types)
        cases = [_case(raw, index, types, path) for index, raw in enumerate(data["cases"], 1)]
        evaluators = [_evaluator(spec, types, path, None) for spec in _list(data, path, None)]
        name = data.get("name")
        try:
            return cls(cases=cases, evaluators=evaluators, name=str(name) if name else None)
        except DatasetError as error:
            error.path = path
            raise

    def to_file(self, path: str | Path) -> None:
        """Write the dataset as YAML or JSON (by the suffix), in pydantic-evals' format."""
        path = Path(path)
        data: dict[str, Any] = {"name": self.name} if self.name else {}
        data["cases"] = [_case_data(case) for case in self.cases]
        if self.evaluators:
            data["evaluators"] = [e.spec() for e in self.evaluators]
        if path.suffix.lower() == ".json":
            path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
            return
        path.write_text(_yaml().safe_dump(data, sort_keys=False, allow_unicode=True), "utf-8")

    # -- running ---------------------------------------------------------------------------

    async def evaluate(
        self,
        task: Task,
        *,
        max_concurrency: int = 8,
        repeat: int = 1,
        task_timeout: float | None = None,
        evaluator_timeout: float = 30.0,
        name: str | None = None,
        deps: Any = None,
    ) -> EvaluationReport:
        """Run ``task`` (an ``Agent`` or a callable) on every case and evaluate the outputs.

        ``deps``: an Agent task's runs' ``ctx.deps``, a value or ``(case) -> deps`` (sync or
        async), as its tools, toolset filters and memory namespace read them in production.
        """
        from agentloop.evals._evaluate import evaluate

        return await evaluate(
            self,
            task,
            max_concurrency=max_concurrency,
            repeat=repeat,
            task_timeout=task_timeout,
            evaluator_timeout=evaluator_timeout,
            name=name,
            deps=deps,
        )

    def evaluate_sync(self, task: Task, **options: Any) -> EvaluationReport:
        """``evaluate`` on a fresh event loop (not inside a running one)."""
        import asyncio

        return asyncio.run(self.evaluate(task, **options))

    def parametrize(self) -> Callable[[Callable[..., Any]], Any]:
        """``@dataset.parametrize()``: a pytest test per case (argument ``case``; ids: names)."""
        import pytest

        return pytest.mark.parametrize("case", self.cases, ids=[c.name or "" for c in self.cases])

    async def check(self, task: Task, case: Case, **options: Any) -> ReportCase:
        """Evaluate one case; its ``ReportCase``, or ``AssertionError`` naming every failure."""
        from agentloop.evals._evaluate import check

        return await check(self, task, case, **options)

    def check_sync(self, task: Task, case: Case, **options: Any) -> ReportCase:
        """``check`` on a fresh event loop."""
        import asyncio

        return asyncio.run(self.check(task, case, **options))


def _yaml() -> Any:
    from agentloop._util.extras import require_extra

    require_extra("evals", ("yaml",), "a YAML dataset")
    import yaml

    return yaml


def _where(path: str | None, message: str) -> str:
    return f"{path}: {message}" if path else message


def _parse(text: str, fmt: str, path: str | None) -> Any:
    if fmt == "json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise DatasetError(_where(path, f"not valid JSON: {exc}"), path=path) from exc
    if fmt != "yaml":
        raise DatasetError(f"fmt must be 'yaml' or 'json', got {fmt!r}", path=path)
    yaml = _yaml()

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DatasetError(_where(path, f"not valid YAML: {exc}"), path=path) from exc


def _known(custom: Sequence[type[Evaluator]]) -> dict[str, type[Evaluator]]:
    known: dict[str, type[Evaluator]] = {t.__name__: t for t in (*BUILTIN_EVALUATORS, LLMJudge)}
    for kind in custom:
        if not (isinstance(kind, type) and issubclass(kind, Evaluator)):
            raise DatasetError(f"custom_evaluator_types: {kind!r} is not an Evaluator subclass")
        known[kind.__name__] = kind
    return known


def _list(data: Mapping[str, Any], path: str | None, case: str | None) -> list[Any]:
    specs = data.get("evaluators") or []
    if not isinstance(specs, list):
        raise DatasetError(_where(path, "'evaluators' must be a list"), path=path, case=case)
    return specs


def _case(raw: Any, index: int, types: dict[str, type[Evaluator]], path: str | None) -> Case:
    label = raw.get("name") if isinstance(raw, dict) else None
    name = str(label) if label is not None else f"case_{index}"
    if not isinstance(raw, dict):
        raise DatasetError(_where(path, f"case {name}: not a mapping"), path=path, case=name)
    if "inputs" not in raw:
        raise DatasetError(_where(path, f"case {name}: missing 'inputs'"), path=path, case=name)
    unknown = sorted(set(raw) - _CASE_KEYS)
    if unknown:
        message = f"case {name}: unknown field(s) {', '.join(unknown)}"
        raise DatasetError(_where(path, message), path=path, case=name)
    evaluators = [_evaluator(spec, types, path, name) for spec in _list(raw, path, name)]
    return Case(
        inputs=raw["inputs"],
        name=str(label) if label is not None else None,
        expected_output=raw.get("expected_output"),
        metadata=raw.get("metadata"),
        evaluators=evaluators,
    )


def _evaluator(
    spec: Any, types: dict[str, type[Evaluator]], path: str | None, case: str | None
) -> Evaluator:
    where = f"case {case}: " if case else ""
    if isinstance(spec, str):
        kind, args = spec, None
    elif isinstance(spec, dict) and len(spec) == 1:
        kind, args = next(iter(spec.items()))
    else:
        message = f"{where}an evaluator is 'Name', 'Name: arg' or 'Name: {{kw: v}}', got {spec!r}"
        raise DatasetError(_where(path, message), path=path, case=case)
    cls = types.get(str(kind))
    if cls is None:
        message = f"{where}unknown evaluator {kind!r}; known: {', '.join(sorted(types))}"
        raise DatasetError(_where(path, message), path=path, case=case)
    try:
        if args is None:
            return cls()
        return cls(**args) if isinstance(args, dict) else cls(args)  # type: ignore[call-arg]
    except (TypeError, ValueError) as exc:
        message = f"{where}{kind}: {exc}"
        raise DatasetError(_where(path, message), path=path, case=case) from exc


def _case_data(case: Case) -> dict[str, Any]:
    data: dict[str, Any] = {"name": case.name, "inputs": case.inputs}
    if case.expected_output is not None:
        data["expected_output"] = case.expected_output
    if case.metadata is not None:
        data["metadata"] = case.metadata
    if case.evaluators:
        data["evaluators"] = [e.spec() for e in case.evaluators]
    return data
