"""A batch run that hands off stays a batch run (SPEC 25, 26): the receiver's turns are batched.

The starting agent's ``RunConfig(batch=True)`` governs the run, and construction checks every
agent of the handoff graph can run in batches: so the receiver's model calls go through the
provider's batch API as the first turns did, continued by ``agentloop.batch.poll``, never sent
synchronously at full price while ``Turn.batch`` says half. Real HTTP against the fake server's
batch API, real SQLite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.batch import poll
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

pytestmark = pytest.mark.usefixtures("no_real_sleep")

LOOKED: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    LOOKED.append(city)
    return f"{city}: sunny"


async def test_the_receiver_s_turns_go_through_the_batch_api(tmp_path: Path) -> None:
    LOOKED.clear()
    steps = [
        FakeReply(tool_calls=[FakeToolCall("transfer_to_ops", {}, id="call_t")]),
        FakeReply(tool_calls=[FakeToolCall("lookup", {"city": "Oslo"}, id="call_l")]),
        FakeReply("Oslo is sunny"),
    ]
    batch = RunConfig(batch=True)
    async with FakeProviderServer(steps) as server:

        def client(model: str) -> OpenAIClient:
            return OpenAIClient(model, api_key="sk-test", base_url=server.base_url)

        ops = Agent(client("gpt-ops"), name="ops", tools=[lookup], config=batch)
        store = SQLiteStore(tmp_path / "s.db")
        agent = Agent(client("gpt-front"), handoffs=[ops], store=store, config=batch)
        run = await agent.run("weather in Oslo?")
        assert run.waiting is not None
        reports = [await poll(agent) for _ in range(4)]
        assert server.received == []  # not one synchronous model request
        await agent.aclose()
        await ops.aclose()
    assert [r.continued for r in reports] == [[run.id]] * 3 + [[]]
    assert LOOKED == ["Oslo"]
    done = store.load_run(run.id)
    assert done is not None and done.run.output == "Oslo is sunny"
    assert [(t.batch, t.agent) for t in done.run.turns] == [
        (True, None),
        (True, "ops"),
        (True, "ops"),
    ]
