"""A cassette around a DBOS workflow run (SPEC 23, what docs/evals.md says holds under DBOS): the
workflow's model steps run in the caller's process and context, so they record and replay."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="the DBOS cassette test needs the dbos extra")

from dbos import DBOS

from agentloop import Agent, tool
from agentloop.cassettes import use_cassette
from agentloop.durable.dbos import DBOSAgent
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture
def dbos_url(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS.destroy(destroy_registry=True)


async def test_a_dbos_workflow_records_and_replays(tmp_path: Path, dbos_url: str) -> None:
    path = tmp_path / "dbos.yaml"
    steps: list[Any] = [
        FakeReply(tool_calls=[FakeToolCall("add", {"a": 1, "b": 2})]),
        FakeReply("three"),
    ]
    async with FakeProviderServer(steps) as server:
        live = Agent(OpenAIClient("m", api_key="sk-dbos-0123456789", base_url=server.base_url),
                     tools=[add])  # fmt: skip
        offline = Agent(OpenAIClient("m", api_key="k", base_url="http://127.0.0.1:9/v1"),
                        tools=[add])  # fmt: skip
        recording, replaying = DBOSAgent(live, name="rec"), DBOSAgent(offline, name="play")
        DBOS(config={"name": "agentloop-cassettes", "system_database_url": dbos_url,
                     "log_level": "ERROR"})  # fmt: skip
        DBOS.launch()
        async with use_cassette(path, mode="once") as cassette:
            first = await recording.run("add 1 and 2", workflow_id="wf-record")
        await live.aclose()
    assert cassette.recording and len(cassette.interactions) == 2
    async with use_cassette(path) as cassette:
        again = await replaying.run("add 1 and 2", workflow_id="wf-replay")
    assert again.output == first.output == "three" and cassette.all_played
