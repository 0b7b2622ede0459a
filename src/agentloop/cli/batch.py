"""``agentloop batch poll --store PATH --agent MODULE:NAME [--deps MODULE:CALLABLE]`` (SPEC 25).

One pass of ``agentloop.batch.poll`` from a shell or a cron job: every waiting batch run in the
store whose result arrived is continued by the named agent (its tools, its client), on the
store given (``--store`` replaces the agent's own: the runs to poll are there). Prints
``continued N, waiting N, paused N, failed N``, then one line per failed run.

``agentloop continue`` of a paused batch run (``continue_batch``) goes on as a batch run: the
decided calls run, then its next turn is submitted to the provider's batch API, as
``continue_run`` of a batch agent does (it never sends that turn synchronously at full price);
``agentloop batch poll`` takes it from there.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from agentloop.cli.terminal import visible
from agentloop.errors import AgentLoopError, ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rich.console import Console

    from agentloop import Agent, Run, Session
    from agentloop.pausing import Decision

__all__ = ["add_batch_parser", "batch_command", "continue_batch", "is_batch_run"]


def add_batch_parser(sub: Any) -> None:
    """Add ``batch poll`` to the command line."""
    batch = sub.add_parser("batch", help="batch runs (RunConfig(batch=True)) waiting in a store")
    actions = batch.add_subparsers(dest="batch_command", required=True)
    poll = actions.add_parser("poll", help="continue each waiting run whose result arrived")
    poll.add_argument("--store", default="agentloop.db", help="SQLite file or postgresql:// DSN")
    poll.add_argument("--agent", required=True, metavar="MODULE:NAME", help="the batch Agent")
    poll.add_argument("--deps", metavar="MODULE:CALLABLE", help="(run) -> deps for its tools")


def batch_command(args: argparse.Namespace) -> int:
    """Run ``agentloop batch poll``: 0 when the pass ran (failed runs listed), 2 when it cannot."""
    from agentloop import Agent
    from agentloop.cli.named import deps_factory, named_object

    agent = named_object(args.agent, "--agent")
    if not isinstance(agent, Agent):
        raise ConfigurationError(
            f"--agent {args.agent} names a {type(agent).__name__}, not an Agent"
        )
    agent.store = _store(args.store)
    deps = deps_factory(args.deps) if args.deps else None
    report = asyncio.run(_poll(agent, deps))
    print(
        f"continued {len(report.continued)}, waiting {len(report.waiting)}, "
        f"paused {len(report.paused)}, failed {len(report.failed)}"
    )
    for run_id, error in report.failed.items():
        print(visible(f"  {run_id}: {type(error).__name__}: {error}"))
    return 0


def _store(location: str) -> Any:
    """The store at ``location``: a ``postgresql://`` DSN, or a SQLite file that exists."""
    from pathlib import Path

    from agentloop.errors import InvalidInput
    from agentloop.store import PostgresStore, SQLiteStore

    if location.startswith(("postgres://", "postgresql://")):
        return PostgresStore(location)
    if not Path(location).is_file():
        raise InvalidInput(f"no store at {location!r} (pass --store PATH)")
    return SQLiteStore(location)


async def _poll(agent: Any, deps: Any) -> Any:
    from agentloop.batch import poll

    return await poll(agent, deps=deps)


def is_batch_run(run: Run) -> bool:
    """Whether ``run``'s paused turn (else its last) went through a provider batch (SPEC 25)."""
    paused = (run.paused_turn or {}).get("turn")
    if isinstance(paused, dict):
        return bool(paused.get("batch"))
    return bool(run.turns and run.turns[-1].batch)


async def continue_batch(
    agent: Agent | Session,
    decisions: Mapping[str, Decision] | None,
    deps: Any,
    console: Console,
    store: str,
) -> int | None:
    """Continue a paused batch run: its calls run, its next turn is submitted; None on an error.

    Prints where the run is: waiting on its batch (how to poll it), paused again, or ended.
    """
    from agentloop.cli.pending import PAUSED_EXIT

    try:
        run = await agent.continue_run(decisions=decisions, deps=deps)
    except AgentLoopError:
        return None
    said = f"run {run.id[:12]}: {run.tool_calls} tool calls so far"
    if run.waiting is not None:
        console.print(
            visible(
                f"{said}; waiting on batch {run.waiting.batch_id}: its next turn was submitted "
                f"to the batch API. Go on with: agentloop batch poll --store {store} "
                "--agent MODULE:NAME"
            ),
            soft_wrap=True,
        )
        return 0
    if run.paused:
        console.print(visible(f"{said}; paused again: agentloop runs show {run.id[:12]}"))
        return PAUSED_EXIT
    console.print(visible(f"{said}; output: {run.output}"), soft_wrap=True)
    return 0
