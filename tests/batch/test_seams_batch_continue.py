"""``continue_run()`` on a run waiting on a provider batch (SPEC 25 x SPEC 17).

A waiting run's turn is in a provider batch; ``agentloop.batch.poll`` continues it when the
result arrives, applying it once. ``continue_run()`` without decisions (the call that finishes
a run a crash cut off) used to drive it anyway: a batch agent submitted the turn again in a
second provider batch (paid twice; the first batch's answer never applied), and an agent built
without ``batch=True`` (another process, a face) answered it with a synchronous request at the
full price while the batch still ran. It is ``InvalidInput`` naming ``agentloop.batch.poll``:
nothing sent, the run still waiting, and the poll applies the batch's own answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, RunConfig
from agentloop.batch import poll
from agentloop.errors import InvalidInput
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@pytest.mark.parametrize("batch", [True, False], ids=["batch agent", "synchronous agent"])
async def test_continue_run_leaves_a_waiting_run_to_the_poll(tmp_path: Path, batch: bool) -> None:
    db = tmp_path / "s.db"
    built_agents: list[Agent[str | None]] = []
    async with FakeProviderServer([FakeReply("from the batch"), FakeReply("again")]) as server:

        def built(batch: bool = True) -> Agent[str | None]:
            client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
            agent = Agent(client, store=SQLiteStore(db), config=RunConfig(batch=batch))
            built_agents.append(agent)
            return agent

        agent = built()
        run = await agent.run("go")
        assert run.waiting is not None
        submitted = set(server.batches.batches)
        session = built(batch).session(agent.session_id)
        with pytest.raises(InvalidInput, match=r"agentloop\.batch\.poll"):
            await session.continue_run()
        assert set(server.batches.batches) == submitted and server.received == []
        stored = SQLiteStore(db).load_run(run.id)
        assert stored is not None and stored.run.waiting == run.waiting
        report = await poll(built())
        assert report.continued == [run.id] and not report.failed
        for built_agent in built_agents:
            await built_agent.aclose()
    done = SQLiteStore(db).load_run(run.id)
    assert done is not None and done.run.output == "from the batch"
