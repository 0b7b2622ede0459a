"""Running one tool (``agentloop.engine.invoke``): what a tool raises and what it is given.

A tool's own ``GeneratorExit`` is a panic like any exception, from a sync tool (raised on a
worker thread) as from an async one; arguments nested past ``MAX_ARGUMENT_DEPTH`` are cut where
they enter (``ToolCallPart``) and answered with a soft invalid-arguments result, however deep.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig, ToolContext, tool
from agentloop.messages import MAX_ARGUMENT_DEPTH, Message, ToolCallPart
from agentloop.model import ModelRequest
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.tokens import HeuristicTokenCounter

pytestmark = pytest.mark.usefixtures("no_real_sleep")

TOO_DEEP = "Invalid arguments for tool 't': arguments: nested more than 64 levels deep"


def result_of(request: ModelRequest) -> tuple[str, bool]:
    part = request.messages[-1].tool_results_parts[0]
    return part.content, part.is_error


def nested(levels: int, leaf: Any = "leaf", *, key: str | None = "d") -> Any:
    """``levels`` containers, one inside the other: dicts under ``key``, or lists."""
    value = leaf
    for _ in range(levels):
        value = {key: value} if key is not None else [value]
    return value


def depth(value: Any) -> int:
    """Containers on the deepest path (iterative)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


# ----------------------------------------------------------------------------- GeneratorExit


@tool
def sync_exit() -> str:
    """Raise GeneratorExit on the worker thread."""
    raise GeneratorExit


@tool
async def async_exit() -> str:
    """Raise GeneratorExit in the coroutine."""
    raise GeneratorExit


@pytest.mark.parametrize("raiser", [sync_exit, async_exit], ids=["sync", "async"])
async def test_a_tool_raising_generator_exit_is_a_soft_panic(raiser: Any) -> None:
    model = ScriptedModel([call(raiser.name), reply("ok")])
    run = await Agent(model, tools=[raiser]).run("go")
    assert run.output == "ok" and run.stop_reason is None
    assert result_of(model.requests[1]) == (f'Tool "{raiser.name}" panicked: GeneratorExit', True)


# ----------------------------------------------------------------------------- deep arguments


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("key", ["d", None], ids=["dicts", "lists"])
async def test_arguments_nested_1000_deep_are_a_soft_invalid_result(
    stream: bool, key: str | None
) -> None:
    ran = []

    @tool
    def t(d: Any) -> str:
        """Take a tree."""
        ran.append(d)
        return "took"

    model = ScriptedModel([call("t", {"d": nested(1000, key=key)}), reply("ok")])
    run = await Agent(model, tools=[t], config=RunConfig(stream=stream)).run("go")
    assert run.output == "ok" and run.stop_reason is None
    assert result_of(model.requests[1]) == (TOO_DEEP, True)
    assert ran == []


async def test_a_run_with_arguments_nested_1000_deep_is_stored(tmp_path: Path) -> None:
    @tool
    def t(d: dict[str, Any]) -> str:
        """Take a tree."""
        return "took"

    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel([call("t", {"d": nested(1000)}), reply("ok")])
    agent = Agent(model, tools=[t], store=store)
    await agent.run("go")
    assert agent.persistence_error is None
    resumed = Agent.resume(agent.session_id, store=store, client=ScriptedModel([]))
    assert resumed.history == agent.history


def test_a_tool_call_keeps_arguments_within_the_limit_as_they_are() -> None:
    arguments = {"d": nested(MAX_ARGUMENT_DEPTH - 1)}
    part = ToolCallPart("c", "t", arguments)
    assert part.arguments is arguments and depth(part.arguments) == MAX_ARGUMENT_DEPTH


@pytest.mark.parametrize("key", ["d", None], ids=["dicts", "lists"])
def test_a_tool_call_cuts_arguments_one_level_past_the_limit(key: str | None) -> None:
    part = ToolCallPart("c", "t", {"d": nested(5000, key=key), "flat": 1})
    assert depth(part.arguments) == MAX_ARGUMENT_DEPTH + 1  # still too deep for the engine
    assert part.arguments["flat"] == 1
    counter = HeuristicTokenCounter()
    assert counter.count_message(Message.assistant(calls=[part])) > 0  # encodes, no recursion


def test_a_tool_call_whose_arguments_contain_themselves_is_left_to_the_encoders() -> None:
    looped: dict[str, Any] = {}
    looped["again"] = looped
    part = ToolCallPart("c", "t", {"d": looped})
    assert part.arguments["d"] is looped  # a cycle is not depth (the store reports it)


async def test_the_engines_context_is_a_tool_context_with_every_slot_set() -> None:

    seen: list[ToolContext[Any]] = []

    @tool
    def probe(ctx: ToolContext[Any]) -> str:
        """Keep the context."""
        seen.append(ctx)
        return "ok"

    agent = Agent(ScriptedModel([call("probe", {}, id="c"), reply("done")]), tools=[probe])
    run = await agent.run("go", deps={"d": 1})
    [made] = seen
    plain = ToolContext(
        run_id=run.id, turn=0, call_id="c", tool_name="probe", cancel=made.cancel,
        session_id=run.session_id, deps={"d": 1}, agent=None,
    )  # fmt: skip
    plain._link = made._link
    slots = {n for k in type(plain).__mro__ for n in getattr(k, "__slots__", ())}
    assert slots and type(made) is ToolContext
    assert {n: getattr(made, n) for n in slots} == {n: getattr(plain, n) for n in slots}


# ----------------------------------------------------------------------------- the deadline
# A tool runs up to its first wait without a timer; what is left of it runs under the deadline.


@pytest.mark.looptime
async def test_a_tool_that_waits_several_times_within_its_deadline_gives_its_value() -> None:
    @tool(timeout=10)
    async def waits() -> str:
        """Wait three times."""
        await asyncio.sleep(0)
        await asyncio.sleep(1)
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(2, future.set_result, "done")
        return str(await future)

    model = ScriptedModel([call("waits"), reply("ok")])
    run = await Agent(model, tools=[waits]).run("go")
    assert run.output == "ok"
    assert result_of(model.requests[1]) == ("done", False)


@pytest.mark.looptime
async def test_the_deadline_counts_every_wait_of_a_tool() -> None:
    @tool(timeout=3)
    async def slow() -> str:
        """Two waits of 2 s: past 3 s in all."""
        await asyncio.sleep(2)
        await asyncio.sleep(2)
        return "late"

    model = ScriptedModel([call("slow"), reply("ok")])
    await Agent(model, tools=[slow]).run("go")
    assert result_of(model.requests[1]) == ("Tool 'slow' timed out after 3s", True)


@pytest.mark.looptime
async def test_a_timeout_a_tool_raises_after_a_wait_is_a_panic() -> None:
    @tool(timeout=10)
    async def raises() -> str:
        """Raise TimeoutError itself, after a wait, well within the deadline."""
        await asyncio.sleep(1)
        raise TimeoutError("socket")

    model = ScriptedModel([call("raises"), reply("ok")])
    await Agent(model, tools=[raises]).run("go")
    assert result_of(model.requests[1]) == ('Tool "raises" panicked: TimeoutError: socket', True)


@pytest.mark.looptime
async def test_a_tool_that_catches_its_deadline_gives_what_it_returns() -> None:
    @tool(timeout=1)
    async def stubborn() -> str:
        """Catch the cancel the deadline sends, and answer."""
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            return "caught"
        return "late"

    model = ScriptedModel([call("stubborn"), reply("ok")])
    await Agent(model, tools=[stubborn]).run("go")
    assert result_of(model.requests[1]) == ("caught", False)


async def test_a_run_cancelled_while_a_tool_waits_reaches_the_tool() -> None:
    from agentloop import CancelToken
    from agentloop.errors import Cancelled

    token, seen = CancelToken(), []

    @tool(timeout=10)
    async def waits() -> str:
        """Wait until cancelled."""
        try:
            token.cancel()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("closed")
        return "never"

    model = ScriptedModel([call("waits"), reply("ok")])
    with pytest.raises(Cancelled):
        await Agent(model, tools=[waits]).run("go", cancel=token)
    assert seen == ["cancelled", "closed"]
