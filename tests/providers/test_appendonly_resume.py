"""SPEC 28's ``drop_block`` is stored with the session: a resumed agent sends it untold."""

from __future__ import annotations

from pathlib import Path

from agentloop import Agent, RunConfig
from agentloop.model import ModelSettings
from agentloop.run import Run
from agentloop.store import SQLiteStore

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
