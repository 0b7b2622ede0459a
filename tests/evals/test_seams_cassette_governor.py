"""A cassette's replay and the rate governor (SPEC 23 x SPEC 25).

A replay (``mode="none"``, or ``"once"`` with the file) opens no provider socket: no request
reaches the provider, so none is counted, none waits, and the governor's backend is not asked.
Before, a governed agent's replay waited out the fleet's limits as if it were sending, and
failed with ``GovernorUnavailable`` where the shared governor's database is out of reach (a CI
machine replaying offline). A recording still passes the governor: its requests are real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent
from agentloop.cassettes import use_cassette
from agentloop.fleet import RateGovernor, RateLimit
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeClock, FakeProviderServer, FakeReply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def governed(url: str, governor: RateGovernor, clock: FakeClock) -> Agent[str | None]:
    client = OpenAIClient("gpt-test", api_key="sk-test", base_url=url, provider="openai")
    return Agent(client, governor=governor, clock=clock)


async def test_a_replay_neither_waits_nor_asks_the_governor(tmp_path: Path) -> None:
    tape = tmp_path / "weather.yaml"
    clock = FakeClock()
    async with FakeProviderServer(default=FakeReply("sunny")) as server:
        url = server.base_url
        recording = governed(url, RateGovernor([RateLimit("openai", rpm=1)], clock=clock), clock)
        with use_cassette(tape, mode="once"):
            await recording.run("one")
            await recording.run("two")
    assert clock.sleeps == [pytest.approx(60.25)]  # recording: real requests, governed
    replay_clock = FakeClock()
    unreachable = f"sqlite:///{tmp_path / 'no' / 'such' / 'governor.db'}"
    governor = RateGovernor([RateLimit("openai", rpm=1)], backend=unreachable, clock=replay_clock)
    agent = governed(url, governor, replay_clock)
    with use_cassette(tape) as cassette:
        first = await agent.run("one")
        second = await agent.run("two")
    assert first.output == second.output == "sunny" and cassette.all_played
    assert replay_clock.sleeps == []
