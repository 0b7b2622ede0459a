"""Cassettes and failures (SPEC 23): a refused request is kept and replays as the same hard
error; a mismatch is never answered by a retry or a fallback client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, FallbackClient
from agentloop.cassettes import use_cassette
from agentloop.errors import AgentLoopError, CassetteMismatch
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, Fault, ScriptedModel, reply

from .test_cassettes import DEAD, KEY, agent_at, forbid_sockets, record


async def failure(agent: Agent[Any], *, stream: bool) -> str:
    try:
        if stream:
            async with agent.stream("hi") as events:
                async for _ in events:
                    pass
        else:
            await agent.run("hi")
    except AgentLoopError as error:
        return f"{type(error).__name__}: {error}"
    finally:
        await agent.aclose()
    raise AssertionError("the run did not fail")


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_a_refused_request_replays_as_the_same_hard_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    path = tmp_path / "refused.yaml"
    refusal = Fault.http(400, {"error": {"message": "bad tool schema", "type": "invalid"}})
    async with FakeProviderServer([refusal]) as server:
        async with use_cassette(path, mode="once"):
            live = await failure(agent_at(server.base_url), stream=stream)
    assert live.startswith("BadRequestError") and "bad tool schema" in live
    assert "status: 400" in path.read_text() and KEY not in path.read_text()
    forbid_sockets(monkeypatch)
    async with use_cassette(path) as cassette:
        assert await failure(agent_at(DEAD), stream=stream) == live
    assert cassette.all_played


async def test_a_mismatch_is_never_answered_by_a_fallback(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    await record(path)
    spare = ScriptedModel([reply("the fallback answered")])
    agent = Agent(FallbackClient([OpenAIClient("m", api_key=KEY, base_url=DEAD), spare]))
    async with use_cassette(path):
        with pytest.raises(CassetteMismatch, match="request 1 differs"):
            await agent.run("something else")
    assert spare.requests == []
    assert isinstance(agent.runs[-1].stop_reason, CassetteMismatch)


async def test_a_refusal_never_reached_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "nothing.yaml"
    async with use_cassette(path, mode="once"):
        with pytest.raises(AgentLoopError):
            await agent_at(DEAD).run("hi")  # connection refused: no exchange happened
    assert "interactions: []" in path.read_text()


async def test_a_block_that_asked_for_fewer_is_not_all_played(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    await record(path)  # two exchanges: the tool call, then the answer
    async with use_cassette(path) as cassette:
        pass
    assert (cassette.all_played, cassette.play_count) == (False, 0)
    async with use_cassette(path, match="ordered") as cassette:
        with pytest.raises(CassetteMismatch, match="no recorded request left"):
            await agent_at(DEAD).run("add 1 and 2")
            await agent_at(DEAD).run("add 1 and 2")
    assert cassette.all_played and cassette.play_count == 2


def _bedrock(url: str) -> Agent[Any]:
    from botocore.credentials import Credentials

    from agentloop.providers.settings import Settings, build_client

    creds = Credentials("AKIDREFUSALEXAMPLE77", "refusal/secret/key/0123456789", None)
    settings = Settings(
        provider="bedrock",
        region="us-east-1",
        credentials=creds,
        model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        base_url=url,
        max_retries=0,
    )
    return Agent(build_client(settings))


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse-stream"])
async def test_a_refused_bedrock_request_replays_as_the_same_aws_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    path = tmp_path / "bedrock-refused.yaml"
    refusal = Fault.http(
        400,
        {"message": "The model returned an invalid tool schema"},
        headers={"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/coral/"},
    )
    async with FakeProviderServer([refusal]) as server:
        async with use_cassette(path, mode="once"):
            live = await failure(_bedrock(server.root_url), stream=stream)
    assert "invalid tool schema" in live
    assert "status: 400" in path.read_text() and "refusal/secret" not in path.read_text()
    forbid_sockets(monkeypatch)
    async with use_cassette(path) as cassette:
        assert await failure(_bedrock(DEAD.removesuffix("/v1")), stream=stream) == live
    assert cassette.all_played
