"""``RateGovernor.acquire`` on the in-process backend, on a fake clock: waits, FIFO, fail closed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentloop.errors import BudgetExhausted, Cancelled, ConfigurationError, GovernorUnavailable
from agentloop.fleet import RateGovernor, RateLimit
from agentloop.messages import Usage
from agentloop.testing import FakeClock

pytestmark = pytest.mark.usefixtures("no_real_sleep")


class Run:
    """What the engine's event bridge gives the governor: events, wall clock, cancel."""

    def __init__(self, wall_clock: tuple[float, float] | None = None) -> None:
        self.waits: list[tuple[str, str, float]] = []
        self.line = wall_clock
        self.cancelled = False

    def on_rate_limit_wait(self, key: str, limit: str, wait_seconds: float) -> None:
        self.waits.append((key, limit, wait_seconds))

    def wall_clock(self) -> tuple[float, float] | None:
        return self.line

    def check_cancel(self) -> None:
        if self.cancelled:
            raise Cancelled()


async def test_rpm_makes_the_request_wait_for_the_window_and_announces_it() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=2)], clock=clock)
    run = Run()
    for _ in range(3):
        lease = await governor.acquire("openai", "m", run=run)
        assert lease is not None
        await lease.settle()
    assert len(run.waits) == 1
    key, limit, seconds = run.waits[0]
    assert (key, limit) == ("openai:*", "rpm") and seconds == pytest.approx(
        60.25
    )  # the window + its guard
    assert sum(clock.sleeps) == pytest.approx(60.25)


async def test_a_request_no_limit_matches_is_not_governed() -> None:
    governor = RateGovernor([RateLimit("openai", "gpt-5", rpm=1)], clock=FakeClock())
    assert await governor.acquire("anthropic", "claude") is None
    assert await governor.acquire("openai", "gpt-5-mini") is None


async def test_tpm_counts_the_estimate_then_the_reported_usage() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", tpm=1000)], clock=clock)
    lease = await governor.acquire("openai", "m", 900)
    assert lease is not None
    await lease.settle(Usage(100, 50))  # reconciled: 150, not 900
    second = await governor.acquire("openai", "m", 800)
    assert second is not None and clock.sleeps == []


async def test_an_estimate_over_the_tpm_is_refused_before_anything_is_counted() -> None:
    governor = RateGovernor([RateLimit("openai", tpm=100)], clock=FakeClock())
    with pytest.raises(ConfigurationError, match="tpm=100"):
        await governor.acquire("openai", "m", lambda: 101)


async def test_the_estimate_is_computed_only_for_a_tpm_line() -> None:
    governor = RateGovernor([RateLimit("openai", rpm=5)], clock=FakeClock())

    def never() -> int:
        raise AssertionError("counted tokens for an rpm-only limit")

    assert await governor.acquire("openai", "m", never) is not None


async def test_a_concurrent_slot_frees_when_its_request_ends() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", concurrent=1)], clock=clock)
    first = await governor.acquire("openai", "m")
    assert first is not None
    second = asyncio.create_task(governor.acquire("openai", "m"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not second.done()
    await first.settle()
    assert await second is not None
    assert sum(clock.sleeps) < 1.0  # woke at the release, not at the lease's expiry


async def test_a_concurrent_lease_expires_if_its_request_never_ends() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", concurrent=1)], clock=clock)
    assert await governor.acquire("openai", "m", lease_seconds=5.0) is not None
    assert await governor.acquire("openai", "m") is not None  # the first one's process died
    assert sum(clock.sleeps) == pytest.approx(5.0, abs=0.1)


async def test_a_429_closes_the_key_for_every_request_until_its_retry_after() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=100)], clock=clock)
    run = Run()
    lease = await governor.acquire("openai", "m")
    assert lease is not None
    await lease.rate_limited(7.0)
    assert await governor.acquire("openai", "other-model", run=run) is not None
    assert [(k, line, round(w, 3)) for k, line, w in run.waits] == [
        ("openai:*", "retry_after", 7.0)
    ]


async def test_waiters_on_one_key_are_served_in_order() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1, window=10)], clock=clock)
    order: list[int] = []

    async def request(n: int) -> None:
        lease = await governor.acquire("openai", "m")
        assert lease is not None
        order.append(n)

    tasks = []
    for n in range(5):
        tasks.append(asyncio.create_task(request(n)))
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert sum(clock.sleeps) == pytest.approx(4 * 10.25, abs=0.01)


async def test_a_model_limit_and_a_provider_limit_both_hold() -> None:
    limits = [RateLimit("openai", rpm=2), RateLimit("openai", "big", rpm=1)]
    governor = RateGovernor(limits, clock=FakeClock())
    run = Run()
    for model in ("big", "big"):
        assert await governor.acquire("openai", model, run=run) is not None
    assert [w[:2] for w in run.waits] == [("openai:big", "rpm")]
    governor = RateGovernor(limits, clock=FakeClock())
    run = Run()
    for model in ("small", "other", "big"):
        assert await governor.acquire("openai", model, run=run) is not None
    assert [w[:2] for w in run.waits] == [("openai:*", "rpm")]


async def test_a_wait_past_the_wall_clock_budget_is_budget_exhausted_at_once() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    assert await governor.acquire("openai", "m") is not None
    with pytest.raises(BudgetExhausted) as caught:
        await governor.acquire("openai", "m", run=Run(wall_clock=(10.0, 30.0)))
    assert caught.value.dimension == "wall_clock"
    assert clock.sleeps == []
    # the refused waiter left the queue: the next one is not stuck behind it
    clock.advance(60.0)
    assert await governor.acquire("openai", "m") is not None


async def test_a_cancelled_run_stops_waiting() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    assert await governor.acquire("openai", "m") is not None
    run = Run()
    run.cancelled = True
    with pytest.raises(Cancelled):
        await governor.acquire("openai", "m", run=run)


async def test_a_backend_that_fails_is_governor_unavailable(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "governor.db"
    governor = RateGovernor([RateLimit("openai", rpm=1)], backend=f"sqlite:///{missing}")
    with pytest.raises(GovernorUnavailable) as caught:
        await governor.acquire("openai", "m")
    error = caught.value
    assert error.backend == f"sqlite:///{missing}" and not error.is_recoverable()
    assert error.recoverability == "wait"
    assert isinstance(error.cause, Exception)
    name = type(error.cause).__name__
    assert str(error) == f"rate governor backend sqlite:///{missing} unavailable: {name}"


async def test_an_unreachable_postgres_never_shows_its_password() -> None:
    pytest.importorskip("psycopg")
    dsn = "postgresql://agent:hunter2@127.0.0.1:1/fleet?connect_timeout=1"
    governor = RateGovernor([RateLimit("openai", rpm=1)], backend=dsn)
    assert "hunter2" not in repr(governor)
    with pytest.raises(GovernorUnavailable) as caught:
        await governor.acquire("openai", "m")
    assert "hunter2" not in str(caught.value) and "hunter2" not in repr(caught.value)
    assert caught.value.backend == "postgresql://agent@127.0.0.1:1/fleet?connect_timeout=1"


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://agent:hunter2@127.0.0.1:notaport/fleet",
        "postgresql://agent@127.0.0.1:1/fleet?password=hunter2&connect_timeout=1",
    ],
)
async def test_no_failure_text_shows_the_password(dsn: str) -> None:
    pytest.importorskip("psycopg")
    import pickle
    import traceback

    governor = RateGovernor([RateLimit("openai", rpm=1)], backend=dsn)
    with pytest.raises(GovernorUnavailable) as caught:
        await governor.acquire("openai", "m")
    shown = "".join(traceback.format_exception(caught.value))
    assert "hunter2" not in shown and "hunter2" not in repr(caught.value.cause)
    assert "hunter2" not in repr(pickle.loads(pickle.dumps(caught.value)).attributes())
