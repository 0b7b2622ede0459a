"""A stateless run that pauses stays reachable while the agent lives (SPEC 20), and only then.

``agent.run(input, history=...)`` runs on a fresh, unsaved session the application never sees;
when it pauses, ``agent.session(run.session_id).continue_run(decisions=...)`` continues it, even
after every reference the application had is gone. A stateless run that did not pause is not
kept, and a paused one is let go once it is continued to its end.
"""

from __future__ import annotations

import gc

import pytest

from agentloop import Agent, Approve, Deny, tool
from agentloop.engine.session import Session
from agentloop.errors import InvalidInput
from agentloop.testing import ScriptedModel, call, reply

REFUNDED: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    REFUNDED.append(order)
    return f"refunded {order}"


def live_sessions() -> int:
    gc.collect()
    return sum(isinstance(o, Session) for o in gc.get_objects())


def test_a_paused_stateless_run_is_continued_through_agent_session() -> None:
    REFUNDED.clear()
    model = ScriptedModel([call("refund", {"order": "A-1"}, id="c1"), reply("Refunded.")])
    with Agent(model, tools=[refund]) as agent:
        run = agent.run_sync("hi", history=[])
        assert run.paused and agent.runs == []  # the default session is untouched
        session_id, run_id = run.session_id, run.id
        del run
        gc.collect()  # nobody but the agent holds the stateless session now
        done = agent.session(session_id).continue_run_sync(decisions={"c1": Approve()})
    assert done.id == run_id and done.output == "Refunded." and REFUNDED == ["A-1"]


async def test_a_streamed_stateless_run_that_pauses_is_reachable_too() -> None:
    model = ScriptedModel([call("refund", {"order": "B-2"}, id="c1"), reply("No.")])
    agent = Agent(model, tools=[refund])
    async with agent.stream("hi", history=[]) as events:
        async for _ in events:
            pass
    session_id = events.run.session_id
    del events
    gc.collect()
    session = agent.session(session_id)
    assert session.current_run is not None and session.current_run.paused
    done = await session.continue_run(decisions={"c1": Deny()})
    assert done.output == "No."


async def test_a_stateless_run_that_did_not_pause_is_not_kept() -> None:
    agent = Agent(ScriptedModel([reply(f"r{i}") for i in range(200)]))
    before = live_sessions()
    ids = [(await agent.run("hi", history=[])).session_id for _ in range(200)]
    assert live_sessions() == before  # 200 stateless runs leave nothing behind
    assert agent.session(ids[-1]).runs == []  # a new, empty session of that id


async def test_the_agent_lets_go_once_the_paused_run_ends() -> None:
    steps = [call("refund", {"order": "C-3"}, id="c1"), reply("Done.")]
    agent = Agent(ScriptedModel(steps), tools=[refund])
    session_id = (await agent.run("hi", history=[])).session_id
    before = live_sessions()
    await agent.session(session_id).continue_run(decisions={"c1": Approve()})
    assert live_sessions() == before - 1
    assert agent.session(session_id).runs == []


async def test_a_refused_decision_keeps_it_reachable() -> None:
    agent = Agent(ScriptedModel([call("refund", {"order": "D-4"}, id="c1")]), tools=[refund])
    session_id = (await agent.run("hi", history=[])).session_id
    with pytest.raises(InvalidInput, match="c1"):
        await agent.session(session_id).continue_run(decisions={"nope": Approve()})
    gc.collect()
    assert agent.session(session_id).current_run is not None
    assert agent.session(session_id).runs[-1].paused
