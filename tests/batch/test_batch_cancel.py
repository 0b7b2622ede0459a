"""``cancel_run`` on a batch run that waits (SPEC 17, 25): no poller applies its result after."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.batch import poll
from agentloop.engine.stored_cancel import cancel_stored
from agentloop.errors import Cancelled, InvalidInput
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

pytestmark = pytest.mark.usefixtures("no_real_sleep")

CALLS: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    CALLS.append(city)
    return f"{city}: sunny"


def agent_on(server: FakeProviderServer, path: Path) -> Agent[str | None]:
    client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
    return Agent(client, tools=[lookup], store=SQLiteStore(path), config=RunConfig(batch=True))


async def test_a_cancelled_waiting_run_is_never_applied(tmp_path: Path) -> None:
    CALLS.clear()
    steps = [FakeReply(tool_calls=[FakeToolCall("lookup", {"city": "Oslo"})]), FakeReply("two")]
    async with FakeProviderServer(steps) as server:
        agent = agent_on(server, tmp_path / "s.db")
        run = await agent.run("weather?")
        assert run.waiting is not None
        with pytest.raises(InvalidInput, match="cancel_run"):
            await agent.run("another")
        cancelled = await agent.cancel_run()
        assert cancelled is run and isinstance(run.stop_reason, Cancelled)
        assert run.waiting is None and run.output is None
        with pytest.raises(InvalidInput, match="no paused or waiting run"):
            await agent.cancel_run()
        report = await poll(agent)
        assert report == type(report)()  # nothing waits: the result is never applied
        after = await agent.run("again")  # a new run on the session submits as usual
        assert after.waiting is not None
    assert CALLS == []
    stored = SQLiteStore(tmp_path / "s.db").load_run(run.id)
    assert stored is not None and stored.run.waiting is None
    assert isinstance(stored.run.stop_reason, Cancelled)


async def test_a_waiting_run_cancelled_from_another_process(tmp_path: Path) -> None:
    async with FakeProviderServer([FakeReply("one")]) as server:
        agent = agent_on(server, tmp_path / "s.db")
        run = await agent.run("weather?")
        done = await cancel_stored(SQLiteStore(tmp_path / "s.db"), run.id)
        assert isinstance(done.stop_reason, Cancelled)
        report = await poll(agent)  # this process's copy was waiting: the store says no
        assert report == type(report)()
    assert agent.runs[-1].id == run.id
