"""``start_many`` and ``poll`` on a governed agent (SPEC 25: the governor x batch runs).

One pass sends one provider batch for all its runs: that submission passes the governor once.
Before, each run of the pass took its own lease and held it while it waited for the others to
join the batch, so a ``concurrent`` limit below the number of runs stalled the pass until the
leases expired (130 s each), and an ``rpm`` below it waited a whole window for one request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, RunConfig
from agentloop.batch import poll, start_many
from agentloop.fleet import RateGovernor, RateLimit
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeClock, FakeProviderServer, FakeReply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@pytest.mark.parametrize(
    "limit", [RateLimit("openai", concurrent=1), RateLimit("openai", rpm=1)], ids=repr
)
async def test_one_pass_is_one_governed_submission(tmp_path: Path, limit: RateLimit) -> None:
    clock = FakeClock()
    governor = RateGovernor([limit], clock=clock)
    async with FakeProviderServer(default=FakeReply("fine")) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        store = SQLiteStore(tmp_path / "s.db")
        config = RunConfig(batch=True)
        agent = Agent(client, store=store, config=config, governor=governor, clock=clock)
        runs = await start_many(agent, ["one", "two", "three"])
        assert all(r.waiting is not None for r in runs)
        assert len({r.waiting.batch_id for r in runs if r.waiting is not None}) == 1
        assert sum(clock.sleeps) < 1.0  # no lease held by a run waiting for its siblings
        clock.advance(120.0)
        report = await poll(agent)
        assert sorted(report.continued) == sorted(r.id for r in runs) and not report.failed
    outputs = [store.load_run(r.id) for r in runs]
    assert [s.run.output for s in outputs if s is not None] == ["fine"] * 3
