"""A crash test's child: a run with memory on a durable store that dies inside its second turn.

Turn 0 remembers "zero" and completes; turn 1 remembers "one" then calls ``die``, which kills the
process when ``DIE=1``; continued, the turn runs again and the run ends with "done".
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from agentloop import Agent, tool
from agentloop.memory import Memory, SQLiteMemoryStore
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply


@tool
def die() -> str:
    """Kill the process (the crash)."""
    if os.environ.get("DIE") == "1":
        os._exit(9)
    return "alive"


def build(db: str, memory_db: str, *, resume: bool) -> Agent[Any]:
    first = [
        call("remember", {"text": "zero"}, id="c0"),
        [call("remember", {"text": "one"}, id="c1"), call("die", {}, id="c2")],
    ]
    model = ScriptedModel([*([] if resume else first), reply("done")])
    memory = Memory(SQLiteMemoryStore(memory_db), namespace=lambda ctx: ("user", "ada"))
    store = SQLiteStore(db)
    if resume:
        return Agent.resume("s", store=store, client=model, tools=[die], memory=memory)
    return Agent(model, tools=[die], memory=memory, store=store, session_id="s")


async def main(db: str, memory_db: str) -> None:
    await build(db, memory_db, resume=False).run("go")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
