"""``agentloop runs cancel ID [--store PATH]``: end a stored paused or waiting run (SPEC 11, 17).

The run is found by its id or a unique prefix of one, then cancelled as ``cancel_run`` would in
the process that paused it (``agentloop.engine.stored_cancel``): its session is
restored from the store, the run finalized as ``Cancelled`` (the paused turn dropped, its pending
calls never run; a waiting batch run's result never applied), and the end written with the
session's lease, so a process deciding or polling that run at the same moment gets a clear error
instead of a race. It prints ``cancelled run <id> (session <id>)``; a run that is not paused or
waiting is an error (exit 2) naming how it ended.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from agentloop.cli.terminal import visible

if TYPE_CHECKING:
    from agentloop.store import PostgresStore, SQLiteStore

__all__ = ["add_cancel_parser", "cancel_command"]


def add_cancel_parser(runs_commands: Any) -> None:
    """Add ``runs cancel`` beside ``runs show``."""
    cancel = runs_commands.add_parser("cancel", help="end a paused or waiting run as Cancelled")
    cancel.add_argument("run_id", metavar="ID", help="a run id or a unique prefix of one")
    cancel.add_argument("--store", default=argparse.SUPPRESS, help="as for 'runs'")


def cancel_command(args: argparse.Namespace, store: SQLiteStore | PostgresStore) -> int:
    """Run ``agentloop runs cancel`` on ``store`` (closed after): 0 once the run is cancelled."""
    from agentloop.cli.runs import find_run
    from agentloop.engine.stored_cancel import cancel_stored

    try:
        stored = find_run(store, args.run_id)
        run = asyncio.run(cancel_stored(store, stored.run.id))
    finally:
        store.close()
    print(visible(f"cancelled run {run.id} (session {stored.session_id})"))
    return 0
