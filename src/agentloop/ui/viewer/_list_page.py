"""The runs page: the stored runs, newest first, filtered by status, model and error class.

A page holds the newest ``PAGE`` runs and links to older ones (a keyset cursor, ``?before=``):
a store of 100,000 runs is one page's work to show. The filter form offers the models and
error classes of the newest page of runs (and the ones chosen).

A damaged record is a row of its own saying which run cannot be read and why (the readable runs
are still listed); a store that cannot be read at all is one paragraph instead of the table.
The table is the page's live part: the server pushes it again when the store changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentloop.ui.viewer._html import attr, run_cost, text, tokens, when
from agentloop.ui.viewer._records import (
    STATUSES,
    Page,
    RunFilter,
    Scanned,
    Unreadable,
    cost_of,
    error_class,
    models_of,
    parent_of,
    status_of,
    tool_calls_of,
    turns_of,
)

if TYPE_CHECKING:
    from agentloop.store import StoredRun

__all__ = ["filters_form", "runs_table", "store_problem"]


def _options(name: str, label: str, values: Sequence[str], chosen: str) -> str:
    items = [f'<option value="">{text(label)}: any</option>']
    for value in values:
        selected = " selected" if value == chosen else ""
        items.append(f'<option value="{attr(value)}"{selected}>{text(value)}</option>')
    return f'<select name="{name}" id="filter-{name}">{"".join(items)}</select>'


def filters_form(scanned: Sequence[Scanned], chosen: RunFilter) -> str:
    """The filter form: a status, a model and an error class from those ``scanned`` have."""
    readable = [found for found in scanned if not isinstance(found, Unreadable)]
    models = sorted({m for found in readable for m in models_of(found.run)} | {chosen.model} - {""})
    errors = sorted({e for f in readable if (e := error_class(f.run))} | {chosen.error} - {""})
    return (
        '<form class="filters" method="get" action="/">'
        f"{_options('status', 'status', STATUSES, chosen.status)}"
        f"{_options('model', 'model', models, chosen.model)}"
        f"{_options('error', 'error', errors, chosen.error)}"
        '<button type="submit">Filter</button> <a href="/">clear</a></form>'
    )


def _outcome(stored: StoredRun) -> str:
    run = stored.run
    if run.stop_reason is not None:
        return f'<span class="error-class">{text(type(run.stop_reason).__name__)}</span>: ' + text(
            _first_line(str(run.stop_reason))
        )
    if run.paused:
        return f"waiting on {len(run.pending)} pending call{'s' * (len(run.pending) != 1)}"
    if not stored.finished:
        return "no recorded end yet"
    return text(_first_line("" if run.output is None else str(run.output)))


def _first_line(value: str, width: int = 80) -> str:
    line = value.strip().split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def _row(stored: StoredRun) -> str:
    run, status = stored.run, status_of(stored)
    usage = run.usage
    child = ' <span class="badge child">sub-agent</span>' if parent_of(run) else ""
    return (
        f'<tr class="run run-{status}" data-run="{attr(run.id)}">'
        f'<td><span class="badge status-{status}">{status}</span></td>'
        f'<td><a class="run-link" href="/runs/{attr(run.id)}">{text(run.id[:12])}</a>{child}</td>'
        f"<td>{text(stored.session_id[:12])}</td>"
        f"<td>{when(run.started_at)}</td>"
        f'<td class="models">{text(", ".join(models_of(run)) or "-")}</td>'
        f"<td>{len(turns_of(run))}</td><td>{tool_calls_of(run)}</td>"
        f"<td>{tokens(usage.input_tokens)} / {tokens(usage.output_tokens)}</td>"
        f"<td>{run_cost(cost_of(run))}</td>"
        f'<td class="outcome">{_outcome(stored)}</td></tr>'
    )


def _unreadable_row(found: Unreadable) -> str:
    return (
        f'<tr class="run unreadable" data-run="{attr(found.run_id)}">'
        '<td><span class="badge status-unreadable">unreadable</span></td>'
        f"<td>{text(found.run_id[:12])}</td>"
        f'<td colspan="8" class="outcome">run {text(found.run_id)} cannot be read: '
        f"{text(found.message)}</td></tr>"
    )


def runs_table(page: Page, chosen: RunFilter) -> str:
    """The page's live part: the counts, the table of the page's runs, the link to older ones."""
    rows = [_unreadable_row(f) if isinstance(f, Unreadable) else _row(f) for f in page.runs]
    damaged = sum(isinstance(found, Unreadable) for found in page.runs)
    kind = f"{chosen.status} " if chosen.status else ""  # the store counts that status's runs
    total = f"{page.total} {kind}run{'s' * (page.total != 1)}"
    whole = page.next is None and page.before is None
    counts = f"{len(page.runs)} {'of' if whole else 'shown of'} {total}"
    if damaged:
        counts += f", {damaged} unreadable"
    empty = '<tr><td colspan="10" class="empty">no run matches</td></tr>'
    return (
        f'<p class="counts" id="counts">{counts}</p>'
        '<table class="runs" id="runs"><thead><tr><th>status</th><th>run</th><th>session</th>'
        "<th>started</th><th>models</th><th>turns</th><th>calls</th><th>tokens in / out</th>"
        f"<th>cost</th><th>outcome</th></tr></thead><tbody>{''.join(rows) or empty}"
        f"</tbody></table>{_pages(page, chosen)}"
    )


def _pages(page: Page, chosen: RunFilter) -> str:
    """Links to the newest page and to the next older one, keeping the filters."""
    links = []
    if page.before is not None:
        links.append(f'<a class="newest" href="/?{attr(chosen.query())}">newest runs</a>')
    if page.next is not None:
        query = "&".join(q for q in (chosen.query(), f"before={page.next}") if q)
        links.append(f'<a class="older" href="/?{attr(query)}">older runs</a>')
    return f'<p class="pages">{" ".join(links)}</p>' if links else ""


def store_problem(location: str, message: str) -> str:
    """What the page says when the store cannot be read at all."""
    return (
        '<section class="problem" id="store-problem"><h2>The store cannot be read</h2>'
        f"<p>{text(location)}: {text(message)}</p>"
        "<p>The page tries again on its next update.</p></section>"
    )
