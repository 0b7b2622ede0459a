"""A pause crash test's process: pause, decide or continue a stored run; ``KILL``: where it dies.

``KILL=in_tool``: SIGKILL inside the approved tool, after its effect (it started, never returned);
``KILL=after_tool``: SIGKILL when the tool's result is announced (before the journal keeps it);
``KILL=after_turn``: SIGKILL once the decided turn is complete. Effects go to ``EFFECTS``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from typing import Any

from agentloop import Agent, Approve, tool
from agentloop import events as ev
from agentloop.observers import Observer
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

KILL = os.environ.get("KILL", "")


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    with open(os.environ["EFFECTS"], "a") as f:
        f.write(f"refund {order}\n")
    hold = os.environ.get("HOLD")
    while hold and not os.path.exists(hold):  # a test holds the call open (another process decides)
        time.sleep(0.01)
    if KILL == "in_tool":
        die()
    return f"refunded {order}"


FINISHED: list[list[Any]] = []
"""Each ``ToolCallFinished`` this process saw: [tool name, replayed]."""


class Killer(Observer):
    def on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.ToolCallFinished):
            FINISHED.append([event.call.name, event.replayed])
        if KILL == "after_tool" and isinstance(event, ev.ToolCallFinished):
            die()
        if KILL == "after_turn" and isinstance(event, ev.TurnFinished):
            die()


def agent(db: str, steps: list[Any], *, resume: bool) -> Agent[Any]:
    store = SQLiteStore(db)
    model = ScriptedModel(steps)
    if resume:
        return Agent.resume("s", store=store, client=model, tools=[refund], observers=[Killer()])
    return Agent(model, tools=[refund], store=store, session_id="s")


async def main(db: str, mode: str) -> None:
    if mode == "pause":
        run = await agent(db, [call("refund", {"order": "A1"}, id="c1")], resume=False).run("go")
        print(json.dumps([p.id for p in run.pending]))
        return
    resumed = agent(db, [reply("done")], resume=True)
    if mode == "decide":
        run = await resumed.continue_run(decisions={"c1": Approve()})
    else:
        run = await resumed.continue_run()
    read = [r.content for t in run.turns for r in t.tool_results if r.call_id == "c1"]
    said: dict[str, Any] = {"output": run.output, "read": read}
    if mode == "continue":
        said["finished"] = FINISHED
    print(json.dumps(said))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
