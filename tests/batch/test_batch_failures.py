"""A batch request that fails (SPEC 25): mapped onto the error tree, retried or ending its run."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, Observer, RunConfig
from agentloop.batch import poll
from agentloop.errors import BadRequestError, Cancelled, InvalidInput, ProviderTimeout
from agentloop.pricing import Price, turn_cost
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, Fault

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def batch_agent(server: FakeProviderServer, path: Path) -> Agent[str | None]:
    client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
    return Agent(client, store=SQLiteStore(path), config=RunConfig(batch=True))


async def test_an_errored_400_ends_the_run_and_the_poll_goes_on(tmp_path: Path) -> None:
    steps: list[FakeReply | Fault] = [Fault.http(400), FakeReply("ok")]
    async with FakeProviderServer(steps) as server:
        agent = batch_agent(server, tmp_path / "s.db")
        bad = await agent.run("one")
        good = await agent.session().run("two")
        report = await poll(agent)
    assert isinstance(report.failed[bad.id], BadRequestError)
    assert report.continued == [good.id]
    stored = SQLiteStore(tmp_path / "s.db").load_run(bad.id)
    assert stored is not None and isinstance(stored.run.stop_reason, BadRequestError)


async def test_a_429_and_an_expired_request_go_in_the_next_batch(tmp_path: Path) -> None:
    steps: list[FakeReply | Fault] = [
        Fault.rate_limit(retry_after=3),
        FakeReply("late", batch_result="expired"),
        FakeReply("at last"),
    ]
    async with FakeProviderServer(steps) as server:
        agent = batch_agent(server, tmp_path / "s.db")
        run = await agent.run("hi")
        first = run.waiting
        assert (await poll(agent)).waiting == [run.id]
        assert (await poll(agent)).waiting == [run.id]
        assert (await poll(agent)).continued == [run.id]
    stored = SQLiteStore(tmp_path / "s.db").load_run(run.id)
    assert stored is not None and stored.run.output == "at last"
    assert first is not None and first.request_id.endswith("_0_0")


async def test_expiring_past_the_retries_is_a_provider_timeout(tmp_path: Path) -> None:
    async with FakeProviderServer(default=FakeReply("x", batch_result="expired")) as server:
        agent = batch_agent(server, tmp_path / "s.db")
        run = await agent.run("hi")
        for _ in range(2):
            assert (await poll(agent)).waiting == [run.id]
        report = await poll(agent)
    error = report.failed[run.id]
    assert isinstance(error, ProviderTimeout) and error.request_sent is True


async def test_a_cancelled_batch_is_cancelled(tmp_path: Path) -> None:
    async with FakeProviderServer(default=FakeReply("x", batch_result="canceled")) as server:
        agent = batch_agent(server, tmp_path / "s.db")
        run = await agent.run("hi")
        report = await poll(agent)
    assert isinstance(report.failed[run.id], Cancelled)


async def test_a_waiting_session_takes_no_new_run(tmp_path: Path) -> None:
    async with FakeProviderServer(default=FakeReply("x"), batch_after=3600) as server:
        agent = batch_agent(server, tmp_path / "s.db")
        await agent.run("hi")
        with pytest.raises(InvalidInput, match=r"agentloop\.batch\.poll"):
            await agent.run("again")
        assert (await poll(agent)).waiting


def test_a_batch_turn_costs_the_batch_fraction() -> None:
    from agentloop.messages import Usage

    prices = {"m": Price(input_per_million=2.0, output_per_million=8.0)}
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert turn_cost(usage, "m", prices=prices) == 10.0
    assert turn_cost(usage, "m", True, prices=prices) == 5.0
    third = {"m": Price(2.0, 8.0, batch_fraction=0.25)}
    assert turn_cost(usage, "m", True, prices=third) == 2.5


async def test_a_parallel_input_check_blocks_before_anything_is_submitted(tmp_path: Path) -> None:
    from agentloop.errors import GuardrailTripped
    from agentloop.guardrails import InputGuardrail

    def no_secrets(ctx: object, text: object) -> str | None:
        return "a secret in the input" if "secret" in str(text) else None

    async with FakeProviderServer(default=FakeReply("x")) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        agent = Agent(
            client,
            store=SQLiteStore(tmp_path / "s.db"),
            config=RunConfig(batch=True),
            guardrails=[InputGuardrail(no_secrets, parallel=True)],
        )
        with pytest.raises(GuardrailTripped):
            await agent.run("my secret")
        assert server.batches.batches == {}


async def test_a_waiting_run_announces_run_waiting_before_run_finished(tmp_path: Path) -> None:
    from agentloop import events as ev

    class Seen(Observer):
        def __init__(self) -> None:
            self.events: list[ev.Event] = []

        def on_event(self, event: ev.Event) -> None:
            self.events.append(event)

    seen = Seen()
    async with FakeProviderServer(default=FakeReply("x"), batch_after=3600) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        store = SQLiteStore(tmp_path / "s.db")
        agent = Agent(client, store=store, config=RunConfig(batch=True), observers=[seen])
        run = await agent.run("hi")
    kinds = [type(e) for e in seen.events]
    assert kinds[-2:] == [ev.RunWaiting, ev.RunFinished]
    waiting = seen.events[-2]
    assert isinstance(waiting, ev.RunWaiting) and waiting.waiting == run.waiting
    assert run.stop_reason is None and run.output is None
    stored = store.load_run(run.id)
    assert stored is not None and stored.run.waiting == run.waiting


async def test_time_waiting_on_a_batch_does_not_count_against_the_wall_clock(
    tmp_path: Path,
) -> None:
    from agentloop.safety.budget import Budget
    from agentloop.testing import FakeClock

    clock = FakeClock()
    async with FakeProviderServer(default=FakeReply("done")) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        config = RunConfig(batch=True, budget=Budget(wall_clock=60.0))
        agent = Agent(client, store=SQLiteStore(tmp_path / "s.db"), config=config, clock=clock)
        run = await agent.run("hi")
        clock.advance(6 * 3600)  # the batch takes six hours
        report = await poll(agent)
    assert report.continued == [run.id] and not report.failed


async def test_a_batch_submission_waits_for_the_governor(tmp_path: Path) -> None:
    from agentloop import events as ev
    from agentloop.fleet import RateGovernor, RateLimit
    from agentloop.testing import FakeClock

    class Waits(Observer):
        def __init__(self) -> None:
            self.waits: list[str] = []

        def on_event(self, event: ev.Event) -> None:
            if isinstance(event, ev.RateLimitWait):
                self.waits.append(event.limit)

    clock, seen = FakeClock(), Waits()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    async with FakeProviderServer(default=FakeReply("x"), batch_after=3600) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        store = SQLiteStore(tmp_path / "s.db")
        agent = Agent(
            client, store=store, config=RunConfig(batch=True), governor=governor, clock=clock,
            observers=[seen],
        )  # fmt: skip
        await agent.run("one")
        await agent.session().run("two")
    assert seen.waits == ["rpm"]
