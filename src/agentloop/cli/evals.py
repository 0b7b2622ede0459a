"""``agentloop eval FILE --agent MODULE:NAME``: a dataset run from a shell or CI, with a threshold.

Prints the report's table (and, with ``--baseline``, what changed since it); writes ``--json``
and ``--html`` when asked. Exit 0 when the pass rate reaches ``--threshold`` (1.0 by default:
every case), 1 below it, 2 for a bad file, agent or flag. Also wires ``runs export`` (its own
module) into the parser, so ``commands`` stays a list of commands.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentloop.errors import ConfigurationError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["add_commands", "dispatch"]


def add_commands(sub: Any, runs_commands: Any) -> None:
    """Add ``eval`` and ``runs export`` to the parser."""
    from agentloop.cli.export import add_export

    add_export(runs_commands)
    command = sub.add_parser("eval", help="evaluate an agent on a dataset file (CI: --threshold)")
    command.add_argument("file", metavar="FILE", help="a dataset, YAML or JSON (pydantic-evals')")
    command.add_argument("--agent", required=True, metavar="MODULE:NAME", help="the Agent to run")
    command.add_argument(
        "--threshold", type=float, default=1.0, help="pass rate for exit 0 (default 1.0)"
    )
    command.add_argument("--max-concurrency", type=int, default=8, help="cases at once (8)")
    command.add_argument("--repeat", type=int, default=1, help="runs of each case (1)")
    command.add_argument("--json", metavar="PATH", help="write the report as JSON")
    command.add_argument("--html", metavar="PATH", help="write the report as an HTML page")
    command.add_argument("--baseline", metavar="PATH", help="a JSON report to compare with")
    command.add_argument("--deps", metavar="MODULE:CALLABLE", help="(case) -> deps for its runs")
    command.add_argument(
        "--cassette", metavar="PATH", help="replay the provider's traffic from a cassette (CI)"
    )
    command.add_argument(
        "--cassette-mode",
        choices=("none", "once", "all"),
        default="none",
        help="none: replay only (default); once: record when the file is missing; all: record",
    )


def dispatch(args: argparse.Namespace, console: Callable[[], Console]) -> int | None:
    """Run ``eval`` or ``runs export`` when ``args`` names one; None otherwise."""
    if args.command == "eval":
        return run_eval(args, console())
    if args.command == "runs" and getattr(args, "runs_command", None) == "export":
        from agentloop.cli.export import export

        return export(args)
    return None


def run_eval(args: argparse.Namespace, console: Console) -> int:
    """``agentloop eval``: 0 at or above the threshold, 1 below (errors raise: exit 2)."""
    from agentloop._util.extras import require_extra
    from agentloop.cli.named import deps_factory, named_object
    from agentloop.engine.agent import Agent
    from agentloop.evals import Dataset, EvaluationReport

    require_extra("evals", ("yaml", "rich"), "agentloop eval")
    if not 0.0 <= args.threshold <= 1.0:
        raise ConfigurationError("--threshold is a pass rate from 0 to 1", field="threshold")
    dataset = Dataset.from_file(args.file)
    agent = named_object(args.agent, "--agent")
    if not isinstance(agent, Agent):
        raise ConfigurationError(
            f"--agent {args.agent} names a {type(agent).__name__}, not an Agent", field="agent"
        )
    baseline = _baseline(args.baseline, EvaluationReport)
    options = {"max_concurrency": args.max_concurrency, "repeat": args.repeat}
    if args.deps:
        form = "MODULE:CALLABLE, a function (case) -> deps such as myapp.deps:for_case"
        options["deps"] = deps_factory(args.deps, form)
    report = _evaluate(dataset, agent, options, args.cassette, args.cassette_mode)
    console.print(report.render(baseline))
    if baseline is not None:
        diff = report.diff(baseline)
        console.print(
            f"against {args.baseline}: {_listed(diff.regressions, 'regression')}, "
            f"{_listed(diff.fixes, 'fix')}",
            markup=False,
        )
    if args.json:
        Path(args.json).write_text(report.to_json(), encoding="utf-8")
    if args.html:
        Path(args.html).write_text(report.to_html(), encoding="utf-8")
    verdict = "pass" if report.pass_rate >= args.threshold else "FAIL"
    console.print(f"{verdict}: pass rate {report.pass_rate:.2%}, threshold {args.threshold:.2%}")
    return 0 if report.pass_rate >= args.threshold else 1


def _evaluate(
    dataset: Any,
    agent: Any,
    options: dict[str, Any],
    cassette: str | None,
    mode: Literal["none", "once", "all"],
) -> Any:
    """The dataset's report, its provider traffic replayed from (or recorded to) ``cassette``."""
    if cassette is None:
        return asyncio.run(dataset.evaluate(agent, **options))
    from agentloop.cassettes import use_cassette

    if mode == "none" and not Path(cassette).is_file():
        raise ConfigurationError(
            f"--cassette {cassette}: no such file; record it once against the provider with "
            "--cassette-mode once",
            field="cassette",
        )
    with use_cassette(cassette, mode=mode):
        return asyncio.run(dataset.evaluate(agent, **options))


def _listed(names: list[str], what: str) -> str:
    counted = f"{len(names)} {what}{'es' if what == 'fix' else 's'}"
    return f"{counted} ({', '.join(names)})" if names else counted


def _baseline(path: str | None, kind: Any) -> Any:
    if path is None:
        return None
    try:
        return kind.from_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"--baseline {path}: {exc}", field="baseline") from exc
