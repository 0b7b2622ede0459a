"""A run's turns on the page: each model call, each tool call, and sub-agent runs nested.

A turn shows its model, tokens (cached and reasoning tokens when reported), estimated cost, the
latency when the record has one, its reasoning collapsed in a ``<details>``, its text, then each
tool call with its arguments and what it returned. A soft error (``is_error``: what the model
read and recovered from) is marked ``soft error``; the breaker's refusal and the loop
detector's are marked as such (their exact words are SPEC 3's). A child agent's run, which
records the parent's run and tool call, is drawn inside that call, its own turns nested.

Stored arguments and results are user and model text: they go through ``_html.text``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentloop._util.slots import record
from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.model import INVALID_JSON_KEY
from agentloop.ui.viewer._html import attr, cost, json_text, seconds, text, tokens
from agentloop.ui.viewer._records import (
    Scanned,
    children_by_call,
    paused_turn_of,
    status_of,
    turn_cost,
)

if TYPE_CHECKING:
    from agentloop.run import Run, Turn
    from agentloop.store import StoredRun

__all__ = ["Nesting", "turns_html"]

BREAKER_TEXT = "tool temporarily unavailable: circuit breaker open"
"""The soft text of an open tool breaker (SPEC 3)."""
LOOP_PREFIX = "dispatch refused before execution: "
"""The loop detector's refusal of a call before it ran (SPEC 3)."""
MAX_DEPTH = 4
"""Sub-agents nested deeper than this are a link, not a drawing."""


class Nesting:
    """Finds the child runs of a run among the scanned ones (each call's, by call id)."""

    def __init__(self, scanned: Sequence[Scanned]) -> None:
        self.scanned = scanned

    def of(self, run_id: str) -> dict[str, list[StoredRun]]:
        """The child runs of ``run_id`` by the tool call that started each."""
        return children_by_call(self.scanned, run_id)


def _seconds_field(data: Mapping[str, Any], *names: str) -> float | None:
    """A duration the record carries under one of ``names`` (None when it has none)."""
    for name in names:
        value = data.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
    return None


def _arguments(call: ToolCallPart) -> str:
    raw = call.arguments.get(INVALID_JSON_KEY)
    if len(call.arguments) == 1 and isinstance(raw, str):
        return f'<span class="badge soft">invalid JSON</span> {text(raw)}'
    return json_text(dict(call.arguments))


def _marks(result: ToolResultPart) -> str:
    marks = []
    if result.is_error:
        marks.append('<span class="badge soft-error">soft error</span>')
    if result.content.startswith(BREAKER_TEXT):
        marks.append('<span class="badge breaker">breaker open</span>')
    if result.content.startswith(LOOP_PREFIX):
        marks.append('<span class="badge loop">loop refused</span>')
    return " ".join(marks) or '<span class="badge ok">ok</span>'


def _result_html(
    result: ToolResultPart | None, data: Mapping[str, Any], pending: bool = False
) -> str:
    if result is None and pending:
        waiting = '<span class="badge pending">pending</span> waiting for a decision'
        return f'<div class="result">{waiting}</div>'
    if result is None:
        return '<div class="result missing">no result recorded</div>'
    took = _seconds_field(data, "duration_seconds", "duration")
    duration = f' <span class="duration">{seconds(took)}</span>' if took is not None else ""
    media = "".join(f'<div class="media">{text(m.describe())}</div>' for m in result.media)
    return (
        f'<div class="result">{_marks(result)}{duration}'
        f'<pre class="result-text">{text(result.content)}</pre>{media}</div>'
    )


@record
class _Drawing:
    """What drawing one run's turns needs: its child runs, its pending calls, the depth."""

    nesting: Nesting
    depth: int
    run_id: str
    children: Mapping[str, list[StoredRun]]
    pending: frozenset[str]


def _pairs(turn: Turn) -> list[tuple[ToolCallPart | None, ToolResultPart | None]]:
    """Each call with its result (by id), then any result that answers no call."""
    results = {r.call_id: r for r in turn.tool_results}
    pairs: list[tuple[ToolCallPart | None, ToolResultPart | None]] = [
        (c, results.pop(c.id, None)) for c in turn.tool_calls
    ]
    return pairs + [(None, result) for result in results.values()]


def _call_html(
    call: ToolCallPart | None,
    result: ToolResultPart | None,
    result_data: Mapping[str, Any],
    drawing: _Drawing,
) -> str:
    call_id = call.id if call is not None else result.call_id if result is not None else ""
    soft = " soft-error" if result is not None and result.is_error else ""
    soft += " waiting" if result is None and call_id in drawing.pending else ""
    head = (
        f'<div class="call-head"><span class="tool">{text(call.name)}</span> '
        f'<span class="call-id">{text(call.id)}</span></div>'
        f'<pre class="arguments">{_arguments(call)}</pre>'
        if call is not None
        else '<div class="call-head">(a result that answers no call)</div>'
    )
    nested = "".join(_child_html(child, drawing) for child in drawing.children.get(call_id, ()))
    said = _result_html(result, result_data, call_id in drawing.pending)
    return f'<div class="call{soft}" data-call="{attr(call_id)}">{head}{said}{nested}</div>'


def _child_html(child: StoredRun, drawing: _Drawing) -> str:
    run, status = child.run, status_of(child)
    link = f'<a href="/runs/{attr(run.id)}">{text(run.id[:12])}</a>'
    deeper = drawing.depth >= MAX_DEPTH
    inner = "" if deeper else turns_html(run, drawing.nesting, drawing.depth + 1)
    return (
        f'<details class="child-run" id="child-{attr(run.id)}" open data-run="{attr(run.id)}">'
        "<summary>sub-agent run "
        f'{link} <span class="badge status-{status}">{status}</span> · {len(run.turns)} '
        f"turn{'s' * (len(run.turns) != 1)}</summary>{inner}</details>"
    )


def _usage_line(turn: Turn, data: Mapping[str, Any]) -> str:
    usage = turn.usage
    parts = [f"{tokens(usage.input_tokens)} in", f"{tokens(usage.output_tokens)} out"]
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    if cached:
        parts.append(f"{tokens(cached)} cached")
    if usage.reasoning_tokens:
        parts.append(f"{tokens(usage.reasoning_tokens)} reasoning")
    parts.append(cost(turn_cost(usage, turn.model)))
    latency = _seconds_field(data, "latency_seconds", "latency")
    if latency is not None:
        parts.append(f"latency {seconds(latency)}")
    if turn.stop_reason:
        parts.append(f"stop: {text(turn.stop_reason)}")
    return " · ".join(parts)


def _turn_html(turn: Turn, drawing: _Drawing, *, paused: bool = False) -> str:
    data = turn.to_dict()
    results = {r.get("call_id"): r for r in data.get("tool_results", ())}
    where = str(drawing.depth) if drawing.depth == 0 else attr(drawing.run_id)
    key = f"{where}-{turn.index}"  # unique on the page: an open <details> survives an update
    thinking = (
        f'<details class="reasoning" id="reasoning-{key}"><summary>reasoning '
        f"({len(turn.thinking):,} characters)</summary>"
        f"<pre>{text(turn.thinking)}</pre></details>"
        if turn.thinking
        else ""
    )
    said = f'<pre class="reply">{text(turn.text)}</pre>' if turn.text else ""
    calls = "".join(
        _call_html(c, r, results.get(r.call_id if r else None) or {}, drawing)
        for c, r in _pairs(turn)
    )
    waits = ' <span class="badge pending">paused</span>' if paused else ""
    if turn.agent is not None:  # after a handoff (SPEC 26): the agent that served the turn
        waits = f' <span class="badge agent">agent {text(turn.agent)}</span>{waits}'

    warned = "".join(
        f'<div class="warning"><span class="badge loop">warning</span> {text(w)}</div>'
        for w in turn.warnings or ()
    )
    return (
        f'<section class="turn{" paused" * paused}" id="turn-{key}"><h3>turn {turn.index} '
        f'<span class="model">{text(turn.model)}</span>{waits}</h3>'
        f'<div class="usage">{_usage_line(turn, data)}</div>{thinking}{said}{calls}{warned}'
        "</section>"
    )


def turns_html(run: Run, nesting: Nesting, depth: int = 0) -> str:
    """Every turn of ``run`` (a paused run's waiting turn last), sub-agent runs nested."""
    pending = frozenset(p.id for p in run.pending)
    drawing = _Drawing(nesting, depth, run.id, nesting.of(run.id), pending)
    drawn = [_turn_html(turn, drawing) for turn in run.turns]
    paused = paused_turn_of(run)
    if paused is not None:
        drawn.append(_turn_html(paused, drawing, paused=True))
    return "".join(drawn)
