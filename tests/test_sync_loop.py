"""``run_sync``'s private event loop never touches the thread's current event loop.

An agent that used ``run_sync`` and is collected later shuts its loop; it must not unset a loop
that someone else (an application, a test framework) set in the thread meanwhile.
"""

from __future__ import annotations

import asyncio
import gc

from agentloop import Agent
from agentloop.testing import ScriptedModel, reply


def test_a_collected_agent_leaves_the_threads_event_loop_alone() -> None:
    agent = Agent(ScriptedModel([reply("ok")]))
    assert agent.run_sync("x").output == "ok"
    mine = asyncio.new_event_loop()
    asyncio.set_event_loop(mine)
    try:
        del agent
        gc.collect()
        assert asyncio.get_event_loop_policy().get_event_loop() is mine
    finally:
        asyncio.set_event_loop(None)
        mine.close()


def test_run_sync_sees_an_override_entered_after_its_first_run() -> None:
    """The private loop is kept, but each ``run_sync`` runs in the caller's context of now."""
    agent = Agent(ScriptedModel([reply("own"), reply("own again")]))
    assert agent.run_sync("x").output == "own"
    with agent.override(model=ScriptedModel([reply("swapped")])):
        assert agent.run_sync("x").output == "swapped"
    assert agent.run_sync("x").output == "own again"
    agent.close()
