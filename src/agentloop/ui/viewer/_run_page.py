"""One run's page: its summary, its hard error, its pending calls, its chart, then its turns.

The hard error is drawn from ``error_to_dict`` (the record's own form): its class, message and
recoverability, then every typed attribute (``phase``, ``request_sent``, ``status_code``, ...)
and the attempt log one row an attempt. A paused run lists the calls it waits on; with
``--allow-decisions`` each gets Approve / Deny / Answer in one form posted back to the server.
A run that cannot be read is one paragraph naming it and saying what is damaged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.run import error_to_dict
from agentloop.ui.viewer._chart import TurnPoint, chart
from agentloop.ui.viewer._decide import already_decided
from agentloop.ui.viewer._html import attr, json_text, run_cost, seconds, text, tokens, when
from agentloop.ui.viewer._records import (
    Unreadable,
    cost_of,
    models_of,
    parent_of,
    status_of,
    tool_calls_of,
    turn_cost,
    turns_of,
)
from agentloop.ui.viewer._server_tools import provider_tools_html
from agentloop.ui.viewer._turns import Nesting, turns_html

if TYPE_CHECKING:
    from agentloop.errors import AgentLoopError
    from agentloop.pausing import PendingCall
    from agentloop.run import Run
    from agentloop.store import StoredRun

__all__ = ["run_body", "unreadable_body"]


def _facts(stored: StoredRun) -> str:
    run, status = stored.run, status_of(stored)
    usage = run.usage
    took = (
        seconds(run.ended_at - run.started_at)
        if run.started_at is not None and run.ended_at is not None
        else "-"
    )
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    parent = parent_of(run)
    wait = run.waiting if status == "waiting" else None
    batch = f' <span id="run-batch">batch {text(wait.batch_id)}</span>' if wait else ""
    rows = [
        ("status", f'<span class="badge status-{status}" id="run-status">{status}</span>{batch}'),
        ("session", text(stored.session_id)),
        ("started", when(run.started_at)),
        ("ended", when(run.ended_at)),
        ("took", took),
        ("models", text(", ".join(models_of(run)) or "-")),
        ("turns", _counts(run)),
        (
            "tokens",
            f"{tokens(usage.input_tokens)} in ({tokens(cached)} cached) · "
            f"{tokens(usage.output_tokens)} out ({tokens(usage.reasoning_tokens)} reasoning)",
        ),
        ("cost", run_cost(cost_of(run))),
    ]
    if parent is not None:
        link = f'<a href="/runs/{attr(parent.run_id)}">{text(parent.run_id[:12])}</a>'
        rows.append(("parent", f"{link}, tool call {text(parent.tool)} ({text(parent.call_id)})"))
    if run.memory:  # long-term memory (SPEC 27): what the run recalled and committed
        rows.append(("memory", _memory_html(run.memory)))
    for name, names in (("tools loaded", run.loaded_tools), ("skills read", run.skills_read)):
        if names:  # SPEC 22: what tool search loaded, the skills the model read
            rows.append((name, text(", ".join(names))))
    items = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in rows)
    return f'<dl class="facts">{items}</dl>'


def _memory_html(memory: Mapping[str, Any]) -> str:
    """The namespace, the recalled ids, and the ids the run's finalize wrote, deleted, dropped."""
    committed = memory.get("committed") or {}
    parts = [f"namespace {text('/'.join(map(str, memory.get('namespace') or ())))}"]
    for label, ids in (
        ("recalled", memory.get("recalled") or ()),
        ("written", committed.get("written") or ()),
        ("deleted", committed.get("deleted") or ()),
        ("dropped", committed.get("dropped") or ()),
        ("staged", [e.get("id", "") for e in memory.get("staged") or ()]),
    ):
        if ids:
            shown = ", ".join(f"<code>{text(str(i))}</code>" for i in ids)
            parts.append(f'{label} <span class="memory-{label}">{shown}</span>')
    return f'<span id="run-memory">{" · ".join(parts)}</span>'


def _counts(run: Run) -> str:
    """``2 (3 tool calls)``: a paused run's waiting turn and its calls counted, and said."""
    turns, calls = len(turns_of(run)), tool_calls_of(run)
    said = f"{turns} ({calls} tool call{'s' * (calls != 1)})"
    waiting = (
        f"; turn {turns_of(run)[-1].index} waits on a decision" if len(run.turns) < turns else ""
    )
    return said + waiting


def _attempt_row(record: Mapping[str, Any]) -> str:
    cells = [
        text(record.get("attempt", "-")),
        text(record.get("error_type") or "-"),
        text(record.get("status_code") if record.get("status_code") is not None else "-"),
        text(record.get("phase") or "-"),
        _value(record.get("request_sent")),
        seconds(_number(record.get("duration_seconds"))),
        seconds(_number(record.get("wait_seconds"))),
    ]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _error_html(error: AgentLoopError) -> str:
    data = error_to_dict(error)
    attributes: dict[str, Any] = dict(data["attributes"])
    log = attributes.pop("attempt_log", None) or []
    frames = attributes.pop("traceback", None)
    rows = [
        f'<tr class="attr-{attr(name)}"><th>{text(name)}</th><td>{_value(value, name)}</td></tr>'
        for name, value in sorted(attributes.items())
    ]
    table = (
        "<h3>attempt log</h3>"
        '<table class="attempt-log" id="attempt-log"><thead><tr><th>#</th><th>error</th>'
        "<th>status</th><th>phase</th><th>request sent</th><th>took</th><th>then waited</th>"
        f"</tr></thead><tbody>{''.join(_attempt_row(r) for r in log if isinstance(r, Mapping))}"
        "</tbody></table>"
        if log
        else ""
    )
    return (
        '<section class="hard-error" id="hard-error"><h2>hard error: '
        f'<span class="error-class">{text(data["type"])}</span></h2>'
        f'<p class="error-message">{text(data["message"])}</p>'
        f'<table class="attributes"><tr><th>recoverability</th><td>{text(error.recoverability)}'
        f"</td></tr>{''.join(rows)}</table>{_frames_html(frames)}{table}</section>"
    )


def _frames_html(frames: object) -> str:
    """Where an unexpected exception was raised: the stored innermost frames, innermost last."""
    if not isinstance(frames, list) or not frames:
        return ""
    items = [
        f'<li class="frame"><span class="frame-file">{text(frame.get("file", "?"))}</span>, '
        f'line <span class="frame-line">{text(frame.get("line", "?"))}</span>, in '
        f'<span class="frame-function">{text(frame.get("function", "?"))}</span>'
        f'<pre class="frame-code">{text(frame.get("code", ""))}</pre></li>'
        for frame in frames
        if isinstance(frame, Mapping)
    ]
    return (
        "<h3>where it was raised (innermost last)</h3>"
        f'<ol class="traceback" id="traceback">{"".join(items)}</ol>'
    )


def _value(value: object, name: str = "") -> str:
    """An attribute as JSON spells it (``true``, ``null``), seconds rounded, lists indented."""
    if isinstance(value, dict | list):
        return f"<pre>{json_text(value)}</pre>"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, float) and name.endswith(("_seconds", "_after")):
        return seconds(value)
    return text(value)


def _decision_fields(pending: PendingCall) -> str:
    name = attr(pending.id)
    choices = ["approve", "deny"] if pending.kind == "approval" else ["answer", "deny"]
    radios = "".join(
        f'<label><input type="radio" name="decision:{name}" value="{choice}"'
        f"{' checked' if i == 0 else ''}> {choice.capitalize()}</label> "
        for i, choice in enumerate(choices)
    )
    box = "answer" if pending.kind == "external" else "message"
    return (
        f'<div class="decide">{radios}<input type="text" name="{box}:{name}" '
        f'placeholder="{box} (optional for Deny)"></div>'
    )


def _pending_html(run: Run, allow_decisions: bool) -> str:
    if not run.pending:
        return ""
    decided = already_decided(run)
    allow_decisions = allow_decisions and not decided
    items = []
    for pending in run.pending:
        asked = f'<p class="ask">{text(pending.message)}</p>' if pending.message else ""
        path = f" (in {text(' > '.join(pending.path))})" if pending.path else ""
        items.append(
            f'<li class="pending-call" data-call="{attr(pending.id)}">'
            f'<span class="badge pending">{text(pending.kind)}</span> '
            f'<span class="tool">{text(pending.call.name)}</span>{path} '
            f'<span class="call-id">{text(pending.id)}</span>{asked}'
            f'<pre class="arguments">{json_text(dict(pending.call.arguments))}</pre>'
            f"{_decision_fields(pending) if allow_decisions else ''}</li>"
        )
    listing = f'<ul class="pending-calls">{"".join(items)}</ul>'
    if allow_decisions:
        listing = (
            f'<form method="post" action="/runs/{attr(run.id)}/decide" id="decisions">'
            f'{listing}<button type="submit">Send decisions</button></form>'
        )
    elif decided:
        listing += (
            '<p class="note" id="decided-elsewhere">decided (see decisions): a process is '
            "continuing the run, or its continue stopped (<code>agentloop continue "
            f"{text(run.id)}</code> finishes it with these decisions)</p>"
        )
    else:
        listing += '<p class="note">read-only: start with --allow-decisions to decide here</p>'
    return f'<section class="pending" id="pending"><h2>waiting on</h2>{listing}</section>'


def _decided_html(run: Run) -> str:
    if not run.decisions:
        return ""
    rows = "".join(
        f"<li>{when(_number(entry.get('at')))}: <pre>{json_text(entry.get('decisions'))}</pre></li>"
        for entry in run.decisions
        if isinstance(entry, Mapping)
    )
    return f'<section class="decided" id="decided"><h2>decisions</h2><ul>{rows}</ul></section>'


def _io_html(run: Run) -> str:
    from agentloop.messages import input_text

    said = f'<h2>input</h2><pre class="input">{text(input_text(run.input))}</pre>'
    if run.output is None:
        return said
    out = run.output
    shown = text(out) if isinstance(out, str) else json_text(out)
    return f'{said}<h2>output</h2><pre class="output">{shown}</pre>'


def run_body(stored: StoredRun, nesting: Nesting, *, allow_decisions: bool) -> str:
    """The run page's live part: everything about one run."""
    run = stored.run
    points = [TurnPoint(t.index, t.usage, turn_cost(t.usage, t.model)) for t in turns_of(run)]
    nothing = "no turn yet" if not stored.finished else "no turn completed"
    running = (
        ""
        if stored.finished
        else '<p class="note">no recorded end yet: in progress, or its process died</p>'
    )
    return (
        f'<h1>run <span class="run-id">{text(run.id)}</span></h1>{running}{_facts(stored)}'
        f"{_error_html(run.stop_reason) if run.stop_reason is not None else ''}"
        f"{_pending_html(run, allow_decisions)}{_decided_html(run)}{_io_html(run)}"
        f'<h2>tokens and cost</h2><div class="chart-box">{chart(points) or nothing}</div>'
        f'<h2>timeline</h2><div class="turns" id="turns">{turns_html(run, nesting)}</div>'
        f"{provider_tools_html(run)}{_ending(run)}"
    )


def _ending(run: Run) -> str:
    """Where a failed run stopped, after its last turn (the error itself is drawn above)."""
    if run.stop_reason is None:
        return ""
    after = f"after turn {run.turns[-1].index}" if run.turns else "before any turn completed"
    return (
        f'<section class="turn ended" id="ended"><h3>the run stopped {after}: '
        f'<a href="#hard-error" class="error-class">{text(type(run.stop_reason).__name__)}</a>'
        "</h3></section>"
    )


def unreadable_body(found: Unreadable) -> str:
    """What the page says about a run whose record is damaged."""
    return (
        f'<section class="problem" id="unreadable"><h1>run {text(found.run_id)} cannot be read'
        f"</h1><p>{text(found.message)}</p></section>"
    )
