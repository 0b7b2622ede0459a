"""One input refused by ``start_many`` neither raises over the others nor strands them.

Found by building an ops service from the docs alone: a nightly batch over 50 inputs, with the
production agent's input guardrail. One input tripped it: ``start_many`` raised
``GuardrailTripped`` as soon as that run ended, the other runs were still waiting to join the
batch, and when the job's loop ended they were left in the store neither waiting nor finished:
no batch had been sent, and no ``poll`` would ever find them. ``start_many`` now returns every
run, a run ended before its first model call with its error as ``stop_reason`` (as its docstring
and fleet.md say), and an input that is no run input is ``InvalidInput`` before any run starts.

Real parts: the fake provider's batch API over HTTP on 127.0.0.1, one SQLite store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig
from agentloop.batch import poll, start_many
from agentloop.errors import GuardrailTripped, InvalidInput, ProviderUnavailable
from agentloop.guardrails import InputGuardrail
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def no_prod_drop(ctx: Any, text: str) -> str | None:
    return "dropping production is not allowed" if "drop prod" in text else None


def _agent(url: str, db: Path) -> Agent[Any]:
    client = OpenAIClient("gpt-4o-mini", api_key="sk-test", base_url=url)
    return Agent(
        client,
        store=SQLiteStore(db),
        config=RunConfig(batch=True),
        guardrails=[InputGuardrail(no_prod_drop)],
    )


async def test_a_tripped_input_is_an_ended_run_and_the_others_are_submitted(
    tmp_path: Path,
) -> None:
    async with FakeProviderServer(default=FakeReply("ok"), model="gpt-4o-mini") as server:
        agent = _agent(server.base_url, tmp_path / "b.db")
        runs = await start_many(agent, ["status a", "drop prod now", "status b"])
        first, refused, last = runs
        assert first.waiting is not None and last.waiting is not None
        assert refused.waiting is None and isinstance(refused.stop_reason, GuardrailTripped)
        assert first.waiting.batch_id == last.waiting.batch_id  # one batch for the others
        report = await poll(agent)
        await agent.aclose()
    assert sorted(report.continued) == sorted([first.id, last.id])
    store = SQLiteStore(tmp_path / "b.db")
    ended = {run.id: store.load_run(run.id) for run in runs}
    assert all(stored is not None and stored.finished for stored in ended.values())
    assert [ended[r.id].run.output for r in (first, last)] == ["ok", "ok"]  # type: ignore[union-attr]


async def test_a_provider_that_refuses_the_batch_ends_every_run(tmp_path: Path) -> None:
    agent = _agent("http://127.0.0.1:9/v1", tmp_path / "b.db")  # nothing listens here
    runs = await start_many(agent, ["status a", "status b"])
    await agent.aclose()
    assert [type(run.stop_reason) for run in runs] == [ProviderUnavailable] * 2
    assert SQLiteStore(tmp_path / "b.db").load_runs(status="waiting") == []


async def test_an_input_that_is_no_run_input_starts_nothing(tmp_path: Path) -> None:
    agent = _agent("http://127.0.0.1:9/v1", tmp_path / "b.db")
    with pytest.raises(InvalidInput, match="run\\(\\) input must be"):
        await start_many(agent, ["status a", 42])  # type: ignore[list-item]
    await agent.aclose()
    assert SQLiteStore(tmp_path / "b.db").load_runs() == []
