"""A batch run that pauses, decided in another process (SPEC 25 x SPEC 17).

A poll applies the batch reply, whose call needs approval: the run pauses (``PollReport.paused``).
Another process (an agent built again on the same store) approves it: the approved call runs
once, the run's next turn is submitted to the batch API (the run waits again, not answered
synchronously), and the next poll finishes it; every turn is a batch turn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, Approve, RunConfig, tool
from agentloop.batch import poll
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

pytestmark = pytest.mark.usefixtures("no_real_sleep")

WIPED: list[str] = []


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Wipe a path."""
    WIPED.append(path)
    return f"wiped {path}"


async def test_a_paused_batch_run_decided_elsewhere_submits_its_next_turn(tmp_path: Path) -> None:
    WIPED.clear()
    db = tmp_path / "s.db"
    steps = [FakeReply(tool_calls=[FakeToolCall("wipe", {"path": "a"})]), FakeReply("done")]
    built_agents: list[Agent[str | None]] = []
    async with FakeProviderServer(steps) as server:

        def built() -> Agent[str | None]:
            client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
            agent = Agent(client, tools=[wipe], store=SQLiteStore(db), config=RunConfig(batch=True))
            built_agents.append(agent)
            return agent

        agent = built()
        run = await agent.run("wipe a")
        assert run.waiting is not None
        report = await poll(built())
        assert report.paused == [run.id]
        session = built().session(agent.session_id)
        (pending,) = session.runs[-1].pending
        continued = await session.continue_run(decisions={pending.id: Approve()})
        assert continued.id == run.id and continued.waiting is not None and WIPED == ["a"]
        assert continued.waiting.request_id == f"{run.id}_1_0"
        report = await poll(built())
        assert report.continued == [run.id] and not report.failed
        for built_agent in built_agents:
            await built_agent.aclose()
    stored = SQLiteStore(db).load_run(run.id)
    assert stored is not None and stored.run.output == "done" and WIPED == ["a"]
    assert [t.batch for t in stored.run.turns] == [True, True]
