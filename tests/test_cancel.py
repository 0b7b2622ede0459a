"""CancelToken: one-shot, thread-safe, re-armable."""

import asyncio
import functools
import threading

import pytest

from agentloop import CancelToken
from agentloop.errors import Cancelled

pytestmark = pytest.mark.usefixtures("no_real_sleep")


async def test_wait_returns_when_fired_from_another_thread() -> None:
    token = CancelToken()
    waiting = asyncio.ensure_future(token.wait())
    await asyncio.sleep(0)  # the waiter is waiting
    threading.Thread(target=token.cancel).start()
    await asyncio.wait_for(waiting, 1)
    assert token.cancelled and token.is_cancelled()


def test_raise_if_cancelled_and_reset() -> None:
    token = CancelToken()
    token.raise_if_cancelled()
    token.cancel()
    token.cancel()
    with pytest.raises(Cancelled):
        token.raise_if_cancelled()
    token.reset()
    assert not token.cancelled
    assert "cancelled=False" in repr(token)


async def test_watchers_are_called_once_and_can_be_removed() -> None:
    token = CancelToken()
    seen: list[str] = []
    handle = token.watch(lambda: seen.append("a"))
    removed = token.watch(lambda: seen.append("b"))
    token.unwatch(removed)
    token.cancel()
    token.cancel()
    await asyncio.sleep(0)
    assert seen == ["a"]
    token.unwatch(handle)


async def test_a_token_whose_watchers_all_left_still_wakes_the_next_one() -> None:
    token = CancelToken()  # the last unwatch lets the watcher table go (an idle session's bytes)
    seen: list[str] = []
    for name in ("first", "second"):
        token.unwatch(token.watch(lambda: seen.append("gone")))
        handle = token.watch(functools.partial(seen.append, name))
        token.cancel()
        await asyncio.sleep(0)
        token.unwatch(handle)
        token.reset()
    assert seen == ["first", "second"]


async def test_a_slot_watcher_and_a_table_watcher_each_leave_alone() -> None:
    token = CancelToken()  # the first watcher sits in the token's slots, the next in its table
    seen: list[str] = []
    first = token.watch(functools.partial(seen.append, "first"))
    second = token.watch(functools.partial(seen.append, "second"))
    token.unwatch(first)
    third = token.watch(functools.partial(seen.append, "third"))  # the slots are free again
    token.cancel()
    await asyncio.sleep(0)
    assert sorted(seen) == ["second", "third"]
    token.unwatch(second)
    token.unwatch(third)
    token.reset()
    token.cancel()
    await asyncio.sleep(0)
    assert sorted(seen) == ["second", "third"]  # nobody watches any more


async def test_one_token_cancels_two_concurrent_runs_and_then_neither_session() -> None:
    from agentloop import Agent, tool
    from agentloop.testing import ScriptedModel, call, reply

    started = asyncio.Semaphore(0)

    @tool
    async def hang() -> str:
        """Hang."""
        started.release()
        await asyncio.Event().wait()
        return "never"

    agent = Agent(ScriptedModel([call("hang"), call("hang"), reply("a"), reply("b")]), tools=[hang])
    token = CancelToken()  # both runs watch it: one in its slots, one in its table
    first, second = agent.session(), agent.session()
    runs = [asyncio.ensure_future(s.run("go", cancel=token)) for s in (first, second)]
    await started.acquire()
    await started.acquire()
    token.cancel()
    for task in runs:
        with pytest.raises(Cancelled):
            await asyncio.wait_for(task, 2)
    # each session's own signal was never fired: the next runs go on
    assert (await first.run("next")).output == "a"
    assert (await second.run("next")).output == "b"
    assert not first.cancel_token.cancelled and not second.cancel_token.cancelled
