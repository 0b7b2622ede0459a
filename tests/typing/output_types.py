"""Checked by mypy --strict in tests/test_typing.py: the output type flows to ``run.output``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_type

from pydantic import BaseModel

from agentloop import Agent, Run, ToolContext, tool
from agentloop import events as ev
from agentloop.testing import ScriptedModel, call, reply


class Invoice(BaseModel):
    total: float


@dataclass
class Deps:
    user: str


@tool
def whoami(ctx: ToolContext[Deps]) -> str:
    """Who is asking."""
    assert_type(ctx.deps, Deps)
    return ctx.deps.user


async def typed() -> None:
    agent = Agent(ScriptedModel([call("final_result", {"total": 1})]), output_type=Invoice)
    assert_type(agent, Agent[Invoice])
    run = await agent.run("bill", deps=Deps("ann"))
    assert_type(run, Run[Invoice])
    assert_type(run.output, Invoice)
    assert_type(agent.run_sync("again").output, Invoice)
    numbers = await Agent(ScriptedModel([]), output_type=list[int]).run("n")
    assert_type(numbers.output, list[int])


async def untyped() -> None:
    agent = Agent(ScriptedModel([reply("hi")]), tools=[whoami])
    run = await agent.run("hello")
    assert_type(run.output, str | None)
    async with agent.stream("hello") as events:
        async for event in events:
            assert_type(event, ev.Event)
            if isinstance(event, ev.RunFinished):
                assert_type(event.run.output, Any)
        assert_type(events.run.output, str | None)
