"""The command line: a thin layer of argparse and rich over the public API.

``agentloop demo`` runs real agent loops over the real OpenAI-compatible HTTP adapter against
local fault-injecting servers it starts (no key, no network beyond 127.0.0.1; ``_demo.py``).
``agentloop fake-server`` runs that server for your own tests; ``agentloop run`` runs a real task
with read-only tools.
``agentloop runs`` lists the runs in a store and ``agentloop runs show ID`` prints one of them,
with its error's class, message and attributes; a damaged record is one error line on standard
error (exit 1), and the readable runs are still listed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from agentloop.cli.advice import Target, failure_paragraph
from agentloop.errors import AgentLoopError, AttemptRecord, InvalidInput, MemoryBackendError
from agentloop.messages import ToolCallPart, ToolResultPart

if TYPE_CHECKING:  # the engine, its tools and rich load in the commands that use them
    from rich.console import Console
    from rich.text import Text

    from agentloop import Agent, Run, Turn
    from agentloop.cli.console import LineScreen, LiveScreen, RunView
    from agentloop.store import PostgresStore, SQLiteStore, Store, StoredRun
    from agentloop.testing import FakeProviderServer

__all__ = ["main"]


def _console(*, plain: bool = False) -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True, color_system=None if plain else "auto")


_FAULTS = (
    "rate_limit",
    "auth",
    "insufficient_credits",
    "quota",
    "context_overflow",
    "server_error",
    "redirect",
    "reset",
    "hang",
    "truncate",
    "malformed",
)


def _fake_server_for(
    port: int, faults: Sequence[str], script: str | None, models: Sequence[str] | None
) -> FakeProviderServer:
    """The server the flags describe: ``--faults`` first, then the script's steps."""
    from agentloop.testing import FakeProviderServer, FakeReply, FakeScript, Fault, load_fake_script

    parsed = FakeScript(default=FakeReply("ok")) if script is None else load_fake_script(script)
    steps = [*(getattr(Fault, name)() for name in faults), *parsed.steps]
    return FakeProviderServer(
        steps,
        default=parsed.default,
        model=models[0] if models else parsed.model,
        models=models or parsed.models,
        port=port,
    )


async def _fake_server(
    server: FakeProviderServer, faults: Sequence[str], script: str | None
) -> int:
    await server.start()
    print(f"fake OpenAI-compatible server on {server.base_url} (Ctrl-C to stop)", flush=True)
    served = ", ".join(server.models) if server.models else f"any ({server.model} echoed)"
    print(f"models: {served}", flush=True)
    if faults:
        print(f"the first {len(faults)} requests fail with: {', '.join(faults)}", flush=True)
    if script is not None:
        print(f"playing the script {script}, one step per request", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()
    return 0


async def _run(args: argparse.Namespace) -> int:
    """``agentloop run``: stream one task's events to the screen, store the run, explain failure."""
    from rich.text import Text

    from agentloop import Agent, RunConfig
    from agentloop.builtin_tools import workspace_tools
    from agentloop.cli.console import LineScreen, LiveScreen, RunView, logs_shown
    from agentloop.providers.settings import DEFAULT_MODELS, Settings, build_client

    settings = Settings(provider=args.provider, model=args.model, base_url=args.base_url)
    client = build_client(settings)
    model = settings.model or DEFAULT_MODELS.get(settings.provider)
    target = Target(settings.provider, model, settings.base_url, settings.key_env_var())
    store = None if args.no_store else _run_store(args.store)
    console = _console(plain=args.plain)
    live = console.is_terminal and not args.plain
    if live:  # rich wraps what the live area shows, so it knows the area's height
        console.soft_wrap = False
    screen: LineScreen | LiveScreen = LiveScreen(console) if live else LineScreen(console)
    agent = Agent(
        client, tools=workspace_tools(Path.cwd()), config=RunConfig(stream=True), store=store
    )
    console.print(Text.assemble(("task: ", "dim"), args.task))
    try:
        with logs_shown(screen.line, debug=args.debug), screen:
            run, error = await _streamed(agent, args.task, RunView(screen))
    finally:
        await client.aclose()
        if store is not None:
            store.close()
    console.print(_summary(run, None if store is None else args.store), style="dim")
    if error is None:
        return 0
    _report(error, target, debug=args.debug)
    return 130 if error.is_cancelled() else 1


async def _streamed(agent: Agent, task: str, view: RunView) -> tuple[Run, AgentLoopError | None]:
    """Draw every event of the run; its hard error (raised after ``RunFinished``) is returned."""
    async with agent.stream(task) as events:
        try:
            async for event in events:
                view.apply(event)
        except AgentLoopError as error:
            return events.run, error
    return events.run, None


def _run_store(location: str) -> Store:
    from agentloop.store import PostgresStore, SQLiteStore

    if location.startswith(("postgres://", "postgresql://")):
        return PostgresStore(location)
    return SQLiteStore(location)


def _counts(run: Run) -> str:
    """``3 turns, 1 tool call``."""
    calls = f"{run.tool_calls} tool call{'s' * (run.tool_calls != 1)}"
    return f"{len(run.turns)} turn{'s' * (len(run.turns) != 1)}, {calls}"


def _summary(run: Run, store: str | None) -> str:
    tokens = f"{run.usage.input_tokens} tokens in, {run.usage.output_tokens} out"
    where = f"stored in {store}" if store is not None else "not stored (--no-store)"
    return f"{_counts(run)}, {tokens}; run {run.id[:12]} {where}"


def _report(error: AgentLoopError, target: Target, *, debug: bool) -> None:
    """The failure as one paragraph on stderr; the traceback too with ``--debug``."""
    import traceback

    from rich.console import Console
    from rich.text import Text

    console = Console(stderr=True, highlight=False)
    label = "cancelled" if error.is_cancelled() else "error"
    paragraph = Text.assemble((f"{label}: ", "bold red"), failure_paragraph(error, target))
    console.print(paragraph, soft_wrap=not console.is_terminal)
    if debug:
        console.print(Text("".join(traceback.format_exception(error))), soft_wrap=True)


def _open_store(location: str) -> SQLiteStore | PostgresStore:
    from agentloop.store import PostgresStore, SQLiteStore

    if location.startswith(("postgres://", "postgresql://")):
        return PostgresStore(location)
    if not Path(location).is_file():
        raise InvalidInput(f"no store at {location!r} (pass --store PATH)")
    return SQLiteStore(location)


def _runs(location: str, run_id: str | None, session: str | None) -> int:
    """``runs`` and ``runs show``: 0, or 1 when a stored record could not be read."""
    console = _console()
    store = _open_store(location)
    try:
        if run_id is None:
            return _list_runs(console, store.scan_runs(session))
        stored = store.load_run(run_id) or _by_prefix(store, run_id)
    except MemoryBackendError as error:
        _unreadable(error)
        return 1
    finally:
        store.close()
    _show_run(console, stored)
    return 0


def _unreadable(error: MemoryBackendError) -> None:
    print(f"agentloop: {type(error).__name__}: {error}", file=sys.stderr)


def _by_prefix(store: SQLiteStore | PostgresStore, prefix: str) -> StoredRun:
    matches = [stored for run_id, stored in store.scan_runs() if run_id.startswith(prefix)]
    if len(matches) != 1:
        problem = "no stored run" if not matches else f"{len(matches)} stored runs"
        raise InvalidInput(f"{problem} with an id starting {prefix!r}")
    if isinstance(matches[0], MemoryBackendError):
        raise matches[0]
    return matches[0]


def _outcome(stored: StoredRun) -> str:
    run = stored.run
    if not stored.finished:
        return "[yellow]unfinished[/] (no recorded end)"
    if run.stop_reason is not None:
        return f"[red]{type(run.stop_reason).__name__}[/]: {_escape(str(run.stop_reason))}"
    return _escape(_first_line(_plain_text(run.output)))


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


def _when(timestamp: float | None, timespec: str = "seconds") -> str:
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp).isoformat(sep=" ", timespec=timespec)


def _list_runs(
    console: Console, scanned: Sequence[tuple[str, StoredRun | MemoryBackendError]]
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
            _when(run.started_at, "minutes"),
            str(len(run.turns)),
            str(run.tool_calls),
            _outcome(stored),
        )
    console.print(table)
    damaged = [error for _, error in scanned if isinstance(error, MemoryBackendError)]
    for error in damaged:
        _unreadable(error)
    more = f", {len(damaged)} damaged record{'s' * (len(damaged) != 1)}" if damaged else ""
    console.print(f"{len(runs)} run{'s' * (len(runs) != 1)}{more}")
    return 1 if damaged else 0


def _show_run(console: Console, stored: StoredRun) -> None:
    from rich.table import Table

    run = stored.run
    fields = Table("field", "value", show_header=False, title=f"run {run.id}")
    for name, value in (
        ("session", _escape(stored.session_id)),
        ("input", _escape(_plain_text(run.input))),
        ("output", _escape(_plain_text(run.output))),
        ("outcome", _outcome(stored)),
        ("turns", f"{len(run.turns)} ({run.tool_calls} tool call{'s' * (run.tool_calls != 1)})"),
        ("tokens", f"{run.usage.input_tokens} in, {run.usage.output_tokens} out"),
        ("started", _when(run.started_at)),
        ("ended", _when(run.ended_at)),
        ("unfinished_input", _escape(_plain_text(run.unfinished_input))),
    ):
        fields.add_row(name, value)
    console.print(fields)
    if run.stop_reason is not None:
        _show_error(console, run.stop_reason)
    for turn in run.turns:
        _show_turn(console, turn)


def _show_turn(console: Console, turn: Turn) -> None:
    """One turn: its text, each tool call with its arguments, and what each call returned.

    Everything stored is user or model text: it goes out as ``rich.text.Text``, never as
    markup, and soft errors are printed whole (they are what the model read).
    """
    from rich.text import Text

    soft = sum(r.is_error for r in turn.tool_results)
    counts = [f"{len(turn.tool_calls)} tool call{'s' * (len(turn.tool_calls) != 1)}"]
    if soft:
        counts.append(f"{soft} soft error{'s' * (soft != 1)}")
    console.print(
        Text.assemble((f"turn {turn.index}", "bold"), f" ({turn.model}): {', '.join(counts)}")
    )
    if turn.text:
        _indented(console, 2, Text.assemble(("says: ", "dim"), turn.text))
    for call, result in _pairs(turn):
        if call is not None:
            _indented(
                console, 2, Text.assemble(("call ", "dim"), (call.name, "cyan"), " ", _json(call))
            )
        if result is None:
            _indented(console, 4, Text("(no result recorded)", style="dim"))
        elif result.is_error:
            _indented(console, 4, Text.assemble(("soft error", "yellow"), ": ", result.content))
        else:
            _indented(console, 4, Text.assemble(("ok", "green"), ": ", _preview(result.content)))


def _indented(console: Console, indent: int, text: Text) -> None:
    """Print ``text`` wrapped to the console's width, every line indented (no trailing blanks)."""
    from rich.text import Text

    for line in text.wrap(console, max(20, console.width - indent)):
        line.rstrip()
        console.print(Text(" " * indent) + line, soft_wrap=True)


def _pairs(turn: Turn) -> list[tuple[ToolCallPart | None, ToolResultPart | None]]:
    """Each call with its result (by id), then any result that answers no call."""
    results = {r.call_id: r for r in turn.tool_results}
    pairs: list[tuple[ToolCallPart | None, ToolResultPart | None]] = [
        (call, results.pop(call.id, None)) for call in turn.tool_calls
    ]
    return pairs + [(None, result) for result in results.values()]


def _json(call: ToolCallPart) -> str:
    import json

    return json.dumps(dict(call.arguments), ensure_ascii=False, default=repr)


def _preview(text: str, limit: int = 120) -> str:
    """A successful result's first line, cut at ``limit`` characters."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    more = len(first) > limit or first != text.strip()
    return first[:limit] + (" …" if more else "")


def _show_error(console: Console, error: AgentLoopError) -> None:
    from rich.table import Table

    table = Table("attribute", "value", title=f"stop_reason: {type(error).__name__}")
    table.add_row("class", type(error).__name__)
    table.add_row("message", _escape(str(error)))
    table.add_row("recoverability", error.recoverability)
    for name, value in sorted(error.attributes().items()):
        if name == "attempt_log":
            value = "\n".join(_attempt(record) for record in value) or "()"
        elif isinstance(value, float):
            value = _seconds(value) if name.endswith(("_seconds", "_after")) else f"{value:g}"
        table.add_row(_escape(name), _escape(str(value)))
    console.print(table)


def _attempt(record: AttemptRecord) -> str:
    phase = "-" if record.phase is None else str(record.phase)
    wait = f", then waited {_seconds(record.wait_seconds)}" if record.wait_seconds > 0 else ""
    return (
        f"#{record.attempt} {record.error_type} status={record.status_code} phase={phase} "
        f"sent={record.request_sent} took {_seconds(record.duration_seconds)}{wait}"
    )


def _seconds(value: float) -> str:
    """Seconds rounded for reading: 0.25s, 3.1s, 42s."""
    if value >= 10:
        return f"{value:.0f}s"
    if value >= 1:
        return f"{value:.1f}s"
    return f"{value:.2f}s"


def _escape(text: str) -> str:
    """Escape rich markup in stored text."""
    from rich.markup import escape

    return escape(text)


def _fault_list(text: str) -> list[str]:
    names = [name.strip().replace("-", "_") for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in _FAULTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown fault(s): {', '.join(unknown)}")
    return names


def _name_list(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentloop", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="offline demo over a local fault-injecting server")
    fake = sub.add_parser("fake-server", help="run the fault-injecting fake provider")
    fake.add_argument("--port", type=int, default=0, help="0 (the default) picks a free port")
    fake.add_argument(
        "--faults",
        type=_fault_list,
        default=[],
        help=f"comma-separated faults for the first requests: {', '.join(_FAULTS)}",
    )
    fake.add_argument(
        "--script",
        metavar="FILE",
        help="replies, tool calls, faults and delays per request, from JSON or TOML "
        "(docs/fake-server.md); without it every request is answered 'ok'",
    )
    fake.add_argument(
        "--models",
        type=_name_list,
        help="comma-separated models served; others get 404 model_not_found (default: any)",
    )
    run = sub.add_parser("run", help="run a task with read-only tools, streaming the reply")
    run.add_argument("task", help="the task, printed literally (brackets are not markup)")
    run.add_argument("--provider", required=True, help="openai, openrouter, ollama, ...")
    run.add_argument("--model", help="the model name (default: the provider's small model)")
    run.add_argument(
        "--base-url", help="an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1"
    )
    run.add_argument("--store", default="agentloop.db", help="SQLite file or postgresql:// DSN")
    run.add_argument("--no-store", action="store_true", help="do not record the run")
    run.add_argument(
        "--plain", action="store_true", help="plain lines: no colour, markdown or spinner"
    )
    run.add_argument("--debug", action="store_true", help="print tracebacks")
    runs = sub.add_parser("runs", help="list the runs in a store; 'runs show ID' prints one")
    runs.add_argument("--store", default="agentloop.db", help="SQLite file or postgresql:// DSN")
    runs.add_argument("--session", help="only this session's runs")
    show_sub = runs.add_subparsers(dest="runs_command")
    show = show_sub.add_parser("show", help="one run with its error's class and attributes")
    show.add_argument("run_id", metavar="ID", help="a run id or a unique prefix of one")
    show.add_argument("--store", default=argparse.SUPPRESS, help="as for 'runs'")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentloop`` and ``python -m agentloop``."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            from agentloop.cli.demo import run_demo

            return run_demo()
        if args.command == "fake-server":
            server = _fake_server_for(args.port, args.faults, args.script, args.models)
            return asyncio.run(_fake_server(server, args.faults, args.script))
        if args.command == "runs":
            return _runs(args.store, getattr(args, "run_id", None), args.session)
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 130
    except AgentLoopError as error:
        print(f"agentloop: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
