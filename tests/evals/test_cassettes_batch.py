"""Batch runs under a cassette (SPEC 23, 25): the upload, the create POST, the status GETs in
order and the results download, recorded against the fake server over real HTTP and replayed
with no socket (a fresh store, fresh run ids)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.batch import poll, start_many
from agentloop.cassettes import use_cassette
from agentloop.errors import AgentLoopError, CassetteMismatch
from agentloop.model import ModelClient
from agentloop.providers._http_calls import call
from agentloop.providers.anthropic import AnthropicClient
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault

from .test_cassettes import forbid_sockets

pytestmark = pytest.mark.usefixtures("no_real_sleep")

KEY = "sk-test-batch-cassette-0123456789"
DEAD = "http://127.0.0.1:9"  # nothing listens: a replay that tried the network would fail
CALLS: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    CALLS.append(city)
    return f"{city}: sunny"


def agent_on(client: ModelClient, db: Path) -> Agent[Any]:
    return Agent(client, tools=[lookup], store=SQLiteStore(db), config=RunConfig(batch=True))


def openai(root: str) -> OpenAIClient:
    return OpenAIClient("gpt-test", api_key=KEY, base_url=f"{root}/v1", provider="openai")


def finish_batches(server: FakeProviderServer) -> None:
    """Every batch the server holds is ready now (no clock is waited on)."""
    for batch in server.batches.batches.values():
        object.__setattr__(batch, "ready_at", 0.0)


async def polls(agent: Agent[Any], server: FakeProviderServer | None) -> list[tuple[int, int]]:
    """Two polls of a pending batch, then (the batch ended) polls until the run is done."""
    seen = []
    for _ in range(2):
        report = await poll(agent)
        seen.append((len(report.continued), len(report.waiting)))
    if server is not None:
        finish_batches(server)
    report = await poll(agent)  # the first turn's result: the tool runs, turn 2 is submitted
    seen.append((len(report.continued), len(report.waiting)))
    if server is not None:
        finish_batches(server)
    report = await poll(agent)
    seen.append((len(report.continued), len(report.waiting)))
    return seen


def responses(root: str) -> ModelClient:
    from agentloop.providers import OpenAIResponsesClient

    return OpenAIResponsesClient("gpt-test", api_key=KEY, base_url=f"{root}/v1")


@pytest.mark.parametrize("make", [openai, responses], ids=["chat", "responses"])
async def test_a_batch_run_records_and_replays_its_polls_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Any
) -> None:
    CALLS.clear()
    tape = tmp_path / "batch.yaml"
    steps = [FakeReply(tool_calls=[FakeToolCall("lookup", {"city": "Oslo"})]), FakeReply("done")]
    async with FakeProviderServer(steps, batch_after=3600) as server:
        agent = agent_on(make(server.root_url), tmp_path / "rec.db")
        async with use_cassette(tape, mode="once") as cassette:
            run = await agent.run("weather?")
            recorded = await polls(agent, server)
        await agent.aclose()
    assert cassette.recording and CALLS == ["Oslo"]
    assert recorded == [(0, 1), (0, 1), (1, 0), (1, 0)]
    text = tape.read_text()
    assert KEY not in text and run.id not in text
    interactions = json.loads(json.dumps(__import__("yaml").safe_load(text)))["interactions"]
    gets = [i for i in interactions if i["request"]["path"].startswith("/v1/batches/")]
    first = [g for g in gets if g["request"]["path"] == gets[0]["request"]["path"]]
    assert [g["response"]["body"]["status"] for g in first] == [
        "in_progress",
        "in_progress",
        "completed",
    ]
    upload = interactions[0]["request"]
    assert upload["path"] == "/v1/files" and upload["body"]["purpose"] == "batch"
    assert upload["body"]["file"]["custom_id"] == "<run-id>_0_0"

    tried = forbid_sockets(monkeypatch)
    CALLS.clear()
    agent = agent_on(make(DEAD), tmp_path / "replay.db")
    async with use_cassette(tape) as cassette:
        again = await agent.run("weather?")
        assert again.waiting is not None and again.id != run.id
        assert await polls(agent, None) == recorded
    assert cassette.all_played and not tried and CALLS == ["Oslo"]
    done = SQLiteStore(tmp_path / "replay.db").load_run(again.id)
    assert done is not None and done.run.output == "done" and done.run.waiting is None


async def test_start_many_replays_each_result_to_its_own_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "many.json"
    steps = [FakeReply("first"), FakeReply("second"), FakeReply("third")]
    inputs = ["one", "two", "three"]
    async with FakeProviderServer(steps) as server:
        client = AnthropicClient("claude-test", api_key=KEY, base_url=server.root_url)
        agent = agent_on(client, tmp_path / "rec.db")
        async with use_cassette(tape, mode="once"):
            runs = await start_many(agent, inputs)
            assert len((await poll(agent)).continued) == 3
        await agent.aclose()
    store = SQLiteStore(tmp_path / "rec.db")
    outputs = {r.input: store.load_run(r.id).run.output for r in runs}  # type: ignore[union-attr]
    assert KEY not in tape.read_text()

    tried = forbid_sockets(monkeypatch)
    client = AnthropicClient("claude-test", api_key=KEY, base_url=DEAD)
    agent = agent_on(client, tmp_path / "replay.db")
    async with use_cassette(tape) as cassette:
        replayed = await start_many(agent, inputs)
        assert len((await poll(agent)).continued) == 3
    assert cassette.all_played and not tried
    store = SQLiteStore(tmp_path / "replay.db")
    again = {r.input: store.load_run(r.id).run.output for r in replayed}  # type: ignore[union-attr]
    assert again == outputs and sorted(map(str, outputs.values())) == ["first", "second", "third"]


async def status_reads(
    agent: Agent[Any], base: str, server: FakeProviderServer | None
) -> list[str]:
    run = await agent.run("hi")
    assert run.waiting is not None
    url = f"{base}/v1/batches/{run.waiting.batch_id}"
    transport = agent.client._transport  # type: ignore[attr-defined]
    seen = [(await call(transport, "GET", url)).data["status"]]
    if server is not None:
        finish_batches(server)
    for _ in range(1 if server is not None else 2):
        seen.append((await call(transport, "GET", url)).data["status"])
    return seen


async def test_status_reads_past_the_recording_repeat_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "status.yaml"
    async with FakeProviderServer(default=FakeReply("x"), batch_after=3600) as server:
        agent = agent_on(openai(server.root_url), tmp_path / "rec.db")
        async with use_cassette(tape, mode="once"):
            assert await status_reads(agent, server.root_url, server) == [
                "in_progress",
                "completed",
            ]
        await agent.aclose()
    forbid_sockets(monkeypatch)
    agent = agent_on(openai(DEAD), tmp_path / "replay.db")
    async with use_cassette(tape) as cassette:
        seen = await status_reads(agent, DEAD, None)
    assert seen == ["in_progress", "completed", "completed"] and cassette.all_played


async def test_a_failed_call_and_an_errored_result_replay_as_the_same_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "refused.yaml"

    async def failures(agent: Agent[Any], base: str) -> tuple[str, str]:
        run = await agent.run("hi")
        failed = (await poll(agent)).failed[run.id]
        transport = agent.client._transport  # type: ignore[attr-defined]
        with pytest.raises(AgentLoopError) as missing:
            await call(transport, "GET", f"{base}/v1/messages/batches/msgbatch_nope")
        return f"{type(failed).__name__}: {failed}", f"{type(missing.value).__name__}"

    async with FakeProviderServer([replace(Fault.http(400), batch_result="errored")]) as server:
        client = AnthropicClient("claude-test", api_key=KEY, base_url=server.root_url)
        agent = agent_on(client, tmp_path / "rec.db")
        async with use_cassette(tape, mode="once"):
            recorded = await failures(agent, server.root_url)
        await agent.aclose()
    assert recorded[0].startswith("BadRequestError")
    forbid_sockets(monkeypatch)
    agent = agent_on(AnthropicClient("claude-test", api_key=KEY, base_url=DEAD), tmp_path / "r.db")
    async with use_cassette(tape):
        assert await failures(agent, DEAD) == recorded
        with pytest.raises(CassetteMismatch, match="no recorded request left"):
            await agent.run("hi")
