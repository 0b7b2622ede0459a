"""A session's own cancel signal is made when somebody asks for it (``engine.session_cancel``).

A run nobody cancels holds no ``CancelToken`` (and no tuple of them) across its model waits;
``cancel_token``, ``cancel()`` and a tool's ``ctx.cancel`` make the session's, and a run
active then watches it at once: from the loop's thread, from a sync tool's, from another
thread. Every SPEC 5 behaviour stays: a cancel while idle cancels exactly the next run, a
tool's ``ctx.cancel`` fires with the session's cancel and with a caller's token.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import pytest

from agentloop import Agent, CancelToken, ToolContext, tool
from agentloop.errors import Cancelled
from agentloop.model import ModelRequest, ModelResponse
from agentloop.testing import FunctionModel, ScriptedModel, call, reply
from agentloop.testing.doubles import ScriptedCall

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def _tokens_alive() -> int:
    return sum(type(o) is CancelToken for o in gc.get_objects())


async def _cancelled_at_once(work: asyncio.Future[Any]) -> None:
    """``work`` ends ``Cancelled`` within a few loop steps: the cancel interrupted its wait."""
    for _ in range(100):
        if work.done():
            break
        await asyncio.sleep(0)
    assert work.done(), "the cancel did not interrupt the run's wait"
    with pytest.raises(Cancelled):
        await work


async def _waiting_on_the_model() -> tuple[Any, asyncio.Future[Any]]:
    """A session's run, started and waiting on a model call that never answers."""
    started, never = asyncio.Event(), asyncio.Event()

    async def hang(request: ModelRequest) -> ModelResponse:
        started.set()
        await never.wait()
        return reply("never")

    session = Agent(FunctionModel(hang)).session()
    work = asyncio.ensure_future(session.run("go"))
    await started.wait()
    return session, work


async def test_a_run_nobody_cancels_makes_no_token() -> None:
    seen: list[tuple[Any, ...]] = []

    @tool
    async def lookup(ctx: ToolContext[Any], key: str) -> str:
        """Look a key up (the context taken, its cancel never read)."""
        return f"{ctx.call_id}: {key}"

    def model(request: ModelRequest) -> ScriptedCall | ModelResponse:
        state = session._active
        assert state is not None
        seen.append((state.tokens, session._cancel, _tokens_alive()))
        return call("lookup", {"key": "k"}) if len(seen) == 1 else reply("done")

    agent = Agent(FunctionModel(model), tools=[lookup])
    session = agent.session()
    alive = _tokens_alive()
    run = await session.run("go")
    assert run.output == "done" and run.stop_reason is None
    assert seen == [((), None, alive), ((), None, alive)]  # across each model wait: nothing
    assert session._cancel is None  # the run's end made none either


async def test_a_cancel_while_idle_cancels_exactly_the_next_run() -> None:
    session = Agent(ScriptedModel([reply("second")])).session()
    session.cancel()  # no run yet: the signal is made, fired, and waits for the next run
    with pytest.raises(Cancelled):
        await session.run("first")
    assert not session.cancel_token.cancelled  # re-armed at the run's end
    assert (await session.run("second")).output == "second"


async def test_a_cancel_during_a_model_wait_interrupts_it_at_once() -> None:
    session, work = await _waiting_on_the_model()
    assert session._cancel is None and session._active is not None
    session.cancel()  # made now: the running run watches it at once
    await _cancelled_at_once(work)
    token = session.cancel_token
    assert token._callback is None and token._watchers == {} and not token.cancelled


async def test_a_cancel_from_another_thread_interrupts_the_run() -> None:
    session, work = await _waiting_on_the_model()
    thread = threading.Thread(target=session.cancel)  # made and fired there, watched here
    thread.start()
    thread.join()  # (the loop blocked meanwhile: the signal fires before the run watches it)
    await _cancelled_at_once(work)
    assert session.cancel_token._callback is None


async def test_a_tools_token_is_the_sessions_and_fires_with_its_cancel() -> None:
    started, tokens = asyncio.Event(), []

    @tool
    async def wait(ctx: ToolContext[Any]) -> str:
        """Wait until cancelled."""
        tokens.append(ctx.cancel)
        started.set()
        await ctx.cancel.wait()
        return "stopped"

    session = Agent(ScriptedModel([call("wait", {}), reply("done")]), tools=[wait]).session()
    work = asyncio.ensure_future(session.run("go"))
    await started.wait()
    [token] = tokens
    assert token is session.cancel_token and session._active is not None
    assert session._active.tokens == (token,)
    session.cancel()
    await _cancelled_at_once(work)
    assert token._callback is None and not token.cancelled  # no watch left, re-armed


async def test_a_sync_tool_that_fires_its_token_interrupts_its_run() -> None:
    """Made on the tool's worker thread and fired there before the loop watches it."""
    fired, released = threading.Event(), threading.Event()

    @tool
    def stop(ctx: ToolContext[Any]) -> str:
        """Cancel the run, then block until released."""
        ctx.cancel.cancel()
        fired.set()
        released.wait(5)
        return "late"

    session = Agent(ScriptedModel([call("stop", {}), reply("done")]), tools=[stop]).session()
    work = asyncio.ensure_future(session.run("go"))
    try:
        await asyncio.to_thread(fired.wait, 5)  # the tool started on its worker thread, fired
        await _cancelled_at_once(work)  # the tool still blocked: the fire interrupted the run
    finally:
        released.set()
    assert session.cancel_token._callback is None and not session.cancel_token.cancelled


async def test_a_token_a_sync_tool_made_is_watched_by_the_rest_of_the_run() -> None:
    started, never = asyncio.Event(), asyncio.Event()
    made: list[CancelToken] = []

    @tool
    def peek(ctx: ToolContext[Any]) -> str:
        """Read the run's cancel signal on the worker thread."""
        made.append(ctx.cancel)
        return "ok"

    async def model(request: ModelRequest) -> ScriptedCall | ModelResponse:
        if not made:
            return call("peek", {})
        started.set()
        await never.wait()
        return reply("never")

    session = Agent(FunctionModel(model), tools=[peek]).session()
    work = asyncio.ensure_future(session.run("go"))
    await started.wait()
    [token] = made
    assert token is session.cancel_token and token._callback is not None  # the run watches it
    session.cancel()
    await _cancelled_at_once(work)


async def test_a_callers_token_and_the_sessions_made_during_the_run(
    waiting_agent: tuple[Agent[Any], asyncio.Event, list[CancelToken]],
) -> None:
    agent, started, tokens = waiting_agent
    session = agent.session()
    caller = CancelToken()
    work = asyncio.ensure_future(session.run("go", cancel=caller))
    await started.wait()
    [seen] = tokens
    assert session._cancel is None and seen is not caller  # the run's own, beside the caller's
    session.cancel()  # the session's, made now, joins the run first: the tools' own stays last
    await _cancelled_at_once(work)
    assert seen.cancelled and not caller.cancelled
    assert caller._callback is None and caller._watchers == {}
    assert session.cancel_token._callback is None


async def test_the_sessions_token_made_before_a_run_with_a_callers_token(
    waiting_agent: tuple[Agent[Any], asyncio.Event, list[CancelToken]],
) -> None:
    agent, started, tokens = waiting_agent
    session = agent.session()
    mine, caller = session.cancel_token, CancelToken()
    work = asyncio.ensure_future(session.run("go", cancel=caller))
    await started.wait()
    [seen] = tokens
    assert session._active is not None and session._active.tokens[0] is mine
    assert seen is session._active.tokens[-1] and seen not in (mine, caller)
    caller.cancel()
    await _cancelled_at_once(work)
    assert seen.cancelled and not mine.cancelled


async def test_a_cancel_before_a_stream_drives_still_cancels_it() -> None:
    agent = Agent(ScriptedModel([reply("hi")]))
    with pytest.raises(Cancelled):
        async with agent.stream("go") as events:
            agent.cancel()  # begun, not driving yet: the drive's watch takes the new signal
            async for _ in events:
                pass
    assert isinstance(events.run.stop_reason, Cancelled)


def test_two_threads_asking_at_once_get_one_signal() -> None:
    session = Agent(ScriptedModel([])).session()
    got: list[CancelToken] = []
    ready = threading.Barrier(8)

    def ask() -> None:
        ready.wait()
        got.append(session.cancel_token)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8 and all(token is got[0] for token in got)


def test_a_tool_context_built_by_hand_keeps_its_token() -> None:
    token = CancelToken()
    ctx: ToolContext[None] = ToolContext(
        run_id="r", turn=0, call_id="c", tool_name="t", cancel=token, session_id="s"
    )
    assert ctx.cancel is token
    other = CancelToken()
    ctx.cancel = other
    assert ctx.cancel is other
