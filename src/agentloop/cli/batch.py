"""``agentloop batch poll --store PATH --agent MODULE:NAME [--deps MODULE:CALLABLE]`` (SPEC 25).

One pass of ``agentloop.batch.poll`` from a shell or a cron job: every waiting batch run in the
store whose result arrived is continued by the named agent (its tools, its client), on the
store given (``--store`` replaces the agent's own: the runs to poll are there). Prints
``continued N, waiting N, paused N, failed N``, then one line per failed run.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from agentloop.cli.terminal import visible
from agentloop.errors import ConfigurationError

__all__ = ["add_batch_parser", "batch_command"]


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
