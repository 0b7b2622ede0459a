"""Property: whatever the script, run() returns a Run or raises an AgentLoopError, and history
stays a valid transcript holding every completed turn and nothing of a failed one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import Agent, Message, RunConfig, ToolError, tool
from agentloop.errors import AgentLoopError, ProviderUnavailable
from agentloop.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@tool
def ok(x: int = 0) -> str:
    """Fine."""
    return f"ok {x}"


@tool
def soft() -> str:
    """Soft failure."""
    raise ToolError("soft failure")


@tool
async def boom() -> str:
    """Raises."""
    raise RuntimeError("boom")


@tool
async def slow() -> str:
    """Times out (tool_timeout below)."""
    await asyncio.Event().wait()
    return "late"


KINDS = {
    "ok": lambda: call("ok", {"x": 1}),
    "unknown": lambda: call("missing_tool"),
    "soft": lambda: call("soft"),
    "raise": lambda: call("boom"),
    "slow": lambda: call("slow"),
    "bad_args": lambda: call("ok", {"x": "not a number"}),
}

turn_strategy = st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=3)


def valid(messages: list[Message]) -> bool:
    open_calls: list[str] = []
    for message in messages:
        if message.role == "tool":
            if [r.call_id for r in message.tool_results_parts] != open_calls:
                return False
            open_calls = []
        elif open_calls:
            return False
        else:
            open_calls = [c.id for c in message.tool_calls]
    return not open_calls


def build_script(turns: list[list[str]], fail_at: int | None) -> tuple[list[Any], int]:
    """The steps, and the index of the injected failure (-1 for none)."""
    steps: list[Any] = [[KINDS[k]() for k in turn] for turn in turns]
    steps.append(reply("final"))
    if fail_at is None:
        return steps, -1
    index = min(fail_at, len(steps) - 1)
    steps.insert(index, ProviderUnavailable("injected"))
    return steps, index


@settings(max_examples=40, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.lists(turn_strategy, max_size=4), st.none() | st.integers(0, 5)),
        min_size=1,
        max_size=3,
    ),
    parallel=st.booleans(),
)
def test_history_is_always_valid_and_holds_exactly_the_completed_turns(
    runs: list[tuple[list[list[str]], int | None]], parallel: bool
) -> None:
    config = RunConfig(tool_timeout=0.01, parallel_tool_calls=parallel)
    agent = Agent(ScriptedModel([]), tools=[ok, soft, boom, slow], config=config)
    expected_len = 0
    for turns, fail_at in runs:
        script, failure = build_script(turns, fail_at)
        agent.client = ScriptedModel(script)
        try:
            result = agent.run_sync("task")
        except AgentLoopError as error:
            assert agent.current_run is not None and agent.current_run.stop_reason is error
            run = agent.current_run
            # an injected provider failure ends the run at that model call; anything else
            # (the loop detector) ends it during the dispatch of the last recorded turn
            injected = isinstance(error, ProviderUnavailable)
            completed = failure if injected else len(run.turns) - 1
            expected_len += 0 if completed == 0 else 1 + 2 * completed
        else:
            assert result.stop_reason is None and result.output == "final"
            expected_len += 1 + 2 * len(turns) + 1
        history = agent.history
        assert valid(history)
        assert len(history) == expected_len
        assert all(m.role != "system" for m in history)
