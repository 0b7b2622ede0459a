"""Nobody is asked about a call whose arguments do not validate (SPEC 3, 17).

Seen with a real local model: a person was asked to approve ``refund(amount="lots")``, and
``Approve`` then gave only ``Invalid arguments for tool ...`` (on Vercel, which has no ``Edit``,
the approval was spent on an error). Arguments are now validated before a call goes to the
approver or becomes pending: the model reads the usual soft text in the same turn and fixes
its call; ``Edit`` still validates its own arguments. The run is stored in a real SQLite file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, Ask, Hook, RunConfig, ToolContext, tool
from agentloop import events as ev
from agentloop.messages import ToolCallPart
from agentloop.model import ModelRequest
from agentloop.observers import Observer
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import FunctionToolset

pytestmark = pytest.mark.usefixtures("no_real_sleep")

BAD = {"order": "A1", "amount": "lots"}
GOOD = {"order": "A1", "amount": 30}
INVALID = "Invalid arguments for tool 'refund': amount: "

ran: list[dict[str, Any]] = []


@tool(requires_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    ran.append({"order": order, "amount": amount})
    return f"refunded {amount} on {order}"


@tool(external=True)
def pick(colour: str, count: int) -> str:
    """The app's user picks (never run here)."""
    raise AssertionError("an external tool never runs on the server")


@tool
def lookup(order: str, amount: int) -> str:
    """A tool that asks nobody by itself."""
    return f"{order}: {amount}"


class Seen(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)


def read(request: ModelRequest) -> dict[str, tuple[str, bool]]:
    return {r.call_id: (r.content, r.is_error) for r in request.messages[-1].tool_results_parts}


@pytest.fixture(autouse=True)
def _clean() -> None:
    ran.clear()


async def test_an_approval_call_that_does_not_validate_is_answered_not_pending(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel(
        [call("refund", BAD, id="c1"), call("refund", GOOD, id="c2"), reply("Refunded.")]
    )
    seen = Seen()
    agent = Agent(model, tools=[refund], store=store, session_id="s", observers=[seen])
    run = await agent.run("refund A1")
    text, is_error = read(model.requests[1])["c1"]  # the same run, the next request
    assert is_error and text.startswith(INVALID)
    assert [p.id for p in run.pending] == ["c2"]  # only the call that can run waits
    stored = store.load_run(run.id)
    assert stored is not None and [p.call.id for p in stored.run.pending] == ["c2"]
    paused = [e for e in seen.events if isinstance(e, ev.RunPaused)]
    assert [[p.id for p in e.pending] for e in paused] == [["c2"]]
    run = await agent.continue_run(decisions={"c2": Approve()})
    assert run.output == "Refunded." and ran == [GOOD]
    store.close()


async def test_the_approver_is_not_asked_about_arguments_that_do_not_validate() -> None:
    asked: list[ToolCallPart] = []

    def approver(call: ToolCallPart, message: str) -> bool:
        asked.append(call)
        return True

    model = ScriptedModel(
        [call("refund", BAD, id="c1"), call("refund", GOOD, id="c2"), reply("ok")]
    )
    run = await Agent(model, tools=[refund], approver=approver).run("refund A1")
    assert [c.id for c in asked] == ["c2"] and ran == [GOOD] and run.output == "ok"
    assert read(model.requests[1])["c1"][0].startswith(INVALID)


async def test_an_external_call_that_does_not_validate_is_answered_not_pending() -> None:
    model = ScriptedModel(
        [call("pick", {"colour": "red"}, id="c1"), call("pick", {"colour": "red", "count": 2})]
    )
    run = await Agent(model, tools=[pick]).run("pick")
    text, is_error = read(model.requests[1])["c1"]
    assert is_error and text.startswith("Invalid arguments for tool 'pick': count: ")
    assert [(p.id, p.kind) for p in run.pending] == [(run.pending[0].id, "external")]
    assert run.pending[0].call.arguments == {"colour": "red", "count": 2}


async def test_a_hooks_ask_about_arguments_that_do_not_validate_pends_nothing() -> None:
    class AskAll(Hook):
        async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> Ask:
            return Ask("a person looks at every lookup")

    model = ScriptedModel([call("lookup", BAD, id="c1"), call("lookup", GOOD, id="c2")])
    agent = Agent(model, tools=[lookup], hooks=[AskAll()], config=RunConfig(headless=False))
    run = await agent.run("look")
    assert read(model.requests[1])["c1"][0].startswith("Invalid arguments for tool 'lookup'")
    assert [(p.id, p.message) for p in run.pending] == [("c2", "a person looks at every lookup")]


async def test_a_toolsets_approval_required_tool_is_validated_before_its_check() -> None:
    checked: list[Any] = []

    def needs(ctx: Any, spec: Any, arguments: Any) -> bool:
        checked.append(dict(arguments))
        return bool(arguments["amount"] > 10)  # would raise TypeError on "lots"

    shop = FunctionToolset([lookup], name="shop").approval_required(needs)
    model = ScriptedModel([call("lookup", BAD, id="c1"), call("lookup", GOOD, id="c2")])
    run = await Agent(model, toolsets=[shop]).run("look")
    text, is_error = read(model.requests[1])["c1"]
    assert is_error and text.startswith("Invalid arguments for tool 'lookup': amount: ")
    assert checked == [GOOD] and [p.id for p in run.pending] == ["c2"]


async def test_a_child_agents_call_that_does_not_validate_never_pauses_the_parent() -> None:
    child_model = ScriptedModel(
        [call("refund", BAD, id="k1"), call("refund", GOOD, id="k2"), reply("child done")]
    )
    child = Agent(child_model, tools=[refund], name="banker")
    banker = child.as_tool(name="banker", description="Moves money.")
    parent_model = ScriptedModel([call("banker", {"input": "refund A1"}, id="p1"), reply("ok")])
    parent = Agent(parent_model, tools=[banker])
    run = await parent.run("go")
    assert [(p.id, p.path) for p in run.pending] == [("k2", ("banker",))]
    assert read(child_model.requests[1])["k1"][0].startswith(INVALID)
    run = await parent.continue_run(decisions={"k2": Approve()})
    assert run.output == "ok" and ran == [GOOD]
