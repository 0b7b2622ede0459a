"""``batch=True`` under DBOS or Temporal is a ``ConfigurationError`` (SPEC 14)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig
from agentloop.errors import ConfigurationError
from agentloop.providers.openai import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, reply


def batch_agent(tmp_path: Path) -> Agent[Any]:
    model = OpenAIClient("gpt-test", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    return Agent(model, store=SQLiteStore(tmp_path / "s.db"), config=RunConfig(batch=True))


def test_dbos_refuses_a_batch_agent_when_wrapping(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    from agentloop.durable.dbos import DBOSAgent

    with pytest.raises(ConfigurationError, match=r"DBOSAgent .* without RunConfig\(batch=True\)"):
        DBOSAgent(batch_agent(tmp_path), name="batchy")


def test_temporal_refuses_a_batch_agent_when_wrapping(tmp_path: Path) -> None:
    pytest.importorskip("temporalio")
    from agentloop.durable.temporal import TemporalAgent

    with pytest.raises(ConfigurationError, match=r"TemporalAgent .* RunConfig\(batch=True\)"):
        TemporalAgent(batch_agent(tmp_path), name="batchy")


async def test_a_config_turned_to_batch_after_wrapping_is_refused_when_a_run_starts() -> None:
    pytest.importorskip("dbos")
    pytest.importorskip("temporalio")
    from agentloop.durable.dbos import DBOSAgent
    from agentloop.durable.temporal import TemporalAgent

    agent = Agent(ScriptedModel([reply("x")]))
    dbos = DBOSAgent(agent, name="turned")
    temporal = TemporalAgent(agent, name="turned")
    agent.config = dataclasses.replace(agent.config, batch=True)
    with pytest.raises(ConfigurationError, match="batch=True") as refused:
        await dbos.run("go")
    assert refused.value.field == "batch"
    with pytest.raises(ConfigurationError, match="batch=True"):
        dbos.enqueue("go")
    with pytest.raises(ConfigurationError, match="batch=True"):
        await temporal.start("go", client=None)  # type: ignore[arg-type]
