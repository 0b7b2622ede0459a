"""A handoff's receiver sends through the starting agent's governor (SPEC 25, 26).

The governor stays the starting agent's across a handoff: the receiver's requests wait for it
and count against its limits, as every request of the run does; a receiver with a governor of
its own keeps that one (never governed twice). Real HTTP (the fake provider server), the
in-process and SQLite backends, the suite's fake clock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, Observer, RunConfig, tool
from agentloop import events as ev
from agentloop.errors import BudgetExhausted
from agentloop.fleet import GovernedClient, RateGovernor, RateLimit
from agentloop.providers.openai import OpenAIClient
from agentloop.safety.budget import Budget
from agentloop.testing import FakeClock, FakeProviderServer, FakeReply, FakeToolCall

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@tool
def ping() -> str:
    """Ping."""
    return "pong"


class Seen(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)


def openai(server: FakeProviderServer, model: str) -> OpenAIClient:
    return OpenAIClient(model, api_key="sk-test", base_url=server.base_url, provider="openai")


FRONT = [FakeReply(tool_calls=[FakeToolCall("transfer_to_ops", {}, id="call_t")])]
BACK = [FakeReply(tool_calls=[FakeToolCall("ping", {}, id="call_p")]), FakeReply("done")]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_the_receiver_s_requests_wait_for_the_starting_agent_s_governor(
    backend: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    where = "memory" if backend == "memory" else f"sqlite:///{tmp_path / 'governor.db'}"
    governor = RateGovernor([RateLimit("openai", rpm=2)], backend=where, clock=clock)
    seen = Seen()
    async with FakeProviderServer(FRONT) as front_server, FakeProviderServer(BACK) as back_server:
        ops = Agent(openai(back_server, "gpt-back"), name="ops", tools=[ping])
        front = Agent(
            openai(front_server, "gpt-front"),
            handoffs=[ops],
            governor=governor,
            clock=clock,
            observers=[seen],
        )
        run = await front.run("go")
        await front.aclose()
        await ops.aclose()
    assert run.output == "done" and run.last_agent == "ops"
    [wait] = [e for e in seen.events if isinstance(e, ev.RateLimitWait)]
    assert (wait.key, wait.limit, wait.agent) == ("openai:*", "rpm", "ops")  # the 3rd request
    assert wait.turn == 2 and wait.wait_seconds > 59


async def test_a_receiver_past_the_run_wall_clock_is_budget_exhausted_unsent() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=2)], clock=clock)
    config = RunConfig(budget=Budget(wall_clock=30.0))
    async with FakeProviderServer(FRONT) as front_server, FakeProviderServer(BACK) as back_server:
        ops = Agent(openai(back_server, "gpt-back"), name="ops", tools=[ping])
        front = Agent(
            openai(front_server, "gpt-front"),
            handoffs=[ops],
            governor=governor,
            config=config,
            clock=clock,
        )
        with pytest.raises(BudgetExhausted) as caught:
            await front.run("go")
        assert (len(front_server.received), len(back_server.received)) == (1, 1)
        await front.aclose()
        await ops.aclose()
    assert caught.value.dimension == "wall_clock"


async def test_a_receiver_with_its_own_governor_keeps_it() -> None:
    clock = FakeClock()
    mine = RateGovernor([RateLimit("openai", rpm=100)], clock=clock)
    theirs = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    seen = Seen()
    async with FakeProviderServer(FRONT) as front_server, FakeProviderServer(BACK) as back_server:
        ops = Agent(openai(back_server, "gpt-back"), name="ops", tools=[ping], governor=mine)
        assert isinstance(ops.client, GovernedClient)
        front = Agent(
            openai(front_server, "gpt-front"),
            handoffs=[ops],
            governor=theirs,
            clock=clock,
            observers=[seen],
        )
        run = await front.run("go")
        await front.aclose()
        await ops.aclose()
    assert run.output == "done"
    assert [e for e in seen.events if isinstance(e, ev.RateLimitWait)] == []
