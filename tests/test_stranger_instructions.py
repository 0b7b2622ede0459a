"""A continued run reuses the instructions it was paused with (SPEC 17), wherever it goes on.

Found by building a web product from the docs alone: a shop agent with instructions pauses on
an approval; the process that continued it (``agentloop continue``, a worker built with
``Agent.resume`` and no ``system=``) sent the model no instructions at all, and in the same
process a prompt function was evaluated again for the continuation. SPEC 17: "The run stores
what is data: ... the evaluated instructions; continuations reuse these and never compute them
again."
"""

from __future__ import annotations

from pathlib import Path

from agentloop import Agent, Approve, RunContext, tool
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def test_a_prompt_function_is_not_evaluated_again_for_the_continuation() -> None:
    evaluated: list[str] = []

    def prompt(ctx: RunContext) -> str:
        evaluated.append(ctx.run_id)
        return f"You are the shop's agent (evaluation {len(evaluated)})."

    model = ScriptedModel([call("refund", {"order": "A-1"}, id="c1"), reply("Refunded.")])
    agent = Agent(model, tools=[refund], instructions=prompt)
    paused = agent.run_sync("refund A-1")
    run = agent.continue_run_sync(decisions={"c1": Approve()})
    assert run.id == paused.id and run.output == "Refunded."
    assert len(evaluated) == 1
    assert [r.system for r in model.requests] == ["You are the shop's agent (evaluation 1)."] * 2


def test_another_process_goes_on_with_the_stored_instructions(tmp_path: Path) -> None:
    db = tmp_path / "shop.db"
    asking = ScriptedModel([call("refund", {"order": "A-1"}, id="c1")])
    shop = Agent(asking, tools=[refund], store=SQLiteStore(db), system="You are the shop's agent.")
    assert shop.session("thread-1").run_sync("refund A-1").paused

    answering = ScriptedModel([reply("Refunded.")])
    store = SQLiteStore(db)
    try:  # a worker (or the CLI) built without the shop's instructions
        worker = Agent.resume("thread-1", store=store, client=answering, tools=[refund])
        assert worker.continue_run_sync(decisions={"c1": Approve()}).output == "Refunded."
    finally:
        store.close()
    [request] = answering.requests
    assert request.system == "You are the shop's agent."
