"""``engine.deadlines.Deadline``: ``asyncio.timeout``'s rules, on one timer per event loop."""

from __future__ import annotations

import asyncio

import pytest

from agentloop.engine.deadlines import Deadline, _watch


async def _sleep_within(seconds: float, sleep: float) -> tuple[str, float]:
    """What a call sleeping ``sleep`` under a ``seconds`` deadline ends in, and when."""
    loop = asyncio.get_running_loop()
    deadline = Deadline(seconds)
    try:
        await asyncio.sleep(sleep)
    except asyncio.CancelledError as exc:
        if deadline.finish(exc):
            return "timed out", loop.time()
        raise
    deadline.finish(None)
    return "done", loop.time()


@pytest.mark.looptime
async def test_a_deadline_cancels_its_call_at_its_time_and_only_then() -> None:
    start = asyncio.get_running_loop().time()
    assert await _sleep_within(2, 1) == ("done", start + 1)
    assert await _sleep_within(1, 5) == ("timed out", start + 2)


@pytest.mark.looptime
async def test_concurrent_deadlines_each_expire_at_their_own_time() -> None:
    start = asyncio.get_running_loop().time()
    later = asyncio.create_task(_sleep_within(3, 10))
    await asyncio.sleep(0)
    earlier = asyncio.create_task(_sleep_within(1, 10))  # comes before the timer armed: moves it
    done = asyncio.create_task(_sleep_within(5, 2))
    assert await earlier == ("timed out", start + 1)
    assert await done == ("done", start + 2)
    assert await later == ("timed out", start + 3)
    assert not _watch(asyncio.get_running_loop()).pending


@pytest.mark.looptime
async def test_a_cancel_from_elsewhere_is_never_turned_into_a_timeout() -> None:
    async def cancelled_at_the_deadline() -> None:
        deadline = Deadline(1)
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError as exc:
            assert not deadline.finish(exc)  # the other cancel is still pending: not ours
            raise

    task = asyncio.create_task(cancelled_at_the_deadline())
    await asyncio.sleep(0)
    asyncio.get_running_loop().call_at(task.get_loop().time() + 1, task.cancel)
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.looptime
async def test_an_expired_deadline_uncancels_its_task_once() -> None:
    task = asyncio.current_task()
    assert task is not None
    deadline = Deadline(1)
    try:
        await asyncio.sleep(5)
    except asyncio.CancelledError as exc:
        assert task.cancelling() == 1
        assert deadline.finish(exc)
    assert task.cancelling() == 0
    assert deadline.expired


async def test_a_deadline_outside_a_task_is_refused_as_asyncio_timeout_refuses_it() -> None:
    loop = asyncio.get_running_loop()
    made: list[BaseException] = []

    done = asyncio.Event()

    def outside() -> None:
        try:
            Deadline(1)
        except RuntimeError as exc:
            made.append(exc)
        done.set()

    loop.call_soon(outside)
    await done.wait()
    assert [str(e) for e in made] == ["Timeout should be used inside a task"]


def test_each_event_loop_watches_its_own_deadlines() -> None:
    async def one() -> object:
        assert (await _sleep_within(5, 0))[0] == "done"
        return _watch(asyncio.get_running_loop())

    first, second = asyncio.run(one()), asyncio.run(one())
    assert first is not second
