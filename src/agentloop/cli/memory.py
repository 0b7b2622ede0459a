"""``agentloop memory search QUERY --namespace a/b [--store PATH]``: what an agent remembers.

Reads a memory store (SPEC 27): a SQLite file (the runs store's by default: the memory table
may live beside the runs tables) or a ``postgresql://`` DSN. Prints one ``[<id>] <text>`` line
per item, most relevant first (``""``: the newest), or ``no memories match '<query>'``. The
namespace is written with ``/`` between its parts (no part holds one). A missing file is an
error, never a new empty store.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from agentloop.cli.terminal import visible

__all__ = ["add_memory_parser", "memory_command"]


def add_memory_parser(sub: Any) -> None:
    """Add ``memory search`` to the command line."""
    memory = sub.add_parser("memory", help="search what agents remember (long-term memory)")
    actions = memory.add_subparsers(dest="memory_command", required=True)
    search = actions.add_parser("search", help="print the items of a namespace matching QUERY")
    search.add_argument("query", metavar="QUERY", help="plain words ('' for the newest items)")
    search.add_argument("--namespace", required=True, help="the namespace, parts joined by /")
    search.add_argument("--store", default="agentloop.db", help="SQLite file or postgresql:// DSN")
    search.add_argument("-k", type=int, default=5, help="how many items at most (1-100)")


def memory_command(args: argparse.Namespace) -> int:
    """Run ``agentloop memory search``; 2 with a message on stderr when it cannot."""
    location = args.store
    if not location.startswith(("postgres://", "postgresql://")) and not Path(location).exists():
        print(f"agentloop: no store at {location} (give --store PATH)", file=sys.stderr)
        return 2
    namespace = tuple(args.namespace.split("/"))
    lines = asyncio.run(_search(location, namespace, args.query, args.k))
    print("\n".join(visible(line) for line in lines))
    return 0


async def _search(location: str, namespace: tuple[str, ...], query: str, k: int) -> list[str]:
    from agentloop.memory import PostgresMemoryStore, SQLiteMemoryStore

    store: Any
    if location.startswith(("postgres://", "postgresql://")):
        store = PostgresMemoryStore(location)
    else:
        store = SQLiteMemoryStore(location)
    try:
        items = await store.search(namespace, query, k=k)
    finally:
        await store.aclose()
    if not items:
        return [f"no memories match '{query}'"]
    return [f"[{i.id}] {i.text}" for i in items]
