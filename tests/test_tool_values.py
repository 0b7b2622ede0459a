"""A tool can never end a run, by any value it returns or raises (issue 9, engine side)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import Agent, RunConfig, Tool, ToolContext, tool
from agentloop.model import ModelRequest
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.transcript import validate_transcript


def result_of(request: ModelRequest) -> tuple[str, bool]:
    part = request.messages[-1].tool_results_parts[0]
    return part.content, part.is_error


async def test_a_huge_result_is_cut_to_the_window_with_a_marker_saying_how_much() -> None:
    @tool
    def dump() -> str:
        """Dump everything."""
        return "x" * 20_000_000

    model = ScriptedModel([call("dump"), reply("ok")])
    run = await Agent(model, tools=[dump], config=RunConfig(context_window=8_000)).run("go")
    assert run.output == "ok"
    content, is_error = result_of(model.requests[1])
    assert len(content) == 8_000 and not is_error
    assert content.endswith(
        "\n[cut: 19,992,000 of 20,000,000 characters not shown; the result is larger than the "
        "context window allows]"
    )


async def test_the_default_window_cuts_a_20mb_result_and_the_run_completes() -> None:
    @tool
    def dump() -> str:
        """Dump everything."""
        return "y" * 20_000_000

    model = ScriptedModel([call("dump"), reply("ok")])
    run = await Agent(model, tools=[dump]).run("go")
    assert run.output == "ok" and len(result_of(model.requests[1])[0]) == 200_000


async def test_surrogates_are_escaped_and_the_run_is_stored(tmp_path: Path) -> None:
    @tool
    def listdir() -> list[str]:
        """List a directory with a non-UTF-8 name."""
        return [b"caf\xe9.txt".decode("utf-8", "surrogateescape")]

    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel([call("listdir"), reply("ok")])
    agent = Agent(model, tools=[listdir], store=store)
    run = await agent.run("go")
    assert run.stop_reason is None and agent.persistence_error is None
    assert result_of(model.requests[1])[0] == '["caf\\udce9.txt"]'
    resumed = Agent.resume(agent.session_id, store=store, client=ScriptedModel([]))
    assert resumed.history == agent.history


class Weird(BaseException):
    pass


@pytest.mark.parametrize("raised", [GeneratorExit(), Weird("odd"), StopAsyncIteration()])
async def test_any_base_exception_but_interrupts_is_a_panic(raised: BaseException) -> None:
    @tool
    async def odd() -> str:
        """Raises oddly."""
        raise raised

    model = ScriptedModel([call("odd"), reply("ok")])
    run = await Agent(model, tools=[odd]).run("go")
    assert run.output == "ok"
    content, is_error = result_of(model.requests[1])
    assert is_error and content.startswith(f'Tool "odd" panicked: {type(raised).__name__}')


async def test_arguments_nested_too_deep_are_a_soft_invalid_result() -> None:
    deep: Any = "leaf"
    for _ in range(200):
        deep = {"d": deep}

    @tool
    def take(d: dict[str, Any]) -> str:
        """Take a tree."""
        return "took"

    model = ScriptedModel([call("take", {"d": deep}), call("take", {"d": {"a": [1]}}), reply("ok")])
    await Agent(model, tools=[take]).run("go")
    assert result_of(model.requests[1]) == (
        "Invalid arguments for tool 'take': arguments: nested more than 64 levels deep",
        True,
    )
    assert result_of(model.requests[2]) == ("took", False)


async def test_a_tool_cannot_rewrite_the_recorded_call() -> None:
    class Mutator(Tool):
        name = "mutate"
        description = "Mutates what it receives."
        parameters: Mapping[str, Any] = {
            "type": "object",
            "properties": {"items": {"type": "array"}},
        }

        async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
            arguments["items"].append("evil")
            arguments.clear()  # type: ignore[attr-defined]
            return "done"

    model = ScriptedModel([call("mutate", {"items": ["a"]}), reply("ok")])
    agent = Agent(model, tools=[Mutator()])
    run = await agent.run("go")
    assert run.turns[0].tool_calls[0].arguments == {"items": ["a"]}
    sent = model.requests[1].messages[-2].tool_calls[0].arguments
    assert sent == {"items": ["a"]}


def test_run_sync_does_not_wait_for_an_abandoned_sync_tool() -> None:
    release = threading.Event()

    @tool(timeout=0.2)
    def stuck() -> str:
        """Never returns on its own."""
        release.wait(30)
        return "late"

    model = ScriptedModel([call("stuck"), reply("ok")])
    agent = Agent(model, tools=[stuck])
    started = time.perf_counter()
    run = agent.run_sync("go")
    agent.close()
    elapsed = time.perf_counter() - started
    release.set()
    assert run.output == "ok" and elapsed < 5
    assert result_of(model.requests[1]) == ("Tool 'stuck' timed out after 0s", True)


async def test_sync_tools_still_see_context_variables() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    @tool
    def read() -> str:
        """Read the context variable."""
        return var.get()

    var.set("set in the caller")
    model = ScriptedModel([call("read"), reply("ok")])
    await Agent(model, tools=[read]).run("go")
    assert result_of(model.requests[1])[0] == "set in the caller"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)
_values = (
    _json
    | st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape"))
    | st.builds(object)
    | st.sampled_from([float("nan"), float("inf"), b"bytes", {1, 2}, ValueError("v")])
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=_values, arguments=st.dictionaries(st.text(max_size=5), _json, max_size=3))
def test_any_value_and_any_arguments_through_a_stored_run(
    tmp_path: Path, value: object, arguments: dict[str, Any]
) -> None:
    class Anything(Tool):
        name = "anything"
        description = "Returns a value."

        async def call(self, args: Mapping[str, Any], ctx: ToolContext) -> object:
            return value

    store = SQLiteStore(tmp_path / f"r{time.perf_counter_ns()}.db")
    model = ScriptedModel([call("anything", arguments), reply("ok")])
    agent = Agent(model, tools=[Anything()], store=store)
    run = asyncio.run(agent.run("go"))
    assert run.output == "ok" and agent.persistence_error is None
    validate_transcript(agent.history)
    content, _ = result_of(model.requests[1])
    content.encode("utf-8")
