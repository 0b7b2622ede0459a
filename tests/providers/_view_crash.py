"""A filtered handoff's receiver killed mid-run, on the append-only twin: the agent and the child.

Imported by ``test_appendonly_crash.py`` (which runs this file as a child process and then
resumes its session) so both sides build the same agent: a front desk that hands off through an
``input_filter`` to ``worker``, whose ``work`` tool SIGKILLs the process when ``KILL`` names its
key. ``python _view_crash.py URL DB`` runs ``hi``, then
``go`` on session ``s1``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from agentloop import Agent, RunConfig, handoff, tool
from agentloop.handoffs import remove_tool_calls
from agentloop.model import ModelSettings
from agentloop.providers.settings import Settings, build_client
from agentloop.store import SQLiteStore

KEY = "sk-ant-twin-0123456789"
MODEL = "claude-fable-5-1"
CONFIG = RunConfig(model_settings=ModelSettings(reasoning_effort="low"))


@tool
def work(key: str) -> str:
    """Do one unit of work."""
    if os.environ.get("KILL") == key:
        os.kill(os.getpid(), signal.SIGKILL)
    return f"did {key}"


def build(url: str, store: SQLiteStore, *, resume: bool = False) -> Agent[Any]:
    """The front desk and its filtered receiver, both on the twin's append-only Claude."""
    client = build_client(Settings(provider="anthropic", model=MODEL, api_key=KEY, base_url=url))
    worker = Agent(client, name="worker", instructions="You work.", tools=[work])
    given: dict[str, Any] = {
        "instructions": "You route.",
        "handoffs": [handoff(worker, input_filter=remove_tool_calls)],
        "config": CONFIG,
    }
    if resume:
        return Agent.resume("s1", store=store, client=client, **given)
    return Agent(client, store=store, session_id="s1", **given)


async def _main(url: str, db: str) -> None:
    agent = build(url, SQLiteStore(db))
    await agent.run("hi")  # a first run, completed: the session's base is stored
    await agent.run("go")


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], sys.argv[2]))
