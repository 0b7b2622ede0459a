"""Cassettes around an evaluation (SPEC 23): an ordered cassette never hands a case another's reply.

``match="ordered"`` gives each request the next recorded exchange whatever sent it, so cases run
at once would take each other's replies; ``evaluate`` refuses it above ``max_concurrency=1``
before any case runs (nothing played, nothing recorded). At 1 it records and replays each case's
own replies; ``match="strict"`` (each request takes the exchange equal to it) needs no limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent
from agentloop.cassettes import use_cassette
from agentloop.errors import ConfigurationError
from agentloop.evals import Case, Dataset, EqualsExpected
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply

KEY = "sk-test-cassette-0123456789abcdef"
DEAD = "http://127.0.0.1:9/v1"

DATASET = Dataset(
    cases=[
        Case(name=name, inputs=f"say {name}", expected_output=f"{name}!")
        for name in ("alpha", "beta", "gamma")
    ],
    evaluators=[EqualsExpected()],
)


def _agent(url: str) -> Agent[str | None]:
    return Agent(OpenAIClient("m", api_key=KEY, base_url=url))


async def _record(path: Path, match: str) -> None:
    replies = [FakeReply(f"{c.expected_output}") for c in DATASET.cases]
    async with FakeProviderServer(replies) as server:
        agent = _agent(server.base_url)
        async with use_cassette(path, mode="once", match=match):  # type: ignore[arg-type]
            report = await DATASET.evaluate(agent, max_concurrency=1)
        await agent.aclose()
    assert report.pass_rate == 1.0


async def test_an_ordered_cassette_refuses_cases_run_at_once(tmp_path: Path) -> None:
    path = tmp_path / "ordered.yaml"
    await _record(path, "ordered")
    agent = _agent(DEAD)
    async with use_cassette(path, match="ordered") as cassette:
        with pytest.raises(ConfigurationError, match="max_concurrency=1") as refused:
            await DATASET.evaluate(agent)  # the default: 8 at once
        assert refused.value.field == "max_concurrency" and cassette.play_count == 0
        report = await DATASET.evaluate(agent, max_concurrency=1)
    assert report.pass_rate == 1.0 and cassette.all_played
    assert [c.output for c in report.cases] == ["alpha!", "beta!", "gamma!"]


async def test_a_strict_cassette_replays_cases_run_at_once(tmp_path: Path) -> None:
    path = tmp_path / "strict.yaml"
    await _record(path, "strict")
    async with use_cassette(path) as cassette:
        report = await DATASET.evaluate(_agent(DEAD), max_concurrency=8)
    assert report.pass_rate == 1.0 and cassette.all_played
    assert [c.output for c in report.cases] == ["alpha!", "beta!", "gamma!"]
