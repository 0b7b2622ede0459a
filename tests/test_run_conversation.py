"""``run.conversation`` at each run's end, shared between a session's runs (``engine.kept``).

Each run once kept a copy of the whole history, O(N²) over a session of N runs. Now each keeps
a link of a chain (``agentloop._util.chain``) holding what it added: these tests hold every
past run's conversation to what a full copy at its end would have been, whatever the session
did since (more runs, compaction, an append-only conversation's new base, a filtered
handoff's end, a pause, a failure, an early read), and show a conversation is a list of its
own, and that a session's runs share their messages instead of copying them.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import Agent, Approve, RunConfig, handoff, tool
from agentloop._util import chain
from agentloop.context import TruncatingCompactor
from agentloop.errors import AgentLoopError
from agentloop.handoffs import remove_tool_calls
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart
from agentloop.model import ModelResponse
from agentloop.run import Run, started_run
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q} " + "word " * 40


@tool(requires_approval=True)
def erase(q: str) -> str:
    """Erase something."""
    return f"erased {q}"


def thought(step: str | ToolCallPart) -> ModelResponse:
    """A reply that opens with a thinking block, then ``step``."""
    part = TextPart(step) if isinstance(step, str) else step
    return ModelResponse(Message("assistant", (ThinkingPart("hm", signature="sig"), part)))


# -- the chain alone --------------------------------------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 3)),
        st.tuples(st.just("edit"), st.integers(0, 40)),  # in place from an index, said so
        st.tuples(st.just("cut"), st.integers(0, 40)),  # in place, not said: the guard's case
        st.tuples(st.just("replace"), st.integers(0, 5)),  # a new list
        st.tuples(st.just("snapshot"), st.just(0)),
        st.tuples(st.just("read"), st.integers(0, 40)),
    ),
    max_size=60,
)


class Kept:
    """A list and the snapshots taken of it, as a session and its runs keep them."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.linked: list[Any] | None = None
        self.link: chain.Link | None = None
        self.taken: list[tuple[chain.Link, list[Any]]] = []

    def step(self, op: str, n: int) -> None:
        values = self.values
        if op == "append":
            values.extend(object() for _ in range(n))
        elif op == "edit" and values:
            at = n % len(values)
            values[at:] = [object() for _ in values[at:]]
            if self.linked is values:
                self.link = chain.back_to(self.link, at)
        elif op == "cut" and values:
            del values[n % len(values) :]  # shorter: a grown link would read past its end
        elif op == "replace":
            self.values = [object() for _ in range(n)]
        elif op == "snapshot":
            self.snapshot()
        elif op == "read" and self.taken:
            got, expected = self.taken[n % len(self.taken)]
            assert chain.items(got) == expected

    def snapshot(self) -> None:
        if self.link is not None and self.linked is self.values:
            self.link = chain.grown(self.link, self.values)
        else:
            self.link, self.linked = chain.taken(self.values), self.values
        self.taken.append((self.link, list(self.values)))


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_every_snapshot_reads_as_the_list_it_was_taken_of(ops: list[tuple[str, int]]) -> None:
    kept = Kept()
    for op, n in ops:
        kept.step(op, n)
    for got, expected in kept.taken:
        assert chain.is_link(got) and chain.items(got) == expected
        assert chain.length(got) == len(expected)


# -- a session's runs --------------------------------------------------------------------------

STEPS = st.lists(
    st.sampled_from(["plain", "tool", "fail", "pause", "read", "handoff"]), min_size=1, max_size=14
)


def session_of(*, append_only: bool) -> tuple[Any, ScriptedModel, ScriptedModel]:
    model, receiver_model = ScriptedModel([]), ScriptedModel([])
    for each in (model, receiver_model):
        each.append_only = append_only  # type: ignore[attr-defined]
    receiver = Agent(receiver_model, name="billing", tools=[look, erase])
    agent = Agent(
        model,
        tools=[look, erase],
        handoffs=[handoff(receiver, input_filter=remove_tool_calls)],
        config=RunConfig(
            context_window=2_000,
            compact_threshold=0.5,
            compactor=TruncatingCompactor(),
            max_turns=4,
        ),
    )
    return agent.session(), model, receiver_model


async def one_step(session: Any, model: ScriptedModel, receiver: ScriptedModel, kind: str) -> Any:
    """One run of ``kind`` (``read``: an early read of a past run's conversation instead)."""
    if kind == "plain":
        model.steps.append(thought("ok"))
    elif kind == "tool":
        model.steps.extend([thought(ToolCallPart("c", "look", {"q": "a"})), reply("done")])
    elif kind == "fail":  # a hard error after a completed turn: that turn is committed
        model.steps.extend([call("look", {"q": "b"})] * 4)  # max_turns: the fifth never goes
    elif kind == "handoff":  # a filtered receiver's turns lose their thinking at the end
        model.steps.append(call("transfer_to_billing", {}))
        receiver.steps.extend([thought(ToolCallPart("r", "look", {"q": "c"})), thought("ok")])
    elif kind == "pause":  # a receiver pauses, then goes on: its end edits the history
        model.steps.append(call("transfer_to_billing", {}))
        receiver.steps.extend(
            [
                thought(ToolCallPart("r1", "look", {"q": "d"})),
                call("erase", {"q": "d"}, id="e1"),
                thought("erased"),
            ]
        )
    try:
        run = await session.run(kind)
        if run.paused:
            run = await session.continue_run(decisions={"e1": Approve()})
    except AgentLoopError:
        return session.runs[-1]
    return run


@settings(max_examples=40, deadline=None)
@given(STEPS, st.booleans())
def test_every_past_run_reads_as_a_full_copy_would_have(steps: list[str], ao: bool) -> None:
    async def scenario() -> None:
        session, model, receiver = session_of(append_only=ao)
        copies: list[tuple[Run[Any], list[Message]]] = []
        for kind in steps:
            if kind == "read" and copies:
                run, expected = copies[len(copies) // 2]
                assert run.conversation == expected  # made a list early: it stays as it was
                continue
            run = await one_step(session, model, receiver, kind)
            copies.append((run, session.history))
        for run, expected in copies:
            assert run.conversation == expected

    asyncio.run(scenario())


async def test_a_new_append_only_base_leaves_earlier_conversations_as_they_were() -> None:
    plain = ScriptedModel([thought("one"), thought("two")])
    agent = Agent(plain, tools=[look])
    session = agent.session()
    first, second = await session.run("a"), await session.run("b")
    expected = session.history
    appending = ScriptedModel([reply("three")])
    appending.append_only = True  # type: ignore[attr-defined]
    with agent.override(model=appending):  # a new conversation: its base first, no thinking
        third = await session.run("c")
    assert third.conversation[0].role == "system"
    assert second.conversation == expected  # the in-place edit did not reach it
    assert first.conversation == expected[:2]
    assert any(isinstance(p, ThinkingPart) for p in second.conversation[1].parts)


async def test_a_paused_filtered_receivers_end_is_its_own_conversation() -> None:
    receiver_model = ScriptedModel(
        [thought(ToolCallPart("r1", "look", {"q": "d"})), call("erase", {"q": "d"}, id="e1")]
    )
    receiver_model.steps.append(thought("erased"))
    receiver_model.append_only = True  # type: ignore[attr-defined]
    model = ScriptedModel([thought("hi"), call("transfer_to_billing", {})])
    model.append_only = True  # type: ignore[attr-defined]
    receiver = Agent(receiver_model, name="billing", tools=[look, erase])
    session = Agent(
        model, tools=[look], handoffs=[handoff(receiver, input_filter=remove_tool_calls)]
    ).session()
    before = await session.run("hello")
    kept = session.history
    paused = await session.run("erase d")
    assert paused.paused
    done = await session.continue_run(decisions={"e1": Approve()})
    # the end left the receiver's thinking out of the history, from inside the paused part
    assert done.conversation == session.history
    assert not any(isinstance(p, ThinkingPart) for m in done.conversation[4:] for p in m.parts)
    assert before.conversation == kept


async def test_a_conversation_is_a_list_of_its_own_and_runs_share_their_messages() -> None:
    session = Agent(ScriptedModel([reply("one"), reply("two")])).session()
    first, second = await session.run("a"), await session.run("b")
    link = second._link
    assert link is not None and link[0] is chain.LINK and link[1] is first._link
    assert len(link) == 3 + 2  # the second run's link holds its own two messages only
    conversation = second.conversation
    assert type(conversation) is list and conversation is second.conversation  # made once
    conversation.append(Message.user("mine"))
    assert len(session.history) == 4 and len(first.conversation) == 2
    for twin in (copy.deepcopy(second), pickle.loads(pickle.dumps(second))):
        assert twin.conversation == conversation
    fresh = started_run("r9", "a", 1.0, "s1")
    assert pickle.loads(pickle.dumps(fresh)).conversation == []


def test_a_run_made_by_hand_keeps_the_list_it_is_given() -> None:
    given = [Message.user("a")]
    run = Run(id="r1", input="a", conversation=given)
    assert run.conversation is given
    started = started_run("r2", "a", 1.0, "s1")
    assert started.conversation == [] and started.conversation is started.conversation
    assert Run(id="r3", input="a").conversation == []


async def test_a_paused_run_read_at_its_pause_reads_its_end_after_it_goes_on() -> None:
    session = Agent(
        ScriptedModel([call("erase", {"q": "a"}, id="e1"), reply("erased")]), tools=[erase]
    ).session()
    paused = await session.run("erase a")
    assert paused.paused and [m.role for m in paused.conversation] == ["user"]
    done = await session.continue_run(decisions={"e1": Approve()})
    assert done is paused
    assert done.conversation == session.history and len(done.conversation) == 4


async def test_a_run_continued_from_the_store_reads_its_end(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    steps = [call("erase", {"q": "a"}, id="e1"), reply("erased")]
    first = Agent(ScriptedModel(steps[:1]), tools=[erase], store=store, session_id="s1")
    paused = await first.run("erase a")
    assert paused.paused
    later = Agent(ScriptedModel(steps[1:]), tools=[erase], store=store).session("s1")
    done = await later.continue_run(decisions={"e1": Approve()})  # a run rebuilt from its record
    assert done.output == "erased"
    assert done.conversation == later.history and len(done.conversation) == 4
