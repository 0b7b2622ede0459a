"""A worker process for ``test_pause_tools``: pause a run, or decide it with or without the tool.

``python _worker.py DB pause``: the run pauses on an approval of ``refund`` (stdout: the call ids).
``python _worker.py DB decide-bare``: an agent built without ``refund`` approves it.
``python _worker.py DB decide``: an agent with ``refund`` approves it, with a deps factory.
Stdout is one JSON line; a refusal is ``{"refused": <message>}`` (exit 3).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from agentloop import Agent, Approve, ToolContext, tool
from agentloop.errors import InvalidInput
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply


@tool(requires_approval=True)
def refund(ctx: ToolContext[dict[str, str]], order: str) -> str:
    """Refund an order."""
    return f"refunded {order} via {ctx.deps['db']}"


def make_deps(run: Any) -> dict[str, str]:
    return {"db": f"db-for-{run.session_id}"}


def main(db: str, mode: str) -> int:
    store = SQLiteStore(db)
    if mode == "pause":
        model = ScriptedModel([call("refund", {"order": "A1"}, id="c1")])
        run = Agent(model, tools=[refund], store=store, session_id="s1").run_sync("go")
        print(json.dumps([p.id for p in run.pending]))
        return 0
    tools = [] if mode == "decide-bare" else [refund]
    worker = Agent.resume("s1", store=store, client=ScriptedModel([reply("Refunded")]), tools=tools)
    try:
        done = worker.continue_run_sync(decisions={"c1": Approve()}, deps=make_deps)
    except InvalidInput as error:
        print(json.dumps({"refused": str(error)}))
        return 3
    result = done.messages[-2].tool_results_parts[0].content
    print(json.dumps({"output": done.output, "result": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
