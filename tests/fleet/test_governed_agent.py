"""``Agent(governor=...)`` over real HTTP (the fake provider server): where the governor sits.

Every request of the agent's client passes the governor: first attempts, retries and fallbacks.
A 429 closes the key for everyone sharing the backend and ``RetryingClient`` waits through the
governor, not beside it. Waits are events and span attributes; a wait past the wall clock is
``BudgetExhausted``; a failed backend is ``GovernorUnavailable`` with nothing sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, FallbackClient, Observer, RetryingClient, RunConfig
from agentloop import events as ev
from agentloop.errors import BudgetExhausted, GovernorUnavailable
from agentloop.fleet import GovernedClient, RateGovernor, RateLimit
from agentloop.providers.openai import OpenAIClient
from agentloop.safety.budget import Budget
from agentloop.testing import FakeClock, FakeProviderServer, FakeReply, Fault

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def openai(server: FakeProviderServer, model: str = "gpt-test") -> OpenAIClient:
    return OpenAIClient(model, api_key="sk-test", base_url=server.base_url, provider="openai")


async def no_sleep(seconds: float) -> None:
    return None


class Seen(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)


def waits(seen: list[ev.Event]) -> list[tuple[str, str, float]]:
    """The waits announced, their seconds to the tenth."""
    return [
        (e.key, e.limit, round(e.wait_seconds, 1)) for e in seen if isinstance(e, ev.RateLimitWait)
    ]


async def test_every_run_of_a_governed_agent_waits_for_its_limit() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    async with FakeProviderServer(default=FakeReply("ok")) as server:
        observer = Seen()
        agent = Agent(openai(server), governor=governor, clock=clock, observers=[observer])
        seen = observer.events
        await agent.run("one")
        assert waits(seen) == []
        await agent.run("two")
        assert len(server.received) == 2
    assert waits(seen) == [("openai:*", "rpm", 60.3)]
    assert sum(clock.sleeps) == pytest.approx(60.25)
    index = [type(e) for e in seen].index(ev.RateLimitWait)
    assert isinstance(seen[index - 1], ev.TurnStarted)  # announced before the request


async def test_a_429_closes_the_key_and_the_retry_waits_in_the_governor(tmp_path: Path) -> None:
    clock = FakeClock()
    backend = f"sqlite:///{tmp_path / 'governor.db'}"
    governor = RateGovernor([RateLimit("openai", rpm=100)], backend=backend, clock=clock)
    script: list[FakeReply | Fault] = [Fault.rate_limit(retry_after=7), FakeReply("after the wait")]
    async with FakeProviderServer(script, default=FakeReply("ok")) as server:
        retrying = RetryingClient(openai(server), sleep=no_sleep)
        observer = Seen()
        agent = Agent(retrying, governor=governor, clock=clock, observers=[observer])
        seen = observer.events
        await agent.run("hi")
        assert agent.runs[-1].output == "after the wait"
        retry = next(e for e in seen if isinstance(e, ev.RetryScheduled))
        assert retry.wait_seconds == 0.0  # RetryingClient did not sleep beside the governor
        assert waits(seen) == [("openai:*", "retry_after", 7.0)]
    governor.close()


async def test_a_429_seen_by_one_governor_holds_back_another_on_the_same_backend(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    backend = f"sqlite:///{tmp_path / 'governor.db'}"
    first = RateGovernor([RateLimit("openai", rpm=100)], backend=backend, clock=clock)
    second = RateGovernor([RateLimit("openai", rpm=100)], backend=backend, clock=clock)
    async with FakeProviderServer([Fault.rate_limit(retry_after=9)]) as server:
        agent = Agent(openai(server), governor=first, clock=clock)
        with pytest.raises(Exception, match="Rate limit"):
            await agent.run("hi")
    observer = Seen()
    async with FakeProviderServer(default=FakeReply("ok")) as server:
        other = Agent(openai(server), governor=second, clock=clock, observers=[observer])
        await other.run("hi")
    assert waits(observer.events) == [("openai:*", "retry_after", 9.0)]
    first.close()
    second.close()


async def test_fallback_requests_pass_the_governor_and_the_client_is_not_mutated() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", "primary", rpm=1)], clock=clock)
    async with FakeProviderServer([Fault.auth()], default=FakeReply("ok")) as server:
        chain = FallbackClient(
            [RetryingClient(openai(server, "primary"), max_retries=0), openai(server, "backup")]
        )
        agent = Agent(chain, governor=governor, clock=clock)
        assert agent.client is not chain and chain.clients[1].__class__ is OpenAIClient
        governed = agent.client.clients  # type: ignore[attr-defined]
        assert isinstance(governed[0].inner, GovernedClient)
        assert isinstance(governed[1], GovernedClient)
        await agent.run("hi")
        assert [r.body["model"] for r in server.received] == ["primary", "backup"]


async def test_a_wait_past_the_run_wall_clock_is_budget_exhausted_with_nothing_sent() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    config = RunConfig(budget=Budget(wall_clock=30.0))
    async with FakeProviderServer(default=FakeReply("ok")) as server:
        agent = Agent(openai(server), governor=governor, config=config, clock=clock)
        await agent.run("one")
        with pytest.raises(BudgetExhausted) as caught:
            await agent.run("two")
        assert len(server.received) == 1
    assert caught.value.dimension == "wall_clock"
    assert agent.runs[-1].stop_reason is caught.value


async def test_a_failed_backend_ends_the_run_with_governor_unavailable(tmp_path: Path) -> None:
    backend = f"sqlite:///{tmp_path / 'missing' / 'governor.db'}"
    governor = RateGovernor([RateLimit("openai", rpm=10)], backend=backend)
    async with FakeProviderServer(default=FakeReply("ok")) as server:
        agent = Agent(RetryingClient(openai(server), sleep=no_sleep), governor=governor)
        with pytest.raises(GovernorUnavailable):
            await agent.run("hi")
        assert server.received == []
    assert isinstance(agent.runs[-1].stop_reason, GovernorUnavailable)


async def test_a_stream_is_reconciled_with_its_reported_usage() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", tpm=10_000)], clock=clock)
    reply = FakeReply("ok", input_tokens=7, output_tokens=3)
    async with FakeProviderServer(default=reply) as server:
        agent = Agent(openai(server), governor=governor, config=RunConfig(stream=True))
        await agent.run("hi")
    rows = governor.backend._keys["openai:*"].sent  # type: ignore[attr-defined]
    assert [row.tokens for _, row in rows] == [10]


async def test_the_model_call_span_says_how_long_it_waited() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentloop.otel import OtelObserver

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1, window=12)], clock=clock)
    async with FakeProviderServer(default=FakeReply("ok")) as server:
        observer = OtelObserver(provider.get_tracer("test"))
        agent = Agent(openai(server), governor=governor, clock=clock, observers=[observer])
        await agent.run("one")
        await agent.run("two")
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert [(s.attributes or {}).get("agentloop.rate_limit.wait_seconds") for s in chats] == [
        None,
        pytest.approx(12.25),
    ]


async def test_the_wait_is_kept_on_the_turn_and_shown_on_the_viewer_timeline(
    tmp_path: Path,
) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from agentloop.store import SQLiteStore
    from agentloop.ui.viewer import ViewerApp

    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    store = SQLiteStore(tmp_path / "runs.db")
    async with FakeProviderServer(default=FakeReply("ok")) as server:
        agent = Agent(openai(server), governor=governor, clock=clock, store=store)
        await agent.run("one")
        second = await agent.run("two")
    note = "rate limit: waited 60.3s for openai:* (rpm)"
    assert agent.runs[0].turns[0].warnings is None
    assert second.turns[0].warnings == [note]
    store.close()
    app = ViewerApp(str(tmp_path / "runs.db"), poll_seconds=0.01)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{second.id}")
    app.close()
    assert page.status_code == 200 and note in page.text


async def test_a_client_swapped_in_by_override_is_governed_too() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    async with FakeProviderServer(default=FakeReply("ok")) as server:
        agent = Agent(openai(server), governor=governor, clock=clock)
        await agent.run("one")
        with agent.override(model=openai(server, "other")):
            await agent.run("two")
        assert [r.body["model"] for r in server.received] == ["gpt-test", "other"]
    assert sum(clock.sleeps) == pytest.approx(60.25)


async def test_a_governor_failure_never_falls_back() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    config = RunConfig(budget=Budget(wall_clock=10.0))
    async with FakeProviderServer(default=FakeReply("ok")) as server:
        chain = FallbackClient([openai(server, "primary"), openai(server, "backup")])
        agent = Agent(chain, governor=governor, config=config, clock=clock)
        await agent.run("one")
        with pytest.raises(BudgetExhausted):
            await agent.run("two")  # the backup is limited by the same key: no fallback
        assert len(server.received) == 1


def test_the_sync_facade_waits_in_the_governor_too() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    with FakeServerThread() as base_url:
        agent = Agent(
            OpenAIClient("gpt-test", api_key="sk-test", base_url=base_url),
            governor=governor,
            clock=clock,
        )
        assert agent.run_sync("one").output == "ok"
        assert agent.run_sync("two").output == "ok"  # on the agent's own loop thread
        agent.close()
    assert sum(clock.sleeps) == pytest.approx(60.25)


class FakeServerThread:
    """A fake provider on a loop of its own thread (a sync test has no loop to serve it on)."""

    def __enter__(self) -> str:
        import asyncio
        import threading

        self._loop = asyncio.new_event_loop()
        self._server = FakeProviderServer(default=FakeReply("ok"))
        started = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._server.start())
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        started.wait(30)
        return self._server.base_url

    def __exit__(self, *exc: object) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self._server.aclose(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()
