"""Batch runs (SPEC 25) over real HTTP against the fake server's batch APIs, on real SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.batch import poll, start_many
from agentloop.batching import BatchWait
from agentloop.model import ModelClient
from agentloop.providers.anthropic import AnthropicClient
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


def openai(server: FakeProviderServer) -> OpenAIClient:
    return OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url, provider="openai")


def agent_on(client: ModelClient, path: Path) -> Agent[str | None]:
    return Agent(client, tools=[lookup], store=SQLiteStore(path), config=RunConfig(batch=True))


async def test_a_batch_run_waits_then_a_poll_finishes_it(tmp_path: Path) -> None:
    CALLS.clear()
    steps = [FakeReply(tool_calls=[FakeToolCall("lookup", {"city": "Oslo"})]), FakeReply("done")]
    async with FakeProviderServer(steps) as server:
        agent = agent_on(openai(server), tmp_path / "s.db")
        run = await agent.run("weather?")
        assert isinstance(run.waiting, BatchWait) and run.output is None
        assert run.waiting.request_id == f"{run.id}_0_0"
        report = await poll(agent)
        assert report.continued == [run.id] and not report.failed
        report = await poll(agent)
        assert report.continued == [run.id]
        report = await poll(agent)
        assert report == type(report)()
    assert CALLS == ["Oslo"]
    done = SQLiteStore(tmp_path / "s.db").load_run(run.id)
    assert done is not None and done.run.output == "done" and done.run.waiting is None
    assert all(t.batch for t in done.run.turns)


async def test_start_many_sends_one_batch_and_anthropic_runs_finish(tmp_path: Path) -> None:
    async with FakeProviderServer(default=FakeReply("fine")) as server:
        client = AnthropicClient("claude-test", api_key="sk-ant-test", base_url=server.root_url)
        agent = agent_on(client, tmp_path / "s.db")
        runs = await start_many(agent, ["one", "two", "three"])
        assert len({r.waiting.batch_id for r in runs if r.waiting is not None}) == 1
        report = await poll(agent)
        assert sorted(report.continued) == sorted(r.id for r in runs)
    store = SQLiteStore(tmp_path / "s.db")
    outputs = [store.load_run(r.id) for r in runs]
    assert [s.run.output for s in outputs if s is not None] == ["fine"] * 3


def test_what_cannot_run_in_batches_is_refused_at_construction(tmp_path: Path) -> None:
    from agentloop import FallbackClient
    from agentloop.errors import ConfigurationError
    from agentloop.testing import ScriptedModel

    with pytest.raises(ConfigurationError, match="batch"):
        Agent(ScriptedModel([]), config=RunConfig(batch=True))
    fake = "http://127.0.0.1:9/v1"
    one = OpenAIClient("gpt-test", api_key="sk-test", base_url=fake)
    with pytest.raises(ConfigurationError, match="FallbackClient"):
        Agent(FallbackClient([one, one]), config=RunConfig(batch=True))
    with pytest.raises(ConfigurationError, match="stream"):
        Agent(one, config=RunConfig(batch=True, stream=True))
    from agentloop.providers.openai import OllamaClient

    with pytest.raises(ConfigurationError, match="OllamaClient"):
        Agent(OllamaClient("llama3", base_url=fake), config=RunConfig(batch=True))
    batched = Agent(one, config=RunConfig(batch=True), store=SQLiteStore(tmp_path / "s.db"))
    with pytest.raises(ConfigurationError, match="stream"):
        batched.stream("hi")


def test_faces_that_answer_live_refuse_a_batch_agent(tmp_path: Path) -> None:
    from agentloop.errors import ConfigurationError
    from agentloop.mcp import MCPApp
    from agentloop.ui.ag_ui import AGUIApp
    from agentloop.ui.vercel import VercelAIApp

    client = OpenAIClient("gpt-test", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    agent = agent_on(client, tmp_path / "s.db")
    with pytest.raises(ConfigurationError, match="AGUIApp"):
        AGUIApp(agent)
    with pytest.raises(ConfigurationError, match="VercelAIApp"):
        VercelAIApp(agent)
    with pytest.raises(ConfigurationError, match="MCPApp"):
        MCPApp(agent, name="batch")


async def test_the_responses_endpoint_takes_batch_runs_too(tmp_path: Path) -> None:
    from agentloop.providers import OpenAIResponsesClient

    CALLS.clear()
    steps = [FakeReply(tool_calls=[FakeToolCall("lookup", {"city": "Rome"})]), FakeReply("warm")]
    async with FakeProviderServer(steps) as server:
        client = OpenAIResponsesClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        agent = agent_on(client, tmp_path / "s.db")
        run = await agent.run("weather?")
        assert run.waiting is not None
        assert (await poll(agent)).continued == [run.id]
        assert (await poll(agent)).continued == [run.id]
    assert CALLS == ["Rome"]
    done = SQLiteStore(tmp_path / "s.db").load_run(run.id)
    assert done is not None and done.run.output == "warm"


async def test_a_poll_sends_the_next_turns_of_its_runs_as_one_batch(tmp_path: Path) -> None:
    CALLS.clear()
    ask = FakeReply(tool_calls=[FakeToolCall("lookup", {"city": "Oslo"})])
    steps = [ask, ask, FakeReply("a"), FakeReply("b")]
    async with FakeProviderServer(steps) as server:
        agent = agent_on(openai(server), tmp_path / "s.db")
        runs = await start_many(agent, ["one", "two"])
        first = {r.waiting.batch_id for r in runs if r.waiting is not None}
        assert len((await poll(agent)).continued) == 2
        store = SQLiteStore(tmp_path / "s.db")
        waits = [s.run.waiting for s in (store.load_run(r.id) for r in runs) if s is not None]
        second = {w.batch_id for w in waits if w is not None}
        assert len(first) == len(second) == 1 and first != second
        assert all(w is not None and w.request_id.endswith("_1_0") for w in waits)
        report = await poll(agent)
    assert len(report.continued) == 2 and CALLS == ["Oslo", "Oslo"]


def test_batch_is_a_bool() -> None:
    from agentloop.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="batch"):
        RunConfig(batch="yes")  # type: ignore[arg-type]


async def test_agentloop_runs_shows_a_waiting_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentloop.cli.commands import main

    async with FakeProviderServer(default=FakeReply("x"), batch_after=3600) as server:
        agent = agent_on(openai(server), tmp_path / "s.db")
        run = await agent.run("hi")
    assert main(["runs", "--store", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "waiting" in out and run.waiting is not None and run.waiting.batch_id[:8] in out
