"""The command line: a thin layer of argparse and rich over the public API.

``agentloop demo`` runs real agent loops over the real OpenAI-compatible HTTP adapter against
local fault-injecting servers it starts (no key, no network beyond 127.0.0.1).
``agentloop fake-server`` runs that server for your own tests; ``agentloop run`` runs a real task
with read-only tools.
``agentloop runs`` lists the runs in a store and ``agentloop runs show ID`` prints one of them,
with its error's class, message and attributes; a damaged record is one error line on standard
error (exit 1), and the readable runs are still listed. ``agentloop runs cancel ID`` ends a
paused or waiting run as ``Cancelled``.
A run whose tool needs approval asks on a terminal (y/n/edit) and goes on; elsewhere it stops
paused (exit status 4) and ``agentloop continue ID --approve CALL ...`` decides it later.
``agentloop ui`` serves the run viewer, a local web page over a store (the ``ui`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop._util.extras import MissingExtra, require_extra
from agentloop._util.statuses import STATUSES
from agentloop.cli import evals, fake
from agentloop.cli.advice import Target, failure_paragraph
from agentloop.cli.app_agent import app_session, check_agent_flags
from agentloop.cli.batch import add_batch_parser, batch_command, continue_batch, is_batch_run
from agentloop.cli.cancel import add_cancel_parser, cancel_command
from agentloop.cli.memory import add_memory_parser, memory_command
from agentloop.errors import AgentLoopError, InvalidInput, ModelRefused

if TYPE_CHECKING:  # the engine, its tools and rich load in the commands that use them
    from rich.console import Console

    from agentloop import Agent, Run, Session
    from agentloop.cli.console import RunView
    from agentloop.engine.stream import RunStream
    from agentloop.errors import MemoryBackendError
    from agentloop.messages import UserInput
    from agentloop.model import ModelClient
    from agentloop.pausing import Decision
    from agentloop.store import PostgresStore, SQLiteStore

__all__ = ["main"]

# This module parses the command line and runs ``run`` and ``continue`` itself; ``fake-server`` is
# ``fake.py``, ``demo`` is ``demo.py``, and the ``runs`` commands (reading a store back) are
# ``runs.py``. The module docstring is the text of ``agentloop --help``.


def _console(*, plain: bool = False) -> Console:
    from agentloop.cli.terminal import TerminalConsole

    return TerminalConsole(highlight=False, soft_wrap=True, color_system=None if plain else "auto")


REFUSED_EXIT = 3
"""``agentloop run``'s exit status when the model refused (1: any other hard error, 130: cancel,
4: left paused, ``agentloop.cli.pending.PAUSED_EXIT``)."""

DEFAULT_STORE = "agentloop.db"

_DEPS_HELP = "the deps a decided tool reads: a function (run) -> deps, e.g. myapp.deps:make"


async def _run(args: argparse.Namespace) -> int:
    """``agentloop run``: stream one task's events to the screen, store the run, explain failure."""
    from rich.text import Text

    from agentloop import Agent, RunConfig
    from agentloop.cli.named import tools_named
    from agentloop.cli.terminal import visible

    task = _with_attachments(args.task, args.attach)  # a bad file: exit 2 before any request
    tools = tools_named(args.tools)
    client, target = _client(args)
    store = None if args.no_store else _run_store(args.store)
    agent = Agent(client, tools=tools, config=RunConfig(stream=True), store=store)
    console = _run_console(args)
    console.print(Text.assemble(("task: ", "dim"), visible(args.task)))
    try:
        return await _drive(agent, lambda: agent.stream(task), args, console, target)
    finally:
        await client.aclose()
        if store is not None:
            store.close()


async def _continue(args: argparse.Namespace) -> int:
    """``agentloop continue ID``: decide a stored paused run, then stream the rest of it."""
    from agentloop.cli.named import deps_factory
    from agentloop.cli.pending import (
        ask_decisions,
        asking,
        check_tools,
        decisions_from_flags,
        pending_lines,
        reader,
        recorded,
    )
    from agentloop.cli.runs import find_run
    from agentloop.pausing import check_decisions

    check_agent_flags(args)
    given = decisions_from_flags(args.approve, args.deny, args.edit, args.answer)
    store = _run_store(args.store, existing=True)
    try:
        stored = find_run(store, args.run_id)
        run = stored.run
        if not run.paused:
            raise InvalidInput(f"run {run.id} is not paused: it waits on no decision")
        if given:  # a bad set is a usage mistake: exit 2, nothing sent, nothing recorded
            check_decisions(run.pending, given)
        deps = deps_factory(args.deps) if args.deps else None
        batched = is_batch_run(run)  # SPEC 25: its next turn goes to the batch API too
        agent, runner, client, target = await _continuer(args, stored.session_id, store, batched)
        console = _run_console(args)
        try:
            decisions: Mapping[str, Decision] | None = given or None
            if decisions is None and not recorded(run):  # else: finish with the recorded ones
                asked = ask_decisions(run.pending, reader(console)) if asking(console) else None
                if asked is None:
                    console.print(*pending_lines(run.pending), sep="\n")
                    return _left_paused(run, args, console)
                decisions = asked
            if decisions is not None:  # a tool not given: exit 2, nothing recorded
                await check_tools(agent, run, decisions)
            if batched:
                ended = await continue_batch(runner, decisions, deps, console, args.store)
                return ended if ended is not None else _failed(runner, args, target)
            opening = partial(runner.continue_stream, decisions=decisions, deps=deps)
            return await _drive(runner, opening, args, console, target, deps=deps)
        finally:
            await client.aclose()
    finally:
        store.close()


async def _continuer(
    args: argparse.Namespace, session_id: str, store: SQLiteStore | PostgresStore, batched: bool
) -> tuple[Agent, Agent | Session, ModelClient, Target]:
    """The agent a continue checks decisions against, what continues, its client, its target.

    ``--agent``: the application's own Agent and its session (``agentloop.cli.app_agent``);
    else the command line's agent rebuilt from ``--provider``, ``--tools``... as ``run`` built it.
    """
    if args.agent:
        agent, session, target = app_session(args.agent, session_id, store)
        return agent, session, agent.client, target
    from agentloop import Agent, RunConfig
    from agentloop.cli.named import tools_named

    tools = tools_named(args.tools)
    client, target = _client(args)
    config = RunConfig(batch=True) if batched else RunConfig(stream=True)
    try:
        own = Agent.resume(session_id, store=store, client=client, tools=tools, config=config)
    except BaseException:
        await client.aclose()
        raise
    return own, own, client, target


def _failed(agent: Agent | Session, args: argparse.Namespace, target: Target) -> int:
    """A batch continuation's hard error (the run's ``stop_reason``) on stderr: exit 1."""
    error = agent.runs[-1].stop_reason
    assert error is not None
    _report(error, target, debug=args.debug)
    return 130 if error.is_cancelled() else 1


def _client(args: argparse.Namespace) -> tuple[ModelClient, Target]:
    from agentloop.providers.settings import DEFAULT_MODELS, Settings, build_client

    settings = Settings(provider=args.provider, model=args.model, base_url=args.base_url)
    client = build_client(settings)
    model = settings.model or DEFAULT_MODELS.get(settings.provider)
    return client, Target(settings.provider, model, settings.base_url, settings.key_env_var())


def _run_console(args: argparse.Namespace) -> Console:
    console = _console(plain=args.plain)
    if console.is_terminal and not args.plain:  # rich wraps what the live area shows
        console.soft_wrap = False
    return console


async def _drive(
    agent: Agent | Session,
    opening: Callable[[], RunStream[Any]],
    args: argparse.Namespace,
    console: Console,
    target: Target,
    *,
    deps: Any = None,
) -> int:
    """Stream the run until it ends; a pause is asked about on a terminal, else left paused."""
    from agentloop.cli.pending import ask_decisions, asking, pending_lines, reader

    while True:
        run, error = await _segment(opening, console, args)
        if error is not None or not run.paused:
            break
        console.print(*pending_lines(run.pending), sep="\n")
        asked = ask_decisions(run.pending, reader(console)) if asking(console) else None
        if asked is None:
            return _left_paused(run, args, console, agent)
        opening = partial(agent.continue_stream, decisions=asked, deps=deps)
    store = None if getattr(args, "no_store", False) else args.store
    lost = agent.persistence_error if store is not None else None
    console.print(_summary(run, store, lost), style="dim")
    if error is None:
        return 0 if lost is None else 1
    _report(error, target, debug=args.debug)
    if error.is_cancelled():
        return 130
    return REFUSED_EXIT if isinstance(error, ModelRefused) else 1


async def _segment(
    opening: Callable[[], RunStream[Any]], console: Console, args: argparse.Namespace
) -> tuple[Run, AgentLoopError | None]:
    """One stream of events drawn on a fresh screen (a pause's prompt is asked between two)."""
    from agentloop.cli.console import LineScreen, LiveScreen, RunView, logs_shown

    live = console.is_terminal and not args.plain
    screen: LineScreen | LiveScreen = LiveScreen(console) if live else LineScreen(console)
    with logs_shown(screen.line, debug=args.debug), screen:
        view = RunView(screen, thinking=args.thinking)
        run, error = await _streamed(opening, view)
        screen.cancelled = error is not None and error.is_cancelled()
    return run, error


def _left_paused(
    run: Run,
    args: argparse.Namespace,
    console: Console,
    agent: Agent | Session | None = None,
) -> int:
    """The run stays paused: its summary (after a stream), how to continue; ``PAUSED_EXIT``."""
    from agentloop.cli.pending import PAUSED_EXIT, continue_flags, continue_lines

    store = None if getattr(args, "no_store", False) else args.store
    if agent is not None:
        lost = agent.persistence_error if store is not None else None
        console.print(_summary(run, store, lost), style="dim")
    flags = continue_flags(args, DEFAULT_STORE)
    lines = continue_lines(run.pending, run.id, run.session_id, flags, stored=bool(store))
    console.print(*lines, sep="\n")
    return PAUSED_EXIT


def _with_attachments(task: str, paths: Sequence[str] | None) -> UserInput:
    """The task, then each ``--attach`` file as the media part its content says it is."""
    if not paths:
        return task
    from agentloop.media import media_from_path

    return [task, *(media_from_path(path) for path in paths)]


async def _streamed(
    opening: Callable[[], RunStream[Any]], view: RunView
) -> tuple[Run, AgentLoopError | None]:
    """Draw every event of the run; its hard error (raised after ``RunFinished``) is returned."""
    async with opening() as events:
        try:
            async for event in events:
                view.apply(event)
        except AgentLoopError as error:
            return events.run, error
    return events.run, None


def _run_store(location: str, *, existing: bool = False) -> SQLiteStore | PostgresStore:
    from agentloop.store import PostgresStore, SQLiteStore

    if location.startswith(("postgres://", "postgresql://")):
        return PostgresStore(location)
    if existing and not Path(location).is_file():
        raise InvalidInput(f"no store at {location!r} (pass --store PATH)")
    return SQLiteStore(location)


def _counts(run: Run) -> str:
    """``3 turns, 1 tool call``."""
    calls = f"{run.tool_calls} tool call{'s' * (run.tool_calls != 1)}"
    return f"{len(run.turns)} turn{'s' * (len(run.turns) != 1)}, {calls}"


def _summary(run: Run, store: str | None, lost: MemoryBackendError | None) -> str:
    """The last line; ``lost`` is the store write that failed (then the run is not stored)."""
    usage = run.usage
    reported = usage.input_tokens or usage.output_tokens or not run.turns
    tokens = (
        f"{usage.input_tokens} tokens in, {usage.output_tokens} out"
        if reported
        else "token usage not reported by the server"
    )
    if store is None:
        where = "not stored (--no-store)"
    elif lost is not None:
        where = f"NOT stored: {lost.message}"
    else:
        where = f"stored in {store}"
    return f"{_counts(run)}, {tokens}; run {run.id[:12]} {where}"


def _report(error: AgentLoopError, target: Target, *, debug: bool) -> None:
    """The failure as one paragraph on stderr; the traceback too with ``--debug``."""
    import traceback

    from rich.text import Text

    from agentloop.cli.terminal import TerminalConsole

    console = TerminalConsole(stderr=True, highlight=False)
    label = "cancelled" if error.is_cancelled() else "error"
    paragraph = Text.assemble((f"{label}: ", "bold red"), failure_paragraph(error, target))
    console.print(paragraph, soft_wrap=not console.is_terminal)
    if debug:
        console.print(Text("".join(traceback.format_exception(error))), soft_wrap=True)


def _name_list(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _agent_flags(command: argparse.ArgumentParser, *, provider: bool = True) -> None:
    """The flags that build ``run``'s agent (``continue`` rebuilds the same one, or --agent)."""
    command.add_argument("--provider", required=provider, help="openai, openrouter, ollama, ...")
    command.add_argument("--model", help="the model name (default: the provider's small model)")
    command.add_argument(
        "--base-url", help="an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1"
    )
    command.add_argument(
        "--tools",
        action="append",
        metavar="MODULE:NAME",
        help="more tools: a tool or a list of tools in an importable module (repeatable)",
    )
    command.add_argument("--store", default=DEFAULT_STORE, help="SQLite file or postgresql:// DSN")
    command.add_argument(
        "--plain", action="store_true", help="plain lines: no colour, markdown or spinner"
    )
    command.add_argument("--debug", action="store_true", help="print tracebacks")
    command.add_argument(
        "--thinking",
        choices=("brief", "full", "off"),
        default="brief",
        help="the model's reasoning, dimmed: its first line (default), all of it, or none",
    )


def _parser() -> argparse.ArgumentParser:
    # the docstring's ``literals`` are reStructuredText: a terminal shows them 'quoted'
    about = re.sub(r"``(.+?)``", r"'\1'", __doc__ or "", flags=re.DOTALL)
    parser = argparse.ArgumentParser(prog="agentloop", description=about)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="offline demo over a local fault-injecting server")
    fake.add_parser(sub)
    run = sub.add_parser("run", help="run a task with read-only tools, streaming the reply")
    run.add_argument("task", help="the task, printed literally (brackets are not markup)")
    _agent_flags(run)
    run.add_argument("--no-store", action="store_true", help="do not record the run")
    run.add_argument(
        "--attach",
        action="append",
        metavar="FILE",
        help="an image, PDF, text or audio file sent with the task (repeatable)",
    )
    go_on = sub.add_parser("continue", help="decide a stored paused run's calls and go on")
    go_on.add_argument("run_id", metavar="ID", help="a paused run's id or a unique prefix of one")
    _agent_flags(go_on, provider=False)
    go_on.add_argument(
        "--agent",
        metavar="MODULE:NAME",
        help="the application's Agent that paused the run (instead of --provider and --tools)",
    )
    for flag, meta, what in (
        ("--approve", "ID", "run the call as the model asked"),
        ("--deny", "ID[=REASON]", "refuse the call (the model reads the reason)"),
        ("--edit", "ID=JSON", "run the call with these arguments instead"),
        ("--answer", "ID=TEXT", "an external call's result"),
    ):
        go_on.add_argument(flag, action="append", default=[], metavar=meta, help=what)
    go_on.add_argument("--deps", metavar="MODULE:CALLABLE", help=_DEPS_HELP)
    runs = sub.add_parser(
        "runs",
        help="list the runs in a store; 'runs show ID' prints one, 'runs cancel ID' ends one",
    )
    runs.add_argument("--store", default="agentloop.db", help="SQLite file or postgresql:// DSN")
    runs.add_argument("--session", help="only this session's runs")
    runs.add_argument(
        "--limit", type=int, default=50, help="list the newest N runs (default 50; 0: all)"
    )
    runs.add_argument("--status", choices=STATUSES, help="only runs of this status")
    show_sub = runs.add_subparsers(dest="runs_command")
    show = show_sub.add_parser("show", help="one run with its error's class and attributes")
    show.add_argument("run_id", metavar="ID", help="a run id or a unique prefix of one")
    show.add_argument("--store", default=argparse.SUPPRESS, help="as for 'runs'")
    evals.add_commands(sub, show_sub)  # eval, runs export
    add_cancel_parser(show_sub)  # runs cancel
    view = sub.add_parser("ui", help="the run viewer: a local web page over a store")
    view.add_argument("--store", default="agentloop.db", help="SQLite file or postgresql:// URL")
    view.add_argument("--port", type=int, default=8765, help="the port (default 8765)")
    view.add_argument("--host", default="127.0.0.1", help="the address (default: this machine)")
    view.add_argument(
        "--allow-decisions", action="store_true", help="decide pending calls (default: read-only)"
    )
    view.add_argument(
        "--agent", metavar="MODULE:NAME", help="the Agent that continues decided runs"
    )
    view.add_argument("--deps", metavar="MODULE:CALLABLE", help=_DEPS_HELP)
    add_memory_parser(sub)
    add_batch_parser(sub)
    return parser


def _viewer(args: argparse.Namespace) -> int:
    """``agentloop ui``: the run viewer, served with uvicorn (the ``ui`` extra, all of it)."""
    require_extra("ui", ("starlette", "ag_ui", "uvicorn"), "agentloop ui")
    from agentloop.cli.named import deps_factory, named_object
    from agentloop.ui.viewer import serve

    agent = named_object(args.agent, "--agent") if args.agent else None
    deps = deps_factory(args.deps) if args.deps else None
    decide = {"allow_decisions": args.allow_decisions, "agent": agent, "deps": deps}
    return serve(args.store, host=args.host, port=args.port, **decide)


def _demo(args: argparse.Namespace) -> int:
    from agentloop.cli.demo import run_demo

    return run_demo()


def _runs(args: argparse.Namespace) -> int:
    from agentloop.cli.runs import runs

    if getattr(args, "runs_command", None) == "cancel":
        return cancel_command(args, _run_store(args.store, existing=True))

    run_id = getattr(args, "run_id", None)
    status = getattr(args, "status", None)
    return runs(_console(), args.store, run_id, args.session, args.limit, status=status)


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": _demo,
    "fake-server": fake.serve,
    "runs": _runs,
    "ui": _viewer,
    "memory": memory_command,
    "batch": batch_command,
    "continue": lambda args: asyncio.run(_continue(args)),
    "run": lambda args: asyncio.run(_run(args)),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentloop`` and ``python -m agentloop``."""
    args = _parser().parse_args(argv)
    try:
        if (done := evals.dispatch(args, _console)) is not None:
            return done
        return _COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("agentloop: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except MissingExtra as error:  # the command needs an extra that is not installed
        print(f"agentloop: {error}", file=sys.stderr)
        return 2
    except AgentLoopError as error:
        from agentloop.cli.terminal import visible

        print(visible(f"agentloop: {type(error).__name__}: {error}"), file=sys.stderr)
        return 2
