"""Shared fixtures, and the guard that keeps engine and safety tests off real time.

``no_real_sleep`` fails a test that sleeps for real: any ``time.sleep``, and any
``asyncio.sleep`` with a positive delay unless the test runs on looptime's fake loop time
(``@pytest.mark.looptime``). The sleep raises ``RealSleep`` where it happens, and the test fails
at teardown even when the code under test swallowed that error (a tool panic is a soft result).
The engine's own time goes through ``agentloop.testing.FakeClock`` (``Agent(clock=...)``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentloop import Agent, CancelToken, ToolContext, tool
from agentloop.testing import RecordingObserver, ScriptedModel, call, reply

pytest_plugins = ["pytester"]


class RealSleep(AssertionError):
    """A guarded test slept for real (the fixture fails the test even if this is swallowed)."""


def pytest_sessionstart(session: pytest.Session) -> None:
    """No current event loop from the start, as after any async test.

    looptime's plugin asks the loop policy for the current loop before every test; before the
    first async test has run, that call would create a loop nobody closes (a ResourceWarning,
    an error under ``filterwarnings = error``).
    """
    asyncio.set_event_loop(None)


@pytest.fixture
def waiting_agent() -> tuple[Agent[Any], asyncio.Event, list[CancelToken]]:
    """An agent whose tool ``wait`` notes its ``ctx.cancel``, sets the event, waits for ever.

    Its model asks for ``wait`` once, then answers "done"; the list receives each ``ctx.cancel``.
    """
    started, tokens = asyncio.Event(), []

    @tool
    async def wait(ctx: ToolContext[Any]) -> str:
        """Wait until cancelled."""
        tokens.append(ctx.cancel)
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    agent = Agent(ScriptedModel([call("wait", {}), reply("done")]), tools=[wait])
    return agent, started, tokens


@pytest.fixture
def recorder() -> RecordingObserver:
    return RecordingObserver()


def _on_fake_loop_time() -> bool:
    """Whether the running event loop is one of looptime's, with fake time switched on."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return bool(getattr(loop, "looptime_on", False))


@pytest.fixture
def no_real_sleep() -> Iterator[list[str]]:
    """Make real sleeps fail the test; yields the list of sleeps caught (normally empty)."""
    caught: list[str] = []
    real_asyncio_sleep = asyncio.sleep

    def refuse(what: str) -> RealSleep:
        caught.append(what)
        return RealSleep(f"{what} waits for real time: use FakeClock, looptime or an Event")

    async def asyncio_sleep(delay: float, result: Any = None) -> Any:
        if delay > 0 and not _on_fake_loop_time():
            raise refuse(f"asyncio.sleep({delay!r})")
        return await real_asyncio_sleep(delay, result)

    def time_sleep(seconds: float) -> None:
        raise refuse(f"time.sleep({seconds!r})")

    with pytest.MonkeyPatch.context() as patch:  # its own: the test's monkeypatch is untouched
        patch.setattr(asyncio, "sleep", asyncio_sleep)
        patch.setattr(time, "sleep", time_sleep)
        yield caught
    if caught:
        pytest.fail(f"the test slept for real: {', '.join(caught)}", pytrace=False)
