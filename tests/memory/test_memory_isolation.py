"""One agent, many users: 1,000 concurrent runs never see another user's memories (SPEC 27, 20).

The namespace comes from the run's context (``ctx.deps``), never from the model; each run saves
a fact, then recalls, and every line it reads must be its own user's. The same on every store.
A run of an agent without memory loads nothing of it (no new work on the hot path).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

from agentloop import Agent
from agentloop.memory import Memory
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call, reply

from .conftest import StoreFactory

USERS = ("alice", "bob")
RUNS = 1_000


def step(request: ModelRequest) -> Any:
    user, n = request.messages[0].text.split(":")
    done = len(request.messages)
    if done == 1:
        return call("remember", {"text": f"{user} secret number {n}"})
    if done == 3:
        return call("recall", {"query": "secret number", "k": 100})
    lines = request.messages[-1].tool_results_parts[0].content.splitlines()
    strangers = [line for line in lines if f"] {user} secret" not in line]
    return reply("LEAK " + "; ".join(strangers) if strangers else "clean")


async def test_two_users_on_one_agent_never_see_each_other(open_memory: StoreFactory) -> None:
    store = open_memory()
    memory = Memory(store, namespace=lambda ctx: ("user", ctx.deps), max_items=RUNS)
    agent = Agent(FunctionModel(step), memory=memory)

    async def one(n: int) -> str:
        user = USERS[n % 2]
        run = await agent.session(f"s{n}").run(f"{user}:{n}", deps=user)
        assert isinstance(run.output, str)
        return run.output

    outputs = await asyncio.gather(*(one(n) for n in range(RUNS)))
    assert [o for o in outputs if o != "clean"] == []
    for user in USERS:
        assert await store.count(("user", user)) == RUNS // 2
        mine = await store.search(("user", user), "secret", k=100)
        assert mine and all(i.text.startswith(f"{user} secret") for i in mine)
    assert memory.runs == {}  # no run's state outlives it


def test_an_agent_without_memory_loads_none_of_it() -> None:
    code = (
        "import sys, asyncio\n"
        "from agentloop import Agent\n"
        "from agentloop.testing import ScriptedModel, reply\n"
        "agent = Agent(ScriptedModel([reply('ok')]))\n"
        "assert agent.run_sync('hi').output == 'ok'\n"
        "assert 'agentloop.memory' not in sys.modules, 'memory loaded'\n"
        "assert not any(m.startswith('agentloop.memory') for m in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
