"""``agentloop runs`` and ``agentloop runs show ID``: the runs in a store, read back for a person.

Separate from ``commands`` because reading a store back is its own concern: finding a run by a
prefix of its id, telling a damaged record from a readable one (each damaged record is one line
on standard error and exit 1, while the readable runs are still listed), and printing stored
text, which is user and model text, never as rich markup. A run's hard error is shown with its
class, message, recoverability and every typed attribute (the attempt log one line an attempt).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from agentloop.cli.stopped import escape_said as _escape
from agentloop.cli.terminal import visible
from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.messages import ToolCallPart, ToolResultPart, input_text
from agentloop.model import INVALID_JSON_KEY
from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:  # rich and the stores load when the command runs
    from collections.abc import Iterator

    from rich.console import Console, ConsoleOptions
    from rich.measure import Measurement
    from rich.text import Text

    from agentloop import Run, Turn
    from agentloop.pausing import PendingCall
    from agentloop.store import PostgresStore, SQLiteStore, StoredRun

__all__ = ["LIMIT", "find_run", "runs"]

LIMIT = 50
"""How many runs ``agentloop runs`` lists by default: the newest (``--limit``)."""


def _open_store(location: str) -> SQLiteStore | PostgresStore:
    from agentloop.store import PostgresStore, SQLiteStore

    if location.startswith(("postgres://", "postgresql://")):
        return PostgresStore(location, read_only=True)
    if not Path(location).is_file():
        raise InvalidInput(f"no store at {location!r} (pass --store PATH)")
    return SQLiteStore(location, read_only=True)  # reading never writes: not a table, not WAL


def runs(
    console: Console,
    location: str,
    run_id: str | None,
    session: str | None,
    limit: int = LIMIT,
    *,
    status: str | None = None,
) -> int:
    """``runs`` and ``runs show``: 0, or 1 when a stored record could not be read.

    The list is the newest ``limit`` runs (0: all of them) of ``status`` (None: any), oldest of
    those first; the status is chosen in SQL (the store's ``status`` column).
    """
    store = _open_store(location)
    try:
        if run_id is None:
            return _list_runs(console, *_newest(store, session, limit, status))
        stored = store.load_run(run_id)
        if stored is None and (of_session := _newest(store, run_id, limit))[0]:
            console.print(f"session {_escape(run_id)}: its runs ('runs show ID' prints one)")
            return _list_runs(console, *of_session)
        stored = stored or _by_prefix(store, run_id)
    except MemoryBackendError as error:
        _unreadable(error)
        return 1
    finally:
        store.close()
    _show_run(console, stored, location)
    return 0


def _newest(
    store: SQLiteStore | PostgresStore, session: str | None, limit: int, status: str | None = None
) -> tuple[list[tuple[str, StoredRun | MemoryBackendError]], int]:
    """The newest ``limit`` runs (all when 0) in the order they started, and how many there are.

    One page of the store (``page_runs``): a store of 100,000 runs lists as fast as one of 50.
    """
    if limit < 1:
        scanned = store.scan_runs(session, status=status)
        return scanned, len(scanned)
    page = store.page_runs(session, limit=limit, status=status)
    return page.runs[::-1], page.total


def _unreadable(error: MemoryBackendError) -> None:
    print(visible(f"agentloop: {type(error).__name__}: {error}"), file=sys.stderr)


def find_run(store: SQLiteStore | PostgresStore, run_id: str) -> StoredRun:
    """The stored run with this id or unique id prefix (``InvalidInput`` when there is none)."""
    return store.load_run(run_id) or _by_prefix(store, run_id)


def _by_prefix(store: SQLiteStore | PostgresStore, prefix: str) -> StoredRun:
    matches = [stored for _, stored in store.runs_starting(prefix, limit=2)]  # 1 is the answer
    if len(matches) != 1:
        problem = "more than one stored run" if matches else "no stored run"
        raise InvalidInput(f"{problem} with an id starting {prefix!r}")
    if isinstance(matches[0], MemoryBackendError):
        raise matches[0]
    return matches[0]


def _outcome(stored: StoredRun) -> str:
    run = stored.run
    if run.paused:  # before "unfinished": a paused run has no end yet, and needs none
        waiting = "\n".join(_waiting(p) for p in run.pending)
        return f"[magenta]paused[/]: {waiting}"
    if run.waiting is not None:  # a batch run (SPEC 25): its turn is in a provider batch
        return f"[magenta]waiting[/]: batch {_escape(run.waiting.batch_id)} (agentloop batch poll)"
    if not stored.finished:
        return "[yellow]unfinished[/] (no recorded end)"
    if run.stop_reason is not None:
        return f"[red]{type(run.stop_reason).__name__}[/]: {_escape(str(run.stop_reason))}"
    return _escape(_first_line(_plain_text(run.output)))


def _outcome_cell(stored: StoredRun) -> Text | _TwoLines:
    """The runs table's outcome, kept short: ``agentloop runs show ID`` prints it in full.

    A hard error is ``Class: message``, its first line, wrapped to the column and kept to two
    lines, the second cut with an ellipsis (a 20-line cell at 80 columns said less, not more).
    """
    from rich.text import Text

    run = stored.run
    if not run.paused and stored.finished and run.stop_reason is not None:
        said = _said(_first_line(str(run.stop_reason), 200))
        return _TwoLines(Text.assemble((type(run.stop_reason).__name__, "red"), ": ", said))
    return Text.from_markup(_outcome(stored))


class _TwoLines:
    """A table cell's text wrapped to its column and kept to two lines, cut with ``…``."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        from rich.measure import Measurement

        return Measurement.get(console, options, self.text)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        from rich.text import Text

        lines = list(self.text.wrap(console, options.max_width))
        if len(lines) > 2:
            lines = lines[:2]
            lines[1].rstrip()
            lines[1].append("…")
            lines[1].truncate(options.max_width, overflow="ellipsis")
        yield Text("\n").join(lines)


def _waiting(pending: PendingCall) -> str:
    """``refund c1 (approval: "Refund over 100?")``: a pending call in the outcome column."""
    said = f": {_first_line(pending.message, 40)}" if pending.message else ""
    return _escape(f"{pending.call.name} {pending.id} ({pending.kind}{said})")


def _plain_text(value: object) -> str:
    """Stored text as the reader wrote it (never a Python repr); typed output as JSON."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


def _first_line(text: str, width: int = 48) -> str:
    line = text.strip().split("\n", 1)[0]
    more = line != text.strip()
    if len(line) > width:
        line, more = line[: width - 1], True
    return line + ("…" if more else "")


def _paused_turn(run: Run) -> Turn | None:
    """A paused run's waiting turn (its reply asked for the pending calls), when readable."""
    from agentloop import Turn

    data = (run.paused_turn or {}).get("turn") if run.paused else None
    if not isinstance(data, dict):
        return None
    try:
        return Turn.from_dict(data)
    except InvalidInput:  # the pending calls are still listed on their own
        return None


def _turns_of(run: Run) -> list[Turn]:
    """The run's turns, a paused run's waiting turn last: it happened, and it counts."""
    paused = _paused_turn(run)
    return [*run.turns, *([paused] if paused is not None else [])]


def _tool_calls_of(run: Run) -> int:
    return sum(len(turn.tool_calls) for turn in _turns_of(run))


def _started(timestamp: float | None) -> str:
    """``12-04 23:05`` this year, ``2025-12-04`` before: the runs table's narrow column."""
    if timestamp is None:
        return "-"
    at = datetime.fromtimestamp(timestamp)
    return at.strftime("%m-%d %H:%M" if at.year == datetime.now().year else "%Y-%m-%d")


def _when(timestamp: float | None, timespec: str = "seconds") -> str:
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp).isoformat(sep=" ", timespec=timespec)


def _list_runs(
    console: Console, scanned: Sequence[tuple[str, StoredRun | MemoryBackendError]], total: int
) -> int:
    """The readable runs as a table; each damaged record one line on stderr (then exit 1)."""
    from rich.table import Table

    table = Table("session", "run", "started", "turns", "calls", "outcome")
    for column in table.columns[:3]:
        column.no_wrap = True  # the outcome column takes what an 80-column terminal leaves
    runs = [stored for _, stored in scanned if not isinstance(stored, MemoryBackendError)]
    for stored in runs:
        run = stored.run
        table.add_row(
            _escape(stored.session_id[:12]),
            _escape(run.id[:12]),
            _started(run.started_at),
            str(len(_turns_of(run))),
            str(_tool_calls_of(run)),
            _outcome_cell(stored),
        )
    console.print(table)
    damaged = [error for _, error in scanned if isinstance(error, MemoryBackendError)]
    for error in damaged:
        _unreadable(error)
    more = f", {len(damaged)} damaged record{'s' * (len(damaged) != 1)}" if damaged else ""
    shown = f"{len(runs)} run{'s' * (len(runs) != 1)}{more}"
    if total > len(scanned):
        shown = f"the latest {shown} of {total} (--limit N lists more, --limit 0 all)"
    console.print(shown)
    return 1 if damaged else 0


def _show_run(console: Console, stored: StoredRun, location: str) -> None:
    from rich.table import Table

    run = stored.run
    fields = Table("field", "value", show_header=False, title=f"run {run.id}")
    for name, value in (
        ("session", _escape(stored.session_id)),
        ("status", _status(stored)),
        ("input", _escape(input_text(run.input))),
        ("output", _escape(_plain_text(run.output))),
        ("outcome", _outcome(stored)),
        ("turns", _counts(run)),
        ("tokens", _tokens(run)),
        ("started", _when(run.started_at)),
        ("ended", _when(run.ended_at)),
        ("unfinished_input", _escape(_plain_text(run.unfinished_input))),
    ):
        fields.add_row(name, value)
    for name, names in (("tools loaded", run.loaded_tools), ("skills read", run.skills_read)):
        if names:  # SPEC 22: what tool search loaded, the skills the model read
            fields.add_row(name, _escape(", ".join(names)))
    console.print(fields)
    if run.stop_reason is not None:
        from agentloop.cli.stopped import show_error

        show_error(console, run.stop_reason)
    closed = _closed(run)
    for turn in _turns_of(run):
        _show_turn(console, turn, paused=turn.index >= len(run.turns), closed=closed)
    _show_provider_tools(console, run)
    _show_decisions(console, run)
    if run.paused:
        _show_pending(console, stored, location)


def _status(stored: StoredRun) -> str:
    """``waiting (batch msgbatch_01…)``: the stored status, a waiting run's batch id with it."""
    wait = stored.run.waiting
    said = f" (batch {_escape(wait.batch_id)})" if stored.status == "waiting" and wait else ""
    return stored.status + said


def _counts(run: Run) -> str:
    """``1 (2 tool calls; turn 0 waits on a decision)``: a paused turn and its calls count."""
    turns, calls = _turns_of(run), _tool_calls_of(run)
    said = f"{len(turns)} ({calls} tool call{'s' * (calls != 1)}"
    if len(turns) > len(run.turns):
        said += f"; turn {turns[-1].index} waits on a decision"
    return said + ")"


def _show_provider_tools(console: Console, run: Run) -> None:
    """The provider's own tool calls, their results or error codes, and citations (SPEC 24)."""
    from agentloop.cli.server_tools import message_lines

    lines = [line for m in run.messages if m.role == "assistant" for line in message_lines(m)]
    if lines:
        console.print("provider tools and sources:", style="bold")
        for line in lines:
            console.print(line, soft_wrap=True)


_APP_AGENT = (
    "a run an application paused goes on with its own Agent (its instructions, tools and "
    "guardrails): --agent MODULE:NAME instead of --provider ... --tools"
)


def _show_pending(console: Console, stored: StoredRun, location: str) -> None:
    """The calls the run waits on, with their arguments, and how to continue it."""
    from rich.text import Text

    from agentloop.cli.pending import continue_lines, pending_lines

    run = stored.run
    model = next((t.model for t in reversed(run.turns) if t.model), None)
    if run.paused_turn:
        model = str(run.paused_turn.get("turn", {}).get("model") or model or "")
    flags = ["--store", shlex.quote(location), "--provider", "PROVIDER"]
    flags += [*(("--model", shlex.quote(model)) if model else ()), "--tools", "MODULE:NAME"]
    lines = pending_lines(run.pending)
    lines += continue_lines(run.pending, run.id, stored.session_id, flags, stored=True)
    lines.append(Text(_APP_AGENT, "dim"))
    for line in lines:
        console.print(line, soft_wrap=True)


def _show_decisions(console: Console, run: Run) -> None:
    """Every decision set applied to the run: when, and what for each call."""
    from rich.text import Text

    from agentloop.cli.pending import shown_arguments

    for applied in run.decisions:
        at = applied.get("at")
        when = _when(at if isinstance(at, int | float) else None)
        console.print(Text.assemble(("decided", "bold"), f" at {when}:"))
        for call_id, decision in dict(applied.get("decisions") or {}).items():
            what = str(decision.get("kind", "?"))
            if what == "edit":
                what += " " + shown_arguments(dict(decision.get("arguments") or {}))
            elif decision.get("message") or what == "answer":
                said = decision.get("message") if what == "deny" else decision.get("content")
                what += ": " + _said(_plain_text(said))
            _indented(console, 2, Text.assemble((visible(call_id), "bold"), " ", what))


def _tokens(run: Run) -> str:
    usage = run.usage
    if usage.input_tokens or usage.output_tokens or not run.turns:
        return f"{usage.input_tokens} in, {usage.output_tokens} out"
    return "not reported by the server"


def _show_turn(
    console: Console,
    turn: Turn,
    *,
    paused: bool = False,
    closed: dict[str, ToolResultPart] | None = None,
) -> None:
    """One turn: its text, each tool call with its arguments, and what each call returned.

    Everything stored is user or model text: it goes out as ``rich.text.Text``, never as
    markup, and soft errors are printed whole (they are what the model read).
    """
    from rich.text import Text

    from agentloop.cli.console import binary_placeholder  # rich's Markdown: `runs show` only

    head = _turn_head(turn)
    console.print(head + Text(" (paused: waits on a decision)" if paused else ""))
    if turn.thinking:
        thinking = _said(turn.thinking)
        _indented(console, 2, Text.assemble(("thinks: ", "dim italic"), (thinking, "dim")))
    if turn.text:
        _indented(console, 2, Text.assemble(("says: ", "dim"), _said(turn.text)))
    for call, result in _pairs(turn, closed or {}):
        if call is not None:
            name, args = visible(call.name), _arguments(call)
            _indented(console, 2, Text.assemble(("call ", "dim"), (name, "cyan"), " ", args))
        if result is None:
            missing = "(pending: waits on a decision)" if paused else "(no result recorded)"
            _indented(console, 4, Text(missing, style="dim"))
        elif result.is_error:
            said = _said(result.content)
            _indented(console, 4, Text.assemble(("soft error", "yellow"), ": ", said))
        else:
            body = binary_placeholder(result.content, call) or _preview(result.content)
            _indented(console, 4, Text.assemble(("ok", "green"), ": ", _said(body)))
        if result is not None and result.media:  # a placeholder: type, size, sha256, never bytes
            notes = " ".join(m.describe() for m in result.media)
            _indented(console, 4, Text.assemble(("media", "cyan"), ": ", notes))


def _turn_head(turn: Turn) -> Text:
    """``turn 1 (gpt-5, agent billing, batch): 2 tool calls, 1 soft error``."""
    from rich.text import Text

    soft = sum(r.is_error for r in turn.tool_results)
    counts = [f"{len(turn.tool_calls)} tool call{'s' * (len(turn.tool_calls) != 1)}"]
    if soft:
        counts.append(f"{soft} soft error{'s' * (soft != 1)}")
    model = visible(turn.model)
    if turn.agent is not None:  # a handoff's receiver ruled the turn (SPEC 26)
        model += f", agent {visible(turn.agent)}"
    if turn.batch:  # its model call went through the provider's batch API (SPEC 25)
        model += ", batch"
    return Text.assemble((f"turn {turn.index}", "bold"), f" ({model}): {', '.join(counts)}")


def _indented(console: Console, indent: int, text: Text) -> None:
    """Print ``text`` wrapped to the console's width, every line indented (no trailing blanks)."""
    from rich.text import Text

    for line in text.wrap(console, max(20, console.width - indent)):
        line.rstrip()
        console.print(Text(" " * indent) + line, soft_wrap=True)


def _closed(run: Run) -> dict[str, ToolResultPart]:
    """The results the run's messages hold by call id: a call an ending cut off is closed there.

    A cancelled paused turn (``cancel_run``) or a turn a hard error cut mid-dispatch keeps its
    calls without results in ``turn.tool_results``; its messages answer each with the
    interrupted text, which is what the call ended with.
    """
    return {
        part.call_id: part
        for message in run.messages
        if message.role == "tool"
        for part in message.parts
        if isinstance(part, ToolResultPart)
    }


def _pairs(
    turn: Turn, closed: dict[str, ToolResultPart]
) -> list[tuple[ToolCallPart | None, ToolResultPart | None]]:
    """Each call with its result (by id, else as the messages closed it), then the rest."""
    results = {r.call_id: r for r in turn.tool_results}
    pairs: list[tuple[ToolCallPart | None, ToolResultPart | None]] = [
        (call, results.pop(call.id, None) or closed.get(call.id)) for call in turn.tool_calls
    ]
    return pairs + [(None, result) for result in results.values()]


def _arguments(call: ToolCallPart) -> str:
    """The arguments as JSON; text that was not a JSON object as sent, marked invalid."""
    import json

    raw = call.arguments.get(INVALID_JSON_KEY)
    if len(call.arguments) == 1 and isinstance(raw, str):
        return visible(f"(invalid JSON) {raw}")
    return visible(
        redact_secrets(json.dumps(dict(call.arguments), ensure_ascii=False, default=repr))
    )


def _preview(text: str, limit: int = 120) -> str:
    """A successful result's first line, cut at ``limit`` characters."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    more = len(first) > limit or first != text.strip()
    return first[:limit] + (" …" if more else "")


def _said(text: str) -> str:
    """Stored text for a person: secrets redacted, control characters shown (as the viewer)."""
    return visible(redact_secrets(text))
