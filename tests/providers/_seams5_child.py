"""A second process on an append-only conversation (``test_seams5_appendonly_process``).

``python _seams5_child.py URL DB STAGE``: builds the agent again (its instructions and toolset
filter say which process this is) over the SQLite store and memory in ``DB`` and, by ``STAGE``:
``pause`` runs ``archive a`` until it pauses; ``continue`` approves the pending call and runs
once more; ``restore`` restores the session and runs once. Prints each run's output.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from agentloop import Agent, Approve, RunConfig, RunContext, tool
from agentloop.memory import Memory, SQLiteMemoryStore
from agentloop.model import ModelSettings, ToolSpec
from agentloop.providers.settings import Settings, build_client
from agentloop.store import SQLiteStore
from agentloop.toolsets import FunctionToolset

URL, DB, STAGE = sys.argv[1:4]
SESSION = "user-1"


@tool(requires_approval=True)
def archive(path: str) -> str:
    """Archive a file."""
    return f"archived {path}"


@tool
def look(path: str) -> str:
    """Look at a file."""
    return f"{path}: 3 lines"


@tool
def shred(path: str) -> str:
    """Shred a file."""
    return f"shredded {path}"


def offered(ctx: RunContext[Any], spec: ToolSpec) -> bool:
    return spec.name != "shred" or STAGE == "restore"  # shred only in the third process


def instructions(ctx: RunContext[Any]) -> str:
    return f"You keep files. This is the {STAGE} process."


def user(ctx: RunContext[Any]) -> tuple[str, ...]:
    return ("user", "ada")


async def main() -> None:
    client = build_client(
        Settings(
            provider="anthropic",
            model="claude-fable-5-1",
            api_key="sk-ant-twin-0123456789",
            base_url=URL,
            max_retries=0,
        )
    )
    with SQLiteStore(DB) as store:
        agent = Agent(
            client,
            instructions=instructions,
            tools=[look],
            toolsets=[FunctionToolset([archive, shred], name="files").filtered(offered)],
            memory=Memory(SQLiteMemoryStore(DB), namespace=user, auto_recall=3),
            config=RunConfig(model_settings=ModelSettings(reasoning_effort="low")),
            store=store,
        )
        session = agent.session(SESSION)
        if STAGE == "pause":
            run = await session.run("archive a on fridays")
            print("paused", [p.call.name for p in run.pending])
        elif STAGE == "continue":
            (pending,) = session.current_run.pending if session.current_run else []
            done = await session.continue_run(decisions={pending.id: Approve()})
            later = await session.run("look at b")
            print(done.output, later.output)
        else:
            run = await session.run("shred c for ada")
            print(run.output)
        await client.aclose()


asyncio.run(main())
