"""Running an evaluation: each case's task under a bounded concurrency, then its evaluators.

A case never stops another: a task that raises (a hard error, a bug, ``task_timeout``) fails its
case with ``error`` (the class name), ``error_message`` and the ids of the runs it made; an
evaluator that raises or outlives ``evaluator_timeout`` is an ``evaluator_failures`` entry
(``<ExcType>: <message>`` / ``timed out after Ns``). Neither is ever a pass.

An ``Agent`` task runs as ``agent.run(inputs, history=[])`` (a fresh conversation per case;
the agent's ``memory``, if any, is shared by every case); a batch agent's (SPEC 25) in a fresh
session of its own, since its run waits in the store: the case fails with ``RunWaiting``. A
paused or waiting run is then ended ``Cancelled`` (``cancel_run``): the case has failed, and
nobody is left to decide or poll it. ``deps`` (a value, or ``(case) -> deps``, sync or async)
are an Agent task's runs' ``ctx.deps``. A callable task whose run paused or waits fails its case
the same way (that run is the callable's to end: no agent is known here). A
callable task may be sync (run in a worker thread, so it may call ``run_sync``) or async. The
runs started inside a case's task (``_util.run_sink``) are the case's runs: its usage, cost, run
ids and trajectory.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop._util.run_sink import RUN_SINK
from agentloop.errors import AgentLoopError, ConfigurationError
from agentloop.evals._evaluators import EvaluationReason, EvaluationResult, EvaluatorContext
from agentloop.evals._judge import JudgeReplyError
from agentloop.evals._report import EvaluationReport, ReportCase
from agentloop.messages import Usage
from agentloop.pricing import sum_costs

if TYPE_CHECKING:  # the dataset's types are Any here: _dataset imports this module
    from agentloop.evals._evaluators import Evaluator
    from agentloop.run import Run

Dataset = Any
Case = Any

__all__ = ["check", "evaluate"]

_log = logging.getLogger("agentloop")


class RunPaused(Exception):
    """A case's run paused for a decision (section 17): the case fails."""


class RunWaiting(Exception):
    """A case's run is waiting (section 25): the case fails."""


def _check_options(task: Any, max_concurrency: Any, repeat: Any, deps: Any = None) -> None:
    from agentloop.engine.agent import Agent

    if deps is not None and not isinstance(task, Agent):
        raise ConfigurationError(
            "deps= are given to an Agent task's runs; a callable task passes its own "
            "(agent.run(inputs, deps=...)): evaluate the Agent itself, or drop deps=",
            field="deps",
        )
    for name, value in (("max_concurrency", max_concurrency), ("repeat", repeat)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be an integer >= 1, got {value!r}", field=name)
    if not isinstance(task, Agent) and not callable(task):
        raise ConfigurationError(
            f"task must be an Agent or a callable inputs -> output, got {type(task).__name__}",
            field="task",
        )


async def evaluate(
    dataset: Dataset,
    task: Any,
    *,
    max_concurrency: int = 8,
    repeat: int = 1,
    task_timeout: float | None = None,
    evaluator_timeout: float = 30.0,
    name: str | None = None,
    deps: Any = None,
) -> EvaluationReport:
    """``Dataset.evaluate``: every case ``repeat`` times, at most ``max_concurrency`` at once."""
    _check_options(task, max_concurrency, repeat, deps)
    if max_concurrency > 1 and len(dataset.cases) * repeat > 1:
        _refuse_ordered_cassette(max_concurrency)
    gate = asyncio.Semaphore(max_concurrency)
    started = time.perf_counter()

    async def one(case: Case, index: int) -> ReportCase:
        async with gate:
            return await _case(dataset, task, case, index, task_timeout, evaluator_timeout, deps)

    work = [one(case, i) for case in dataset.cases for i in range(1, repeat + 1)]
    cases = list(await asyncio.gather(*work))
    title = name or dataset.name or _task_name(task)
    return EvaluationReport(title, cases, time.perf_counter() - started)


def _refuse_ordered_cassette(max_concurrency: int) -> None:
    """``ConfigurationError`` when an ordered cassette is around cases that run at once.

    ``match="ordered"`` gives each request the next recorded exchange whatever case sent it:
    cases running together would take each other's replies (and record them interleaved).
    """
    from agentloop.providers._tape import TAPE

    cassette = getattr(TAPE.get(), "cassette", None)
    if getattr(cassette, "match", None) == "ordered":
        raise ConfigurationError(
            f"a cassette with match='ordered' gives each request the next recorded exchange, "
            f"so cases run {max_concurrency} at once would take each other's replies: "
            "evaluate(..., max_concurrency=1) under it, or use match='strict' (each request "
            "takes the exchange equal to it)",
            field="max_concurrency",
        )


async def check(dataset: Dataset, task: Any, case: Case, **options: Any) -> ReportCase:
    """``Dataset.check``: one case; ``AssertionError`` naming each failure with its reason."""
    deps = options.get("deps")
    _check_options(task, 1, 1, deps)
    task_timeout = options.get("task_timeout")
    evaluator_timeout = options.get("evaluator_timeout", 30.0)
    result = await _case(dataset, task, case, 1, task_timeout, evaluator_timeout, deps)
    if not result.passed:
        lines = "\n".join(f"  - {line}" for line in result.failures())
        raise AssertionError(f"case {result.name!r} failed:\n{lines}")
    return result


def _task_name(task: Any) -> str:
    return str(getattr(task, "name", None) or getattr(task, "__name__", None) or "evaluation")


async def _case(
    dataset: Dataset,
    task: Any,
    case: Case,
    repeat: int,
    task_timeout: float | None,
    evaluator_timeout: float,
    deps: Any = None,
) -> ReportCase:
    runs: list[Run[Any]] = []
    token = RUN_SINK.set(runs)
    report = ReportCase(
        name=case.name or "",
        inputs=case.inputs,
        metadata=case.metadata,
        expected_output=case.expected_output,
        repeat=repeat,
    )
    started = time.perf_counter()
    try:
        async with asyncio.timeout(task_timeout):
            report.output = await _run_task(task, case, deps, runs)
    except TimeoutError:
        report.error, report.error_message = "TimeoutError", f"task timed out after {task_timeout}s"
    except (RunPaused, RunWaiting) as error:
        report.error, report.error_message = type(error).__name__, str(error)
    except Exception as error:
        report.error, report.error_message = type(error).__name__, str(error)
    finally:
        RUN_SINK.reset(token)
    report.duration = time.perf_counter() - started
    _account(report, runs)
    if report.error is None:
        ctx = EvaluatorContext(
            report.name, case.inputs, case.metadata, case.expected_output, report.output,
            report.duration, tuple(runs),
        )  # fmt: skip
        for evaluator in (*dataset.evaluators, *case.evaluators):
            await _apply(evaluator, ctx, report, evaluator_timeout)
    return report


async def _run_task(task: Any, case: Case, deps: Any, runs: list[Run[Any]]) -> Any:
    from agentloop.engine.agent import Agent

    inputs = case.inputs
    if isinstance(task, Agent):
        made = deps(case) if callable(deps) else deps
        made = await made if inspect.isawaitable(made) else made
        if task.config.batch:  # a batch run waits in the store: a fresh session of its own
            run = await task.session().run(inputs, deps=made)
        else:
            run = await task.run(inputs, history=[], deps=made)
        if run.paused:
            await _abandon(task, run)
            raise RunPaused(f"the run paused for {len(run.pending)} pending call(s)")
        # section 25's waiting runs (asked on the class: a Run's __getattr__ suggests names)
        if hasattr(type(run), "waiting") and getattr(run, "waiting"):  # noqa: B009
            await _abandon(task, run)
            raise RunWaiting("the run is waiting")
        return run.output
    if inspect.iscoroutinefunction(task) or inspect.iscoroutinefunction(
        getattr(task, "__call__", None)  # noqa: B004  (an async callable object)
    ):
        output = await task(inputs)
    else:
        result = await asyncio.to_thread(task, inputs)
        output = await result if inspect.isawaitable(result) else result
    _refuse_unfinished(runs)
    return output


def _refuse_unfinished(runs: list[Run[Any]]) -> None:
    """A callable task's run left paused or waiting fails its case: never a pass on ``None``."""
    for run in runs:
        waiting = hasattr(type(run), "waiting") and getattr(run, "waiting")  # noqa: B009
        if run.paused or waiting:
            what = "paused for a decision" if run.paused else "is waiting on a provider batch"
            raise (RunPaused if run.paused else RunWaiting)(
                f"run {run.id} {what}; the task left it so (end it with cancel_run() on its "
                "session, or evaluate the Agent itself, which ends it: evaluate(agent, deps=...))"
            )


async def _abandon(agent: Any, run: Run[Any]) -> None:
    """End a case's paused or waiting run ``Cancelled`` (SPEC 17's ``cancel_run``).

    The case has failed and nobody will decide or poll it: left as it is, the agent would keep
    its session alive and its store would hold it paused or waiting, where a later approval or
    ``agentloop batch poll`` would run its tools for a case already reported. A failure to
    cancel is logged; the case still fails with the pause.
    """
    try:
        await agent.session(run.session_id).cancel_run()
    except AgentLoopError as error:
        _log.warning("could not cancel the paused run %s of a case: %r", run.id, error)


def _account(report: ReportCase, runs: list[Run[Any]]) -> None:
    usage = Usage()
    for run in runs:
        usage = usage + run.usage
    report.usage = usage
    report.cost = sum_costs(run.cost for run in runs) if runs else 0.0
    report.run_ids = [run.id for run in runs]


async def _apply(
    evaluator: Evaluator, ctx: EvaluatorContext, report: ReportCase, limit: float
) -> None:
    name = evaluator.result_name()
    try:
        async with asyncio.timeout(limit):
            value = await _evaluated(evaluator, ctx)
    except TimeoutError:
        report.evaluator_failures[_free(report, name)] = f"timed out after {_seconds(limit)}s"
        return
    except JudgeReplyError as error:
        report.evaluator_failures[_free(report, name)] = str(error)
        return
    except Exception as error:
        failure = f"{type(error).__name__}: {error}"
        report.evaluator_failures[_free(report, name)] = failure
        return
    _file(report, name, value)


async def _evaluated(evaluator: Evaluator, ctx: EvaluatorContext) -> Any:
    if inspect.iscoroutinefunction(evaluator.evaluate):
        return await evaluator.evaluate(ctx)
    if evaluator.inline:
        return evaluator.evaluate(ctx)
    result = await asyncio.to_thread(evaluator.evaluate, ctx)
    return await result if inspect.isawaitable(result) else result


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _free(report: ReportCase, name: str) -> str:
    """``name``, or ``name_2``... when a result of that name is already in the report."""
    taken = {*report.assertions, *report.scores, *report.labels, *report.evaluator_failures}
    if name not in taken:
        return name
    return next(f"{name}_{n}" for n in range(2, len(taken) + 3) if f"{name}_{n}" not in taken)


def _slot(report: ReportCase, value: Any) -> dict[str, EvaluationResult] | None:
    if isinstance(value, bool):
        return report.assertions
    if isinstance(value, int | float) and math.isfinite(value):
        return report.scores
    return report.labels if isinstance(value, str) else None


def _file(report: ReportCase, name: str, value: Any) -> None:
    """Put a returned value where it belongs: assertions, scores or labels."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            _file(report, str(key), item)
        return
    reason = None
    if isinstance(value, EvaluationReason):
        value, reason = value.value, value.reason
    slot = _slot(report, value)
    if slot is None:
        kind = type(value).__name__
        report.evaluator_failures[_free(report, name)] = (
            f"TypeError: an evaluator returns bool, a number, str or EvaluationReason, not {kind}"
        )
        return
    slot[_free(report, name)] = EvaluationResult(value, reason)
