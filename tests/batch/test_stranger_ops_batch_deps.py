"""``start_many(deps=...)``: a batch run's first turn is built with the application's deps.

Found by building an ops service from the docs alone: its agent offers ``purge_queue`` only to
on-call callers (a toolset filter reading ``ctx.deps``). ``start_many`` took no deps, so every
run's first turn was built with ``deps=None`` (the filter hid the tool from the on-call job),
while ``poll(deps=...)`` resolved the later turns with the job's deps: one run, two offers.
``start_many`` now takes ``deps=`` (a value, or ``(input) -> deps``, sync or async), and a factory
that fails raises before anything is sent.

Real parts: the fake provider's batch API over HTTP on 127.0.0.1, one SQLite store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig, RunContext
from agentloop.batch import poll, start_many
from agentloop.model import ToolSpec
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply
from agentloop.toolsets import FunctionToolset

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@dataclass
class Caller:
    role: str


def _toolset() -> Any:
    ops = FunctionToolset(name="ops")

    @ops.tool
    def status(service: str) -> str:
        """A service's health."""
        return f"{service}: healthy"

    @ops.tool(requires_approval=True)
    def purge_queue(queue: str) -> str:
        """Irreversibly delete every message on a queue."""
        return f"purged {queue}"

    def oncall_only(ctx: RunContext[Any], spec: ToolSpec) -> bool:
        return spec.name != "purge_queue" or getattr(ctx.deps, "role", None) == "oncall"

    return ops.filtered(oncall_only)


async def _job(tmp_path: Path, deps: Any) -> tuple[dict[str, list[str]], int]:
    """Two runs started with ``deps``; the tools each first request offered, by input."""
    offered: dict[str, list[str]] = {}

    def model(body: Mapping[str, Any]) -> FakeReply:
        asked = body["messages"][-1]["content"]
        offered[asked] = sorted(t["function"]["name"] for t in body.get("tools", []))
        return FakeReply("ok")

    async with FakeProviderServer(default=model, model="gpt-4o-mini") as server:
        client = OpenAIClient("gpt-4o-mini", api_key="sk-test", base_url=server.base_url)
        agent = Agent(
            client,
            toolsets=[_toolset()],
            store=SQLiteStore(tmp_path / "b.db"),
            config=RunConfig(batch=True),
        )
        try:
            runs = await start_many(agent, ["alice", "bob"], deps=deps)
            assert all(run.waiting is not None for run in runs)
            report = await poll(agent, deps=lambda run: None)
            assert len(report.continued) == 2
        finally:
            await agent.aclose()
    return offered, len(runs)


async def test_each_first_turn_is_built_with_its_inputs_deps(tmp_path: Path) -> None:
    roles = {"alice": "oncall", "bob": "viewer"}
    offered, _ = await _job(tmp_path, lambda name: Caller(roles[name]))
    assert offered == {"alice": ["purge_queue", "status"], "bob": ["status"]}


async def test_a_value_and_an_async_factory(tmp_path: Path) -> None:
    offered, _ = await _job(tmp_path, Caller("oncall"))
    assert offered["bob"] == ["purge_queue", "status"]

    async def made(name: str) -> Caller:
        return Caller("viewer")

    (tmp_path / "async").mkdir()
    offered, _ = await _job(tmp_path / "async", made)
    assert offered["alice"] == ["status"]


async def test_a_factory_that_fails_sends_nothing(tmp_path: Path) -> None:
    async with FakeProviderServer(default=FakeReply("ok"), model="gpt-4o-mini") as server:
        client = OpenAIClient("gpt-4o-mini", api_key="sk-test", base_url=server.base_url)
        agent = Agent(client, store=SQLiteStore(tmp_path / "b.db"), config=RunConfig(batch=True))

        def broken(name: str) -> Caller:
            raise LookupError(f"no user {name}")

        with pytest.raises(LookupError, match="no user alice"):
            await start_many(agent, ["alice", "bob"], deps=broken)
        await agent.aclose()
        assert server.requests == [] and agent.store is not None
        assert agent.store.load_runs() == []
