"""The fake time engine and safety tests run on: ``FakeClock``, looptime and the sleep guard."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import pytest

from agentloop.clock import SYSTEM_CLOCK, Clock
from agentloop.testing import FakeClock


def test_a_fake_clock_starts_where_told_and_moves_only_when_advanced() -> None:
    clock = FakeClock()
    assert isinstance(clock, Clock)
    assert (clock.time(), clock.monotonic()) == (1_700_000_000.0, 1_000.0)
    assert (clock.time(), clock.monotonic()) == (1_700_000_000.0, 1_000.0)
    clock.advance(2.5)
    assert (clock.time(), clock.monotonic()) == (1_700_000_002.5, 1_002.5)
    other = FakeClock(time=5.0, monotonic=0.0)
    other.advance(0)
    assert (other.time(), other.monotonic()) == (5.0, 0.0)


@pytest.mark.parametrize("seconds", [-1.0, math.nan, math.inf])
def test_a_fake_clock_never_goes_back_or_nowhere(seconds: float) -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="moves forward"):
        clock.advance(seconds)
    assert clock.monotonic() == 1_000.0


async def test_a_fake_sleep_advances_records_and_yields_once() -> None:
    clock = FakeClock()
    order: list[str] = []

    async def other() -> None:
        order.append("other ran")

    task = asyncio.ensure_future(other())
    await clock.sleep(30)
    order.append("slept")
    await task
    assert order == ["other ran", "slept"]
    await clock.sleep(0)
    await clock.sleep(-1)
    assert clock.sleeps == [30, 0, -1]
    assert clock.monotonic() == 1_030.0


async def test_a_fake_sleep_can_be_cancelled() -> None:
    clock = FakeClock()
    task = asyncio.ensure_future(clock.sleep(5))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_fake_ids_count_in_32_hex_digits() -> None:
    clock = FakeClock()
    assert [clock.new_id() for _ in range(2)] == [f"{1:032x}", f"{2:032x}"]
    assert FakeClock().new_id() == "00000000000000000000000000000001"
    real = SYSTEM_CLOCK.new_id()
    assert len(real) == 32 and int(real, 16) >= 0 and real != SYSTEM_CLOCK.new_id()


# ---------------------------------------------------------------- the sleep guard


def test_the_guard_refuses_a_real_time_sleep(no_real_sleep: list[str]) -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"time.sleep\(0.5\) waits for real time"):
        time.sleep(0.5)
    assert time.monotonic() - started < 0.5
    assert no_real_sleep == ["time.sleep(0.5)"]
    no_real_sleep.clear()  # caught on purpose: this test must not fail at teardown


async def test_the_guard_refuses_a_real_asyncio_sleep(no_real_sleep: list[str]) -> None:
    await asyncio.sleep(0)
    with pytest.raises(AssertionError, match=r"asyncio.sleep\(0.5\) waits for real time"):
        await asyncio.sleep(0.5)
    assert no_real_sleep == ["asyncio.sleep(0.5)"]
    no_real_sleep.clear()


@pytest.mark.looptime
async def test_the_guard_lets_a_sleep_on_fake_loop_time_through(no_real_sleep: list[str]) -> None:
    loop = asyncio.get_running_loop()
    started, real = loop.time(), time.monotonic()
    await asyncio.sleep(100)
    async with asyncio.timeout(5):
        await asyncio.sleep(1)
    assert loop.time() - started == pytest.approx(101)
    assert time.monotonic() - real < 1
    assert no_real_sleep == []


GUARDED = """
import asyncio
import contextlib
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def test_swallowed_time_sleep():
    with contextlib.suppress(BaseException):
        time.sleep(0.001)


async def test_swallowed_asyncio_sleep():
    with contextlib.suppress(BaseException):
        await asyncio.sleep(0.001)


async def test_a_bare_yield_is_no_sleep():
    await asyncio.sleep(0)


@pytest.mark.looptime
async def test_fake_loop_time():
    await asyncio.sleep(60)
"""


def test_a_swallowed_real_sleep_still_fails_its_test(pytester: pytest.Pytester) -> None:
    """The guard cannot silently pass: a real sleep fails its test even if the error is eaten."""
    pytester.makeconftest((Path(__file__).parent.parent / "conftest.py").read_text())
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = error\n"
    )
    pytester.makepyfile(test_guarded=GUARDED)
    result = pytester.runpytest_inprocess("-p", "no:hypothesispytest")
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_swallowed_time_sleep*",
            "*the test slept for real: time.sleep(0.001)*",
            "*ERROR at teardown of test_swallowed_asyncio_sleep*",
            "*the test slept for real: asyncio.sleep(0.001)*",
        ]
    )
