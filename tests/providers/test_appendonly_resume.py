"""SPEC 28's ``drop_block`` is stored with the session: a resumed agent sends it untold."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import agentloop
from agentloop import Agent, RunConfig
from agentloop.model import ModelSettings
from agentloop.run import Run
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, reply

from .test_appendonly_twin import EFFORT, client, look, turn
from .twins.anthropic import AnthropicTwin

DROP = ModelSettings(reasoning_effort="low", thinking_prefix_mismatch="drop_block")
BINDING = {"prefix_mismatch_behavior": "drop_block"}


def test_the_run_record_keeps_the_escape_hatch() -> None:
    run: Run[str] = Run(id="r1", input="a", thinking_prefix_mismatch="drop_block")
    assert Run.from_dict(run.to_dict()).thinking_prefix_mismatch == "drop_block"
    assert "thinking_prefix_mismatch" not in Run(id="r2", input="a").to_dict()


async def test_a_resumed_agent_keeps_sending_drop_block_untold(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with AnthropicTwin([*turn(1), *turn(2), *turn(3)]) as server:
        with SQLiteStore(path) as store:
            first = Agent(
                client(server.url, "claude-fable-5-1"),
                instructions="Hi.",
                tools=[look],
                store=store,
                config=RunConfig(model_settings=EFFORT),
            )
            await first.session("user-1").run("a", model_settings=DROP)
        with SQLiteStore(path) as store:
            again = Agent.resume(
                "user-1",
                store=store,
                client=client(server.url, "claude-fable-5-1"),
                instructions="Hi.",
                tools=[look],
                config=RunConfig(model_settings=EFFORT),
            )
            second = await again.run("b")  # not told: the stored session says so
            assert second.thinking_prefix_mismatch == "drop_block"
        with SQLiteStore(path) as store:
            third = Agent.resume(
                "user-1",
                store=store,
                client=client(server.url, "claude-fable-5-1"),
                instructions="Hi.",
                tools=[look],
                config=RunConfig(model_settings=EFFORT),
            )
            await third.run("c")  # resumed from a session whose last run was told by its store
    assert server.rejected == []
    assert len(server.requests) == 6
    for body in server.requests:
        assert body["thinking"]["block_binding"] == BINDING


async def test_a_session_never_told_sends_no_binding_after_resume(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with AnthropicTwin([*turn(1), *turn(2)]) as server:
        with SQLiteStore(path) as store:
            first = Agent(
                client(server.url, "claude-fable-5-1"), tools=[look], store=store,
                config=RunConfig(model_settings=EFFORT),
            )  # fmt: skip
            run = await first.session("user-1").run("a")
            assert run.thinking_prefix_mismatch is None
        with SQLiteStore(path) as store:
            again = Agent.resume(
                "user-1", store=store, client=client(server.url, "claude-fable-5-1"),
                tools=[look], config=RunConfig(model_settings=EFFORT),
            )  # fmt: skip
            await again.run("b")
    assert all("block_binding" not in b["thinking"] for b in server.requests)


CRASH_SCRIPT = """
import asyncio, os, sys
from agentloop import Agent, tool
from agentloop.model import ModelSettings
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, reply
from agentloop.testing import ScriptedModel, call

@tool
async def crash() -> str:
    '''Die the way a killed process dies: no finalize, no cleanup.'''
    os._exit(3)

agent = Agent(ScriptedModel([call("crash")]), tools=[crash], store=SQLiteStore(sys.argv[1]),
              session_id="crashy")
drop = ModelSettings(thinking_prefix_mismatch="drop_block")
asyncio.run(agent.run("go", model_settings=drop))
"""


def test_a_run_that_asked_for_drop_block_and_crashed_still_passes_it_on(tmp_path: Path) -> None:
    """The run's record is never written; the durable snapshot of its start keeps the hatch."""
    script, db = tmp_path / "crash.py", tmp_path / "s.db"
    script.write_text(CRASH_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(agentloop.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, str(script), str(db)], capture_output=True, timeout=60, env=env
    )
    assert done.returncode == 3, done.stderr
    model = ScriptedModel([reply("resumed")])
    with SQLiteStore(db) as store:
        agent = Agent.resume("crashy", store=store, client=model)
        assert agent.runs[0].thinking_prefix_mismatch is None  # closed from its turns alone
        run = agent.run_sync("carry on")
    assert run.output == "resumed" and run.thinking_prefix_mismatch == "drop_block"
    assert model.requests[0].settings.thinking_prefix_mismatch == "drop_block"
