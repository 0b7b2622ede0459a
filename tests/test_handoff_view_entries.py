"""A filtered receiver's entries on an append-only conversation stay in its view (SPEC 26, 28).

A filtered handoff opens a conversation of its own for the receiver, with its own base, so a
tool or instruction change recorded while it runs is an entry against *that* base. Such entries
once went into the transcript and were committed into the session's history, which goes on
against the *session's* base: the session's next run counted the receiver's tools as in effect
and sent a removal for them. Now they are the view's (``View.entries``): sent at the same place
on every request of the receiver's conversation (also after a pause, also from the store), never
in ``Session.history``, ``run.conversation`` or ``run.messages``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentloop import Agent, Approve, handoff, tool
from agentloop.engine.views import View, restored, stored
from agentloop.handoffs import remove_tool_calls
from agentloop.messages import Message, TextPart, ToolChangePart
from agentloop.model import ModelRequest
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import FunctionToolset


@tool
def route(q: str) -> str:
    """Route a question."""
    return "routed"


def append_only(steps: list[Any]) -> ScriptedModel:
    model = ScriptedModel(steps)
    model.append_only = True  # type: ignore[attr-defined]
    return model


def entries(messages: Sequence[Message]) -> list[Message]:
    """The system messages of ``messages``: entries, or a base."""
    return [m for m in messages if m.role == "system"]


def billing_tools(*, approve_refund: bool = False) -> Any:
    """``look`` always; ``refund`` from the run's third turn (the offer changes mid-run)."""
    tools = FunctionToolset(name="billing_tools")

    @tools.tool
    def look(order: str) -> str:
        """Look an order up."""
        return f"{order} is paid"

    @tools.tool
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    offered = tools.filtered(lambda ctx, spec: spec.name != "refund" or ctx.turn >= 2)
    if approve_refund:
        return offered.approval_required(lambda ctx, spec, arguments: spec.name == "refund")
    return offered


def triage_and_billing(
    billing_steps: list[Any], triage_steps: list[Any], **kwargs: Any
) -> tuple[Agent[Any], ScriptedModel, ScriptedModel]:
    billing_model, triage_model = append_only(billing_steps), append_only(triage_steps)
    billing = Agent(
        billing_model,
        name="billing",
        instructions="You bill.",
        toolsets=[billing_tools(approve_refund=kwargs.pop("approve_refund", False))],
    )
    triage = Agent(
        triage_model,
        instructions="You route.",
        tools=[route],
        handoffs=[handoff(billing, input_filter=remove_tool_calls)],
        **kwargs,
    )
    return triage, triage_model, billing_model


def added_refund(message: Message) -> bool:
    change = message.parts[0]
    return type(change) is ToolChangePart and [t.name for t in change.added] == ["refund"]


def clean(history: list[Message]) -> None:
    """The session's history: its base, then no entry the receiver recorded."""
    assert entries(history) == [history[0]]
    tools = history[0].parts[1]
    assert isinstance(tools, ToolChangePart)
    assert [t.name for t in tools.added] == ["route", "transfer_to_billing"]


def goes_on_clean(request: ModelRequest) -> None:
    """The session's next request: its own base, no entry of the receiver's, no removal."""
    assert request.system == "You route."
    assert [t.name for t in request.tools] == ["route", "transfer_to_billing"]
    assert entries(request.messages) == []


async def test_the_receivers_tool_change_stays_in_its_view_not_in_the_session() -> None:
    triage, triage_model, billing_model = triage_and_billing(
        [call("look", {"order": "A1"}), call("refund", {"order": "A1"}), reply("refunded")],
        [call("transfer_to_billing", {}), reply("anything else?")],
    )
    session = triage.session()
    run = await session.run("refund A1")
    assert run.output == "refunded"
    first, second, third = billing_model.requests
    assert [t.name for t in first.tools] == ["look"] and entries(first.messages) == []
    assert added_refund(second.messages[-1])  # the change, after the tool's result
    assert list(third.messages[: len(second.messages)]) == list(second.messages)  # append-only
    assert len(entries(third.messages)) == 1
    clean(session.history)
    clean(run.conversation)
    assert entries(run.messages) == []
    assert any(c.name == "refund" for m in session.history for c in m.tool_calls)  # kept
    assert (await session.run("thanks")).output == "anything else?"
    goes_on_clean(triage_model.requests[-1])
    clean(session.history)


async def test_a_paused_receiver_keeps_its_entries_where_they_were_sent() -> None:
    triage, triage_model, billing_model = triage_and_billing(
        [call("look", {"order": "A1"}), call("refund", {"order": "A1"}, id="r1"), reply("done")],
        [call("transfer_to_billing", {}), reply("anything else?")],
        approve_refund=True,
    )
    session = triage.session()
    paused = await session.run("refund A1")
    assert paused.paused and paused.last_agent == "billing"
    clean(session.history)  # also while the receiver's conversation is paused
    done = await session.continue_run(decisions={"r1": Approve()})
    assert done.output == "done"
    before, after = billing_model.requests[1:]
    assert list(after.messages[: len(before.messages)]) == list(before.messages)
    assert [added_refund(m) for m in entries(after.messages)] == [True]  # not recorded again
    assert (after.system, after.tools) == (before.system, before.tools)
    clean(session.history)
    await session.run("thanks")
    goes_on_clean(triage_model.requests[-1])


async def test_a_paused_receivers_entries_survive_the_store(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    billing_steps = [call("look", {"order": "A1"}), call("refund", {"order": "A1"}, id="r1")]
    triage, _, billing_model = triage_and_billing(
        billing_steps,
        [call("transfer_to_billing", {})],
        approve_refund=True,
        store=store,
        session_id="s1",
    )
    paused = await triage.run("refund A1")
    assert paused.paused
    clean(store.load_history("s1"))
    later, later_triage, later_billing = triage_and_billing(
        [reply("done")], [reply("anything else?")], approve_refund=True, store=store
    )
    session = later.session("s1")
    done = await session.continue_run(decisions={"r1": Approve()})
    assert done.output == "done" and done.turns[-2].tool_results[0].content == "refunded A1"
    before, after = billing_model.requests[-1], later_billing.requests[0]
    assert list(after.messages[: len(before.messages)]) == list(before.messages)
    assert [added_refund(m) for m in entries(after.messages)] == [True]
    await session.run("thanks")
    goes_on_clean(later_triage.requests[-1])
    clean(store.load_history("s1"))
    clean(later.session("s1").history)


def test_a_views_entries_go_where_they_were_recorded_and_a_pause_keeps_them() -> None:
    transcript = [Message.user(str(i)) for i in range(6)]
    one, two = Message.system("one"), Message("system", (TextPart("two"),))
    view = View([Message.user("head")], 2, 2, 2, [(4, one), (4, two), (6, one)])
    sent = view.messages(transcript)
    assert [m.text for m in sent] == ["head", "2", "3", "one", "two", "4", "5", "one"]
    again = restored(stored(view))
    assert again is not None and again.messages(transcript) == sent
    plain = View([Message.user("head")], 2, 2, 2)
    assert "shown_entries" not in stored(plain)  # a pause without entries stores what it did
    assert restored(stored(plain)) == plain


async def test_a_pause_stored_with_the_entries_in_the_history_still_ends_clean() -> None:
    triage, triage_model, billing_model = triage_and_billing(
        [call("look", {"order": "A1"}), call("refund", {"order": "A1"}, id="r1"), reply("done")],
        [call("transfer_to_billing", {}), reply("anything else?")],
        approve_refund=True,
    )
    session = triage.session()
    paused = await session.run("refund A1")
    assert paused.paused_turn is not None
    [(position, entry)] = paused.paused_turn.pop("shown_entries")  # as a pause stored it before
    session._history.insert(position, Message.from_dict(entry))
    done = await session.continue_run(decisions={"r1": Approve()})
    assert done.output == "done"
    before, after = billing_model.requests[1:]
    assert list(after.messages[: len(before.messages)]) == list(before.messages)
    assert [added_refund(m) for m in entries(after.messages)] == [True]  # not recorded again
    clean(session.history)  # the receiver's entry left the session's history at the end
    await session.run("thanks")
    goes_on_clean(triage_model.requests[-1])
