"""A handoff receiver's paused call is judged by the agent of its turn (SPEC 17, 26).

The viewer's continuer (``agent_continuer``) and the CLI's check take the run's ``last_agent``:
the receiver has the tool, so its approval is accepted, even when the starting agent has none.
An agent whose handoffs no longer reach the receiver (renamed or dropped by a deploy) refuses
the approval, nothing recorded, rather than run a same-named tool of another agent; an agent
without handoffs (``agentloop continue``'s, built with the tools alone) is judged itself, as
before. Real SQLite store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, tool
from agentloop.engine.pause import check_continuable
from agentloop.errors import InvalidInput
from agentloop.pausing import Approve, Deny
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.ui.viewer import agent_continuer

RAN: list[tuple[str, str]] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (billing's)."""
    RAN.append(("billing", order))
    return "refunded"


@tool(requires_approval=True, name="refund")
def front_refund(order: str) -> str:
    """Refund store credit (another agent's tool of the same name)."""
    RAN.append(("front", order))
    return "credit refunded"


async def paused_in_billing(db: Path) -> tuple[str, Approve, str]:
    steps = [call("refund", {"order": "A1"})]
    billing = Agent(ScriptedModel(steps), name="billing", tools=[refund])
    with SQLiteStore(db) as store:
        front = Agent(
            ScriptedModel([call("transfer_to_billing", {})]), handoffs=[billing], store=store
        )
        session = front.session()
        run = await session.run("refund A1")
    assert run.paused and run.last_agent == "billing"
    return session.id, Approve(), run.pending[0].id


async def test_the_viewer_accepts_an_approval_of_the_receiver_s_call(tmp_path: Path) -> None:
    RAN.clear()
    session_id, approve, call_id = await paused_in_billing(tmp_path / "s.db")
    billing = Agent(ScriptedModel([reply("Refunded.")]), name="billing", tools=[refund])
    with SQLiteStore(tmp_path / "s.db") as store:
        front = Agent(ScriptedModel([]), handoffs=[billing], store=store)
        run = front.session(session_id).current_run
        assert run is not None
        continuer = agent_continuer(front)
        await continuer.check(run.pending, {call_id: approve}, run.last_agent)
        done = await continuer(session_id, run.id, {call_id: approve})
    assert done.output == "Refunded." and RAN == [("billing", "A1")]


async def test_a_receiver_the_graph_no_longer_reaches_refuses_the_approval(
    tmp_path: Path,
) -> None:
    RAN.clear()
    session_id, approve, call_id = await paused_in_billing(tmp_path / "s.db")
    sales = Agent(ScriptedModel([]), name="sales")
    with SQLiteStore(tmp_path / "s.db") as store:
        front = Agent(
            ScriptedModel([reply("done")]), tools=[front_refund], handoffs=[sales], store=store
        )
        session = front.session(session_id)
        with pytest.raises(InvalidInput, match="would run tool 'refund'"):
            await session.continue_run(decisions={call_id: approve})
        stored = store.load_run(session.current_run.id)  # type: ignore[union-attr]
        assert stored is not None and stored.run.paused and not stored.run.decisions
        run = session.current_run
        assert run is not None
        with pytest.raises(InvalidInput):  # the faces' check says the same
            await check_continuable(front, run.pending, {call_id: approve}, run.last_agent)
        await session.cancel_run()
    assert RAN == []


async def test_a_continuer_without_handoffs_is_judged_itself(tmp_path: Path) -> None:
    session_id, approve, call_id = await paused_in_billing(tmp_path / "s.db")
    with SQLiteStore(tmp_path / "s.db") as store:
        plain = Agent(ScriptedModel([]), tools=[refund], store=store)
        run = plain.session(session_id).current_run
        assert run is not None
        await check_continuable(plain, run.pending, {call_id: approve}, run.last_agent)
        await check_continuable(plain, run.pending, {call_id: Deny()}, run.last_agent)
