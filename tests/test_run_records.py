"""A run holds few records across its model calls, and each behaves as the ones it replaced.

At 1,000 runs in flight each object a run holds across its HTTP wait costs the collector about
a microsecond a run (issue 39). The context guard is the run's transcript checker and keeps its
meter's numbers itself (one record, not three): a property here holds it to a ``ContextMeter``
and a ``TranscriptChecker`` fed the same messages. The client-event bridge is made only when
the run's client may report through ``request.events`` or somebody listens.
"""

from __future__ import annotations

import ast
import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import Agent, Observer, RunConfig, tool
from agentloop.engine.context_guard import ContextGuard
from agentloop.engine.state import NO_CALL_IDS
from agentloop.errors import Cancelled, TranscriptError
from agentloop.messages import Message, TextPart, ToolCallPart, ToolResultPart
from agentloop.model import ModelRequest, ModelResponse
from agentloop.observers import EventBus
from agentloop.providers.openai import OpenAIClient
from agentloop.providers.retrying import RetryingClient
from agentloop.testing import (
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
    FunctionModel,
    call,
    reply,
)
from agentloop.tokens import ContextMeter, HeuristicTokenCounter, RatioTokenCounter
from agentloop.transcript import TranscriptChecker

PROVIDERS = Path(__file__).parent.parent / "src" / "agentloop" / "providers"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


# -- the context guard: one record, the meter's numbers and the checker's verdicts ---------------

_text = st.text(max_size=40)
_ids = st.sampled_from(["a", "b", "c"])
_parts = st.one_of(
    st.builds(TextPart, _text),
    st.builds(ToolCallPart, _ids, st.just("lookup"), st.fixed_dictionaries({"key": _text})),
    st.builds(ToolResultPart, _ids, st.just("lookup"), _text),
)
_messages = st.builds(
    Message,
    st.sampled_from(["user", "assistant", "tool", "system"]),
    st.lists(_parts, max_size=3).map(tuple),
)


def _verdict(step: Any) -> tuple[str, int | None] | None:
    """What ``step()`` raised: a transcript error's message and index, or None."""
    try:
        step()
    except TranscriptError as error:
        return str(error), error.index
    return None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_messages, max_size=6),
    st.lists(_messages, max_size=6),
    st.sampled_from([HeuristicTokenCounter(), RatioTokenCounter(3.6, 5)]),
    st.sampled_from([None, "Be brief."]),
)
def test_the_guard_measures_and_checks_as_a_meter_and_a_checker(
    start: list[Message], later: list[Message], counter: Any, system: str | None
) -> None:
    config = RunConfig(token_counter=counter)
    guard = ContextGuard(config, system=system, observers=EventBus((), "s"), hooks=())
    meter, checker = ContextMeter(counter), TranscriptChecker(unique_ids=False)
    specs = lookup_specs()
    got = _verdict(lambda: guard.start(start, specs))
    meter.reset(start, system, specs)
    assert got == _verdict(lambda: checker.reset(start))
    for message in later if got is None else ():
        meter.add(message)
        assert _verdict(lambda m=message: guard.added(m)) == _verdict(
            lambda m=message: checker.append(m)
        )
        assert (guard.total, guard.overhead) == (meter.total, meter.overhead)
        assert (guard._count, guard._checkpoint()) == (len(checker), checker.state())
        assert _verdict(guard._check_sendable) == _verdict(checker.check_sendable)


def lookup_specs() -> tuple[Any, ...]:
    agent = Agent(FunctionModel(lambda r: reply("x")), tools=[lookup])
    return agent._offer(agent.client).specs


async def test_the_guard_is_the_runs_only_context_record() -> None:
    agent = Agent(FunctionModel(lambda r: reply("done")))
    session = agent.session()
    state = session._begin("go", None, (), None)
    assert state.guard is state and isinstance(state, ContextGuard)  # the state is its guard
    assert not hasattr(type(state), "__len__")  # a state with no messages is not falsy
    slots = {name for kind in type(state).__mro__ for name in getattr(kind, "__slots__", ())}
    held = [getattr(state, name, None) for name in slots]
    assert not any(isinstance(v, ContextMeter | TranscriptChecker | ContextGuard) for v in held)
    session._active = None


# -- the client-event bridge: only for a client that may report, or a listener ----------------


class Recording(OpenAIClient):
    """agentloop's OpenAI adapter, keeping each request's ``events``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[object] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.seen.append(request.events)
        return await super().complete(request)


def _script() -> list[FakeReply]:
    return [FakeReply(tool_calls=[FakeToolCall("lookup", {"key": "k"})]), FakeReply("done")]


async def test_a_plain_http_adapter_run_makes_no_bridge() -> None:
    async with FakeProviderServer(_script()) as server:
        async with Recording("fake-model", api_key="k", base_url=server.base_url) as client:
            run = await Agent(client, tools=[lookup]).session().run("go")
    assert run.output == "done" and client.seen == [None, None]


async def test_a_listener_gets_the_bridge() -> None:
    class Quiet(Observer):
        def on_event(self, event: object) -> None:
            pass

    async with FakeProviderServer(_script()) as server:
        async with Recording("fake-model", api_key="k", base_url=server.base_url) as client:
            agent = Agent(client, tools=[lookup], observers=[Quiet()])
            await agent.session().run("go")
    first, second = client.seen
    assert first is not None and first is second  # one bridge a run, made at its first request
    assert hasattr(first, "on_retry") and hasattr(first, "wall_clock")


async def test_a_wrapping_client_gets_the_bridge() -> None:
    seen: list[object] = []

    def model(request: ModelRequest) -> object:
        seen.append(request.events)
        return reply("done")

    await Agent(FunctionModel(model)).session().run("go")
    async with FakeProviderServer(_script()) as server:
        inner = Recording("fake-model", api_key="k", base_url=server.base_url)
        async with RetryingClient(inner, max_retries=1) as client:
            await Agent(client, tools=[lookup]).session().run("go")
    assert seen[0] is not None  # a client of your own may read it
    assert all(e is not None for e in inner.seen)  # the retrying wrapper passes it on


def _reads_events(path: Path) -> bool:
    """Whether a module reads an ``events`` attribute (``request.events``) anywhere."""
    tree = ast.parse(path.read_text())
    return any(isinstance(n, ast.Attribute) and n.attr == "events" for n in ast.walk(tree))


@pytest.mark.parametrize(
    "module",
    sorted(
        str(p.relative_to(PROVIDERS))
        for p in PROVIDERS.rglob("*.py")
        if p.name not in {"retrying.py", "fallback.py"}
    ),
)
def test_the_http_adapters_never_read_request_events(module: str) -> None:
    """``engine.turn.reports`` gives an HTTP adapter no bridge: none of them may read one."""
    assert not _reads_events(PROVIDERS / module)


# -- the run's audit: the transcript's tail until the two part --------------------------------


async def test_the_audit_is_the_transcripts_tail_until_a_compaction_parts_them() -> None:
    session = Agent(FunctionModel(lambda r: reply("done"))).session()
    state = session._begin("go", None, (), None)
    state.guard.start(state.transcript, state.offer.specs)
    answer = Message.assistant("done")
    state.append(answer)
    assert state.kept is None  # a plain run holds no second list
    assert state.audit == state.transcript[state.base :] == [state.transcript[0], answer]
    assert state.audit is state.kept  # made once, at its first read, and kept
    more = Message.user("more")
    state.append(more)
    assert state.audit[-1] is more and state.transcript[-1] is more
    state.replace([Message.user("summary")])
    assert [m.text for m in state.audit] == ["go", "done", "more"]  # the run's, not the summary
    session._active = None


async def test_a_compaction_before_any_read_keeps_the_runs_messages() -> None:
    session = Agent(FunctionModel(lambda r: reply("done"))).session()
    state = session._begin("go", None, (), None)
    state.replace([Message.user("summary")])
    assert [m.text for m in state.audit] == ["go"] and state.transcript[0].text == "summary"
    session._active = None


async def test_a_runs_call_ids_are_its_own_from_its_first_call() -> None:
    replies = iter([call("lookup", {"key": "k"}), call("lookup", {"key": "k"}), reply("done")])
    agent = Agent(FunctionModel(lambda r: next(replies)), tools=[lookup])
    session = agent.session()
    run = await session.run("go")
    first, second = (t.tool_calls[0].id for t in run.turns[:2])
    assert first != second  # a reused id is re-stamped: the run's set saw the first
    known = session._measured
    assert known is not None and set(known.call_ids) == {first, second}
    await Agent(FunctionModel(lambda r: reply("done"))).session().run("go")
    assert NO_CALL_IDS == frozenset()  # never added to


# -- the turns loop in ``drive``: a cancel that is not the run's own goes on, and leaves no cycle


async def test_a_callers_cancel_goes_on_and_leaves_no_cycle() -> None:
    waiting = asyncio.Event()

    async def slow(request: object) -> object:
        waiting.set()
        await asyncio.Event().wait()
        return reply("never")

    session = Agent(FunctionModel(slow)).session()
    gc.collect()
    gc.disable()
    try:
        task = asyncio.create_task(session.run("go"))
        await waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        del task
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert isinstance(session.runs[-1].stop_reason, Cancelled)
    assert "RunState" not in found and "RunLoop" not in found


# -- the run's loop is its state: one record where there were two, and no cycle left behind ----


async def _left_behind(run: Any) -> list[str]:
    """Run ``run()`` (a coroutine function) with the collector off; what only it would free."""
    gc.collect()
    gc.disable()
    try:
        await run()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


async def test_the_runs_loop_is_its_state() -> None:
    from agentloop.engine.loop import RunLoop
    from agentloop.engine.state import RunState

    seen: list[Any] = []

    async def model(request: object) -> object:
        seen.append(session._active)
        return reply("done")

    session = Agent(FunctionModel(model)).session()
    run = await session.run("go")
    state = seen[0]
    assert type(state) is RunLoop and isinstance(state, RunState)
    assert state.state is state and state.run is run and state.session is session
    continued = session.stream("again")
    async with continued as events:
        async for _ in events:
            pass
    assert type(seen[1]) is RunLoop and seen[1].run is continued.run
    seen.clear()  # (the model holds the list: no cycle of this test's own left behind)


@pytest.mark.parametrize("kind", ["guarded", "streamed", "paused"])
async def test_a_finished_run_of_any_path_leaves_no_cycle(kind: str) -> None:
    from agentloop import Approve
    from agentloop.guardrails import InputGuardrail, OutputGuardrail

    def fine(ctx: Any, value: Any) -> None:
        return None

    @tool(requires_approval=True)
    def drop(key: str) -> str:
        """Drop a key."""
        return f"dropped {key}"

    guarded = [InputGuardrail(fine), OutputGuardrail(fine, name="fine_out")]
    guardrails = guarded if kind == "guarded" else []
    tools = [drop] if kind == "paused" else [lookup]
    name = tools[0].name
    model = FunctionModel(
        lambda r: call(name, {"key": "k"}) if len(r.messages) == 1 else reply("done")
    )
    session = Agent(model, tools=tools, guardrails=guardrails).session()

    async def work() -> None:
        if kind == "streamed":
            async with session.stream("go") as events:
                async for _ in events:
                    pass
        elif kind == "paused":
            paused = await session.run("go")
            assert paused.pending
            decided = {paused.pending[0].id: Approve()}
            assert (await session.continue_run(decisions=decided)).output == "done"
        else:
            assert (await session.run("go")).output == "done"

    found = await _left_behind(work)
    assert "RunLoop" not in found and "RunGuard" not in found, found
