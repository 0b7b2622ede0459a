"""A report for people: a ``rich`` table for the terminal and one self-contained HTML page.

The page has no script and loads nothing (its CSS is inline), so it can be attached to a CI
run and opened anywhere; each run id links to the run viewer's ``/runs/<id>`` (``agentloop
ui``). Every value on it is HTML-escaped: inputs and outputs are user and model text.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from rich.table import Table

EvaluationReport = Any  # _report imports this module: its classes are Any here
ReportCase = Any

__all__ = ["html_page", "table"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ccc;padding:4px 8px;
vertical-align:top;text-align:left}th{background:#f3f3f3}tr.fail td.status{color:#b00020}
tr.pass td.status{color:#1b7f3b}code{white-space:pre-wrap;font-size:12px}
.totals span{margin-right:1.5em}
"""


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _verdicts(case: ReportCase) -> str:
    marks = [f"{n} {'✔' if r.value is True else '✘'}" for n, r in case.assertions.items()]
    marks += [f"{n}={r.value:.2f}" for n, r in case.scores.items()]
    marks += [f"{n}={r.value}" for n, r in case.labels.items()]
    marks += [f"{n} ✘ {text}" for n, text in case.evaluator_failures.items()]
    if case.error:
        marks.append(f"{case.error}: {case.error_message}")
    return "\n".join(marks)


def _cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def table(report: EvaluationReport, baseline: EvaluationReport | None = None) -> Table:
    """The cases as rows; with ``baseline``, a column saying what changed."""
    from rich.table import Table
    from rich.text import Text

    totals = report.totals
    caption = (
        f"{totals.passed}/{totals.cases} passed ({report.pass_rate:.0%}), {totals.errors} errors, "
        f"{totals.usage.total_tokens} tokens, cost {_cost(totals.cost)}, {totals.duration:.2f} s"
    )
    diff = report.diff(baseline) if baseline is not None else None
    if diff is not None:
        caption += f"; pass rate {diff.pass_rate_delta:+.0%} against the baseline"
    grid = Table(title=f"Evaluation: {report.name}", caption=caption)
    for column in ("case", "status", "output", "verdicts", "duration", "runs"):
        grid.add_column(column)
    if diff is not None:
        grid.add_column("change")
    for case in report.cases:
        label = case.name if case.repeat == 1 else f"{case.name}#{case.repeat}"
        status = Text("pass", "green") if case.passed else Text("FAIL", "bold red")
        row: list[Any] = [
            Text(label), status, Text(_short(case.output)), Text(_verdicts(case)),
            f"{case.duration:.3f}s", Text(", ".join(r[:8] for r in case.run_ids)),
        ]  # fmt: skip
        if diff is not None:
            row.append(_change(label, diff.regressions, diff.fixes))
        grid.add_row(*row)
    return grid


def _change(label: str, regressions: list[str], fixes: list[str]) -> Any:
    from rich.text import Text

    if label in regressions:
        return Text("regression", "bold red")
    return Text("fixed", "green") if label in fixes else Text("")


def html_page(report: EvaluationReport, viewer_url: str) -> str:
    """The report as one HTML page with no external resource."""
    base = viewer_url.rstrip("/")
    totals = report.totals
    rows = "\n".join(_row(case, base) for case in report.cases)
    e = html.escape
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Evaluation: {e(report.name)}</title>
<style>{_CSS}</style></head><body>
<h1>Evaluation: {e(report.name)}</h1>
<p class="totals"><span id="pass-rate">pass rate {report.pass_rate:.0%}</span>
<span>{totals.passed}/{totals.cases} passed</span><span>{totals.errors} errors</span>
<span>{totals.usage.total_tokens} tokens</span><span>cost {e(_cost(totals.cost))}</span>
<span>{totals.duration:.2f} s</span></p>
<table id="cases"><thead><tr><th>case</th><th>status</th><th>inputs</th><th>output</th>
<th>verdicts</th><th>duration</th><th>usage</th><th>cost</th><th>runs</th></tr></thead>
<tbody>
{rows}
</tbody></table></body></html>
"""


def _row(case: ReportCase, base: str) -> str:
    e = html.escape
    label = case.name if case.repeat == 1 else f"{case.name}#{case.repeat}"
    links = " ".join(
        f'<a class="run" href="{e(base)}/runs/{quote(run_id)}">{e(run_id[:12])}</a>'
        for run_id in case.run_ids
    )
    status = "pass" if case.passed else "fail"
    return (
        f'<tr class="{status}" data-case="{e(label)}"><td>{e(label)}</td>'
        f'<td class="status">{status.upper()}</td>'
        f"<td><code>{e(_short(case.inputs, 200))}</code></td>"
        f"<td><code>{e(_short(case.output, 200))}</code></td>"
        f"<td><code>{e(_verdicts(case))}</code></td><td>{case.duration:.3f}s</td>"
        f"<td>{case.usage.total_tokens}</td><td>{e(_cost(case.cost))}</td><td>{links}</td></tr>"
    )
