"""The memory capability on an agent (SPEC 27), on every memory store (SQLite, PostgreSQL too).

Runs use ``ScriptedModel``/``FunctionModel``; the store is real. Each test pins one bullet:
the namespace callable, the tools' exact soft texts, staging, and which writes each ending
applies.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop import events as ev
from agentloop.errors import (
    CompactionStalled,
    ConfigurationError,
    ContextExceeded,
    ContextLengthExceeded,
    InternalError,
    MemoryBackendError,
)
from agentloop.memory import InMemoryMemoryStore, Memory, by_session
from agentloop.memory._store import BaseMemoryStore
from agentloop.model import ModelRequest
from agentloop.observers import Observer
from agentloop.pausing import Approve
from agentloop.testing import FunctionModel, ScriptedModel, call, reply

from .conftest import StoreFactory

NS = ("user", "ada")


class Events(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [type(e).__name__ for e in self.events]

    def of(self, kind: type[ev.Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def user_ns(ctx: Any) -> tuple[str, ...]:
    return ("user", ctx.deps)


def agent_on(store: BaseMemoryStore, steps: list[Any], **kwargs: Any) -> tuple[Agent[Any], Any]:
    options = {k: kwargs.pop(k) for k in list(kwargs) if k in _MEMORY_OPTIONS}
    model = ScriptedModel(steps)
    memory = Memory(store, namespace=kwargs.pop("namespace", user_ns), **options)
    return Agent(model, memory=memory, **kwargs), model


_MEMORY_OPTIONS = {"auto_recall", "recall_tokens", "max_item_chars", "max_items", "anthropic_tool"}


def results(model: ScriptedModel) -> list[str]:
    """Every tool result the model was sent, in order."""
    return [r.content for m in model.requests[-1].messages for r in m.tool_results_parts]


# -- construction -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"namespace": ("user", "ada")},
        {"namespace": "user"},
        {"namespace": user_ns, "auto_recall": -1},
        {"namespace": user_ns, "recall_tokens": 0},
        {"namespace": user_ns, "max_item_chars": 0},
        {"namespace": user_ns, "max_items": True},
        {"namespace": user_ns, "anthropic_tool": "yes"},
    ],
)
def test_a_fixed_namespace_or_bad_numbers_are_configuration_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        Memory(InMemoryMemoryStore(), **bad)


@pytest.mark.parametrize("name", ["remember", "recall", "forget", "memory"])
def test_an_agent_tool_of_a_memory_name_is_a_configuration_error(name: str) -> None:
    @tool(name=name)
    def mine(x: str) -> str:
        """Mine."""
        return x

    with pytest.raises(ConfigurationError, match=name):
        Agent(
            ScriptedModel([]), tools=[mine], memory=Memory(InMemoryMemoryStore(), namespace=user_ns)
        )


def test_anthropic_tool_true_with_another_client_is_a_configuration_error() -> None:
    memory = Memory(InMemoryMemoryStore(), namespace=user_ns, anthropic_tool=True)
    with pytest.raises(ConfigurationError, match="anthropic_tool"):
        Agent(ScriptedModel([]), memory=memory)


def test_the_model_gets_three_tools_and_never_a_namespace_parameter() -> None:
    agent = Agent(ScriptedModel([]), memory=Memory(InMemoryMemoryStore(), namespace=user_ns))
    specs = {s.name: s for s in agent.registry.specs()}
    assert set(specs) == {"remember", "recall", "forget"}
    for spec in specs.values():
        assert "namespace" not in spec.parameters["properties"]


# -- the namespace ----------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", [lambda ctx: 1 / 0, lambda ctx: ("a/b",), lambda ctx: "x"])
async def test_a_namespace_callable_that_fails_ends_the_run_before_any_request(
    open_memory: StoreFactory, namespace: Any
) -> None:
    agent, model = agent_on(open_memory(), [reply("never")], namespace=namespace)
    with pytest.raises(ConfigurationError) as caught:
        await agent.run("hi", deps="ada")
    assert caught.value.__cause__ is not None
    assert model.requests == []
    assert agent.runs[-1].stop_reason is caught.value and agent.history == []


async def test_an_async_namespace_is_awaited_and_called_once_per_run(
    open_memory: StoreFactory,
) -> None:
    store, calls = open_memory(), []

    async def namespace(ctx: Any) -> tuple[str, ...]:
        calls.append(ctx.deps)
        return ("tenant", ctx.deps)

    steps = [call("remember", {"text": "likes tea"}), call("recall", {"query": "tea"}), reply("ok")]
    agent, _ = agent_on(store, steps, namespace=namespace)
    run = await agent.run("hi", deps="t1")
    assert (
        calls == ["t1"] and run.memory is not None and run.memory["namespace"] == ["tenant", "t1"]
    )
    assert [i.text for i in await store.search(("tenant", "t1"), "tea")] == ["likes tea"]


async def test_by_session_keeps_memory_within_one_conversation(open_memory: StoreFactory) -> None:
    store = open_memory()
    agent, _ = agent_on(
        store, [call("remember", {"text": "tea"}), reply("ok")], namespace=by_session
    )
    session = agent.session("s-1")
    await session.run("hi")
    assert await store.count(("session", "s-1")) == 1


# -- the tools' words -------------------------------------------------------------------------


async def test_remember_recall_forget_speak_the_exact_words(open_memory: StoreFactory) -> None:
    store = open_memory()
    old = await store.put(NS, "Ada's cat is called Pixel")
    steps = [
        call("remember", {"text": "Ada prefers green tea", "tags": ["drink"]}),
        call("recall", {"query": "tea cat", "k": 5}),
        call("recall", {"query": "bicycle"}),
        call("forget", {"id": old.id}),
        call("forget", {"id": "nope"}),
        reply("done"),
    ]
    agent, model = agent_on(store, steps)
    run = await agent.run("hi", deps="ada")
    new = run.memory["staged"] if run.memory else None
    seen = results(model)
    written = run.memory["committed"]["written"] if run.memory else []
    assert seen[0] == f"remembered as {written[0]}" and new == []
    assert seen[1] == f"[{written[0]}] Ada prefers green tea\n[{old.id}] Ada's cat is called Pixel"
    assert seen[2] == "no memories match 'bicycle'"
    assert seen[3] == f"forgot {old.id}"
    assert seen[4] == "no memory with id 'nope'"
    assert await store.get(NS, old.id) is None


async def test_size_secrets_and_a_full_memory_are_refused_softly(open_memory: StoreFactory) -> None:
    store = open_memory()
    await store.put(NS, "one")
    steps = [
        call("remember", {"text": "x" * 101}),
        call("remember", {"text": "my key is sk-ant-api03-" + "a" * 40}),
        call("remember", {"text": "fine", "tags": ["ghp_" + "b" * 36]}),
        call("remember", {"text": "second"}),
        call("remember", {"text": "third"}),
        reply("done"),
    ]
    agent, model = agent_on(store, steps, max_item_chars=100, max_items=2)
    await agent.run("hi", deps="ada")
    seen = results(model)
    assert seen[0] == "memory too large: 101 characters (limit 100)"
    assert seen[1] == seen[2] == "memory not saved: it contains a secret"
    assert seen[3].startswith("remembered as ")
    assert seen[4] == "memory is full: 2 items; forget some first"  # the staged write counts
    assert await store.count(NS) == 2


class BrokenStore(InMemoryMemoryStore):
    def _search(self, *args: Any) -> Any:
        raise MemoryBackendError("the disk is on fire")


async def test_a_store_failure_is_soft_and_sick_for_the_tool_breaker() -> None:
    steps = [call("recall", {"query": "tea"}) for _ in range(4)] + [reply("done")]
    agent, model = agent_on(BrokenStore(), steps)
    await agent.run("hi", deps="ada")
    seen = [r.content for r in model.requests[-1].messages[-1].tool_results_parts]
    texts = results(model)
    assert texts[0] == "memory unavailable: MemoryBackendError"
    assert seen == ["tool temporarily unavailable: circuit breaker open"]  # 3 sick → open


# -- staging and what each ending applies -----------------------------------------------------


async def test_writes_are_staged_seen_by_the_run_and_applied_at_the_end(
    open_memory: StoreFactory,
) -> None:
    store, during = open_memory(), []

    async def step(request: ModelRequest) -> Any:
        during.append(await store.count(NS))
        n = len(during)
        if n == 1:
            return call("remember", {"text": "Ada prefers tea"})
        if n == 2:
            return call("recall", {"query": "tea"})
        return reply("ok")

    recorder = Events()
    agent = Agent(
        FunctionModel(step), memory=Memory(store, namespace=user_ns), observers=[recorder]
    )
    run = await agent.run("hi", deps="ada")
    assert during == [0, 0, 0]  # nothing written while the run runs
    assert run.messages[-2].tool_results_parts[0].content.endswith("Ada prefers tea")
    assert await store.count(NS) == 1
    kinds = recorder.kinds()
    assert kinds.index("MemoryCommitted") == kinds.index("RunFinished") - 1
    (committed,) = recorder.of(ev.MemoryCommitted)
    assert len(committed.written) == 1 and committed.deleted == () and committed.dropped == ()


async def test_a_hard_error_applies_only_the_completed_turns_writes(
    open_memory: StoreFactory,
) -> None:
    store = open_memory()
    steps = [
        call("remember", {"text": "turn zero"}),
        [call("remember", {"text": "turn one, in flight"}), call("boom", {})],
        reply("never"),
    ]

    @tool
    def boom() -> str:
        """Fail hard."""
        raise KeyboardInterrupt  # never soft: the turn is cut off mid-dispatch

    agent, _ = agent_on(store, steps, tools=[boom])
    with pytest.raises(KeyboardInterrupt):
        await agent.run("hi", deps="ada")
    assert [i.text for i in await store.search(NS, "")] == ["turn zero"]


async def test_a_model_error_after_a_completed_turn_commits_that_turn(
    open_memory: StoreFactory,
) -> None:
    store = open_memory()
    steps = [call("remember", {"text": "turn zero"}), InternalError("provider fell over")]
    agent, _ = agent_on(store, steps)
    with pytest.raises(InternalError):
        await agent.run("hi", deps="ada")
    assert [i.text for i in await store.search(NS, "")] == ["turn zero"]


async def test_the_cannot_fit_family_applies_nothing(open_memory: StoreFactory) -> None:
    store = open_memory()
    too_long = ContextLengthExceeded("prompt is too long")
    steps = [call("remember", {"text": "turn zero"}), too_long, too_long]
    agent, _ = agent_on(store, steps)
    with pytest.raises((ContextExceeded, CompactionStalled)):
        await agent.run("hi", deps="ada")
    assert await store.count(NS) == 0
    assert agent.runs[-1].unfinished_input == "hi"


async def test_a_cancel_applies_the_completed_turns(open_memory: StoreFactory) -> None:
    store = open_memory()
    agent: Agent[Any]

    def step(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return call("remember", {"text": "turn zero"})
        agent.cancel()
        return call("remember", {"text": "turn one"})

    agent = Agent(FunctionModel(step), memory=Memory(store, namespace=user_ns))
    with pytest.raises(Exception) as caught:
        await agent.run("hi", deps="ada")
    assert caught.value.is_cancelled()  # type: ignore[attr-defined]
    assert [i.text for i in await store.search(NS, "")] == ["turn zero"]


async def test_a_pause_applies_completed_turns_now_and_the_paused_turn_on_continue(
    open_memory: StoreFactory,
) -> None:
    store = open_memory()

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    steps = [
        call("remember", {"text": "tea turn zero"}),
        [call("remember", {"text": "paused turn"}), call("refund", {"order": "A1"}, id="c9")],
        reply("done"),
    ]
    await store.put(NS, "tea before")
    calls: list[Any] = []

    def namespace(ctx: Any) -> tuple[str, ...]:
        calls.append(ctx.run_id)
        return NS

    agent, model = agent_on(store, steps, tools=[refund], namespace=namespace, auto_recall=5)
    run = await agent.run("tea", deps="ada")
    assert run.paused
    assert {i.text for i in await store.search(NS, "")} == {"tea before", "tea turn zero"}
    await agent.continue_run(decisions={"c9": Approve()})
    texts = {i.text for i in await store.search(NS, "")}
    assert texts == {"tea before", "tea turn zero", "paused turn"}
    assert calls == [run.id]  # the continuation reused the stored namespace
    systems = {r.system for r in model.requests}
    assert len(systems) == 1 and "tea turn zero" not in str(systems)  # and the recall block


async def test_the_apply_enforces_max_items_again_and_lists_what_it_dropped(
    open_memory: StoreFactory,
) -> None:
    store = open_memory()
    recorder = Events()

    async def step(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return call("remember", {"text": "mine"})
        await store.put(NS, "the application's own")  # trusted, unlimited: the namespace fills
        return reply("ok")

    memory = Memory(store, namespace=user_ns, max_items=1)
    agent = Agent(FunctionModel(step), memory=memory, observers=[recorder])
    run = await agent.run("hi", deps="ada")
    (committed,) = recorder.of(ev.MemoryCommitted)
    assert committed.written == () and len(committed.dropped) == 1
    assert run.memory is not None and run.memory["committed"]["dropped"] == list(committed.dropped)
    assert [i.text for i in await store.search(NS, "")] == ["the application's own"]


async def test_a_failed_apply_fails_the_run_keeping_output_and_history() -> None:
    class NoApply(InMemoryMemoryStore):
        def _apply(self, *args: Any) -> Any:
            raise MemoryBackendError("the apply failed")

    agent, _ = agent_on(NoApply(), [call("remember", {"text": "x"}), reply("the answer")])
    with pytest.raises(MemoryBackendError):
        await agent.run("hi", deps="ada")
    run = agent.runs[-1]
    assert run.output == "the answer" and isinstance(run.stop_reason, MemoryBackendError)
    assert [m.role for m in agent.history] == ["user", "assistant", "tool", "assistant"]


# -- auto recall ------------------------------------------------------------------------------


async def test_auto_recall_adds_the_block_to_the_instructions(open_memory: StoreFactory) -> None:
    store = open_memory()
    tea = await store.put(NS, "Ada prefers green tea")
    cat = await store.put(NS, "Ada's cat likes tea too")
    await store.put(NS, "unrelated bicycle")
    recorder = Events()
    agent, model = agent_on(
        store, [reply("ok")], auto_recall=5, system="Be kind.", observers=[recorder]
    )
    run = await agent.run("what tea should I buy?", deps="ada")
    system = model.requests[0].system
    assert system.startswith("Be kind.\n\nMemories from earlier conversations:\n")
    assert f"- [{tea.id}] Ada prefers green tea" in system and cat.id in system
    assert "bicycle" not in system
    kinds = recorder.kinds()
    assert kinds.index("MemoryRecalled") == kinds.index("RunStarted") + 1
    assert set(recorder.of(ev.MemoryRecalled)[0].ids) == {tea.id, cat.id}
    assert all("Memories" not in (m.text or "") for m in agent.history)  # never committed
    assert run.memory is not None and set(run.memory["recalled"]) == {tea.id, cat.id}


async def test_the_recall_block_drops_the_least_relevant_to_fit(open_memory: StoreFactory) -> None:
    store = open_memory()
    best = await store.put(NS, "tea tea green tea " + "x" * 10)
    await store.put(NS, "tea " + "y" * 400)
    agent, model = agent_on(store, [reply("ok")], auto_recall=5, recall_tokens=40)
    await agent.run("green tea", deps="ada")
    system = model.requests[0].system or ""
    assert best.id in system and "yyyy" not in system


async def test_the_recall_block_counts_in_the_window(open_memory: StoreFactory) -> None:
    store = open_memory()
    await store.put(NS, "tea " + "z" * 3000)
    config = RunConfig(context_window=600)
    agent, model = agent_on(store, [reply("ok")], auto_recall=5, recall_tokens=5000, config=config)
    with pytest.raises((ContextExceeded, CompactionStalled)):
        await agent.run("tea?", deps="ada")
    assert model.requests == []
    plain, _ = agent_on(store, [reply("ok")], config=config)
    assert (await plain.run("tea?", deps="ada")).output == "ok"


async def test_a_store_failure_in_auto_recall_is_hard_before_any_request() -> None:
    agent, model = agent_on(BrokenStore(), [reply("never")], auto_recall=3)
    with pytest.raises(MemoryBackendError):
        await agent.run("tea?", deps="ada")
    assert model.requests == []
