"""A stream's caller cancels (``stream(cancel=token)``): the tool running sees it on ``ctx.cancel``.

A UI app fires its request's token when the client goes away; a tool that watches its own
``ctx.cancel`` (a thread polling it, a subprocess it passes it to) must see that cancel, not a
token only the stream's own early exit fires.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentloop import Agent, CancelToken
from agentloop.errors import Cancelled
from agentloop.testing import ScriptedModel, reply


async def test_the_callers_cancel_reaches_the_tools_token(
    waiting_agent: tuple[Agent[Any], asyncio.Event, list[CancelToken]],
) -> None:
    agent, started, tokens = waiting_agent
    token = CancelToken()
    with pytest.raises(Cancelled):
        async with agent.stream("go", cancel=token) as events:
            async for event in events:
                if type(event).__name__ == "ToolCallStarted":
                    await started.wait()
                    token.cancel()
    assert isinstance(events.run.stop_reason, Cancelled)
    [seen] = tokens
    assert seen.cancelled


async def test_a_stream_that_ends_leaves_no_watch_on_the_callers_token() -> None:
    agent = Agent(ScriptedModel([reply("hi")]))
    token = CancelToken()
    async with agent.stream("go", cancel=token) as events:
        async for _ in events:
            pass
    assert token._watchers == {}


async def test_a_runs_tools_see_the_agents_cancel_when_the_caller_gave_a_token(
    waiting_agent: tuple[Agent[Any], asyncio.Event, list[CancelToken]],
) -> None:
    """``run(cancel=token)``, then ``agent.cancel()``: ``ctx.cancel`` fires, not the caller's."""
    agent, started, tokens = waiting_agent
    token = CancelToken()
    running = asyncio.ensure_future(agent.run("go", cancel=token))
    await started.wait()
    agent.cancel()
    with pytest.raises(Cancelled):
        await running
    [seen] = tokens
    assert seen.cancelled and seen is not token
    assert not token.cancelled  # the caller's token may be shared: the run never fires it
    assert token._callback is None and token._watchers == {}  # no watch left behind
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
