"""A run with no toolsets costs what it cost before (SPEC 22): no plan, nothing loaded, per turn
nothing more than one attribute read (``bench/toolsets.py`` measures it in instructions)."""

from __future__ import annotations

import subprocess
import sys

from agentloop import Agent, ToolContext, tool
from agentloop.hooks import Hook
from agentloop.messages import ToolCallPart
from agentloop.testing import ScriptedModel, call, reply

PLAIN = """
import asyncio, sys
from agentloop import Agent, ToolContext, tool
from agentloop.hooks import Hook
from agentloop.messages import ToolCallPart
from agentloop.testing import ScriptedModel, call, reply

@tool
def lookup(key: str) -> str:
    '''Look a key up.'''
    return key

agent = Agent(ScriptedModel([call("lookup", {"key": "k"}), reply("done")]), tools=[lookup])
asyncio.run(agent.run("go"))
print(sorted(m for m in sys.modules if m.startswith(("agentloop.toolsets", "agentloop.skills",
      "agentloop.engine.offering", "yaml"))))
"""


def test_a_plain_run_loads_nothing_of_toolsets() -> None:
    done = subprocess.run([sys.executable, "-c", PLAIN], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


async def test_a_plain_run_has_no_tool_plan() -> None:
    seen: list[object] = []

    class Spy(Hook):
        async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> None:
            state, _ = ctx._link
            seen.append(state.plan)

    model = ScriptedModel([call("lookup", {"key": "k"}), reply("done")])
    await Agent(model, tools=[lookup], hooks=[Spy()]).run("go")
    assert seen == [None]
    assert model.requests[0].tools[0].name == "lookup"
