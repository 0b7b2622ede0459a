"""The engine's context step: thresholds, no-progress guard, overflow salvage, window promise."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentloop import Agent, Hook, Message, ModelRequest, RunConfig, tool
from agentloop.errors import (
    Cancelled,
    CompactionFailed,
    CompactionStalled,
    ContextExceeded,
    ContextLengthExceeded,
    ProviderTimeout,
)
from agentloop.testing import FunctionModel, RecordingObserver, ScriptedModel, call, reply
from agentloop.tokens import HeuristicTokenCounter, TokenCounter, estimate_request


class CharCounter:
    """One token per character of text and result content; no framing, no overhead."""

    def count_text(self, text: str) -> int:
        return len(text)

    def count_message(self, message: Message) -> int:
        return (
            len(message.text)
            + sum(len(r.content) for r in message.tool_results_parts)
            + sum(len(c.name) for c in message.tool_calls)
        )


class Shrinker:
    """Replaces the transcript with one short user message; records each call."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        self.calls.append(len(messages))
        return [Message.user("summary")]


class Unchanged:
    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        return list(messages)


def config(**kwargs: Any) -> RunConfig:
    base: dict[str, Any] = {
        "context_window": 8000,
        "compact_threshold": 0.8,
        "token_counter": CharCounter(),
        "compactor": Shrinker(),
    }
    base.update(kwargs)
    return RunConfig(**base)


@pytest.mark.parametrize(
    ("size", "auto", "compacts"),
    [
        (6400, True, False),
        (6401, True, True),
        (7599, False, False),
        (7600, False, True),
    ],
)
async def test_threshold_and_emergency_lines(size: int, auto: bool, compacts: bool) -> None:
    shrinker = Shrinker()
    model = ScriptedModel([reply("ok")])
    agent = Agent(model, config=config(auto_compact=auto, compactor=shrinker))
    await agent.run("x" * size)
    assert bool(shrinker.calls) is compacts
    sent = model.requests[0].messages
    assert (sent[0].text == "summary") is compacts


async def test_zero_window_never_compacts() -> None:
    shrinker = Shrinker()
    model = ScriptedModel([reply("ok")])
    await Agent(model, config=config(context_window=0, compactor=shrinker)).run("x" * 50_000)
    assert shrinker.calls == []


async def test_compaction_is_a_commit_point(recorder: RecordingObserver) -> None:
    from agentloop.errors import ProviderUnavailable

    model = ScriptedModel([ProviderUnavailable("down")])
    agent = Agent(model, config=config(), observers=[recorder])
    with pytest.raises(ProviderUnavailable):
        await agent.run("x" * 7000)
    assert [m.text for m in agent.history] == ["summary"]
    assert recorder.of("on_compaction")[0][1:] == (7000, 7)


async def test_no_progress_guard_stops_without_sending() -> None:
    model = ScriptedModel([reply("never")])
    agent = Agent(model, config=config(compactor=Unchanged()))
    with pytest.raises(CompactionStalled) as info:
        await agent.run("x" * 7700)
    assert info.value.used >= info.value.limit == 7700
    assert model.requests == [] and agent.history == []
    assert agent.current_run is not None and agent.current_run.unfinished_input == "x" * 7700


async def test_a_declining_threshold_pass_defers_while_it_still_fits() -> None:
    model = ScriptedModel([reply("ok")])
    run = await Agent(model, config=config(compactor=Unchanged())).run("x" * 7000)
    assert run.output == "ok"


async def test_pre_compact_hook_veto_is_a_no_op_pass() -> None:
    class Veto(Hook):
        async def pre_compact(self, messages: Sequence[Message], estimate: int) -> bool:
            return False

    shrinker = Shrinker()
    agent = Agent(ScriptedModel([reply("x")]), config=config(compactor=shrinker), hooks=[Veto()])
    with pytest.raises(CompactionStalled):
        await agent.run("x" * 7700)
    assert shrinker.calls == []


async def test_a_raising_compactor_is_compaction_failed_and_salvages_the_prefix(
    recorder: RecordingObserver,
) -> None:
    class Broken:
        async def compact(self, messages: Any, *, target_tokens: int, counter: Any) -> Any:
            raise RuntimeError("summariser down")

    @tool
    def big() -> str:
        """Big output."""
        return "y" * 7000

    model = ScriptedModel([call("big"), reply("never")])
    agent = Agent(model, tools=[big], config=config(compactor=Broken()), observers=[recorder])
    with pytest.raises(CompactionFailed) as info:
        await agent.run("go")
    assert isinstance(info.value.cause, RuntimeError)
    assert len(agent.history) == 3 and len(model.requests) == 1
    assert len(recorder.of("on_compaction_failed")) == 1


async def test_a_result_that_still_does_not_fit_is_context_exceeded() -> None:
    class Grows:
        async def compact(self, messages: Any, *, target_tokens: int, counter: Any) -> Any:
            return [Message.user("z" * 8500)]

    agent = Agent(ScriptedModel([reply("x")]), config=config(compactor=Grows()))
    with pytest.raises(ContextExceeded) as info:
        await agent.run("x" * 9000)
    assert (info.value.used, info.value.limit) == (8500, 8000)


async def test_overflow_salvage_compacts_once_and_retries_the_turn() -> None:
    shrinker = Shrinker()
    model = ScriptedModel(
        [
            call("noop"),
            ContextLengthExceeded("prompt is too long: 9000 tokens > 8000 maximum"),
            reply("fits now"),
        ]
    )

    @tool
    def noop() -> str:
        """Nothing."""
        return "done"

    run = await Agent(model, tools=[noop], config=config(compactor=shrinker)).run("go")
    assert run.output == "fits now" and shrinker.calls == [3]
    assert model.requests[2].messages[0].text == "summary"


async def test_a_second_rejection_is_context_exceeded_and_commits_nothing() -> None:
    model = ScriptedModel(
        [
            call("noop"),
            ContextLengthExceeded("prompt is too long"),
            ContextLengthExceeded("prompt is too long"),
        ]
    )

    @tool
    def noop() -> str:
        """Nothing."""
        return "done"

    class KeepsTwo:
        async def compact(self, messages: Any, *, target_tokens: int, counter: Any) -> Any:
            return list(messages)[:1]

    agent = Agent(model, tools=[noop], config=config(compactor=KeepsTwo()))
    with pytest.raises(ContextExceeded) as info:
        await agent.run("go")
    assert info.value.used >= 8001 and info.value.limit == 8000
    assert isinstance(info.value.__cause__, ContextLengthExceeded)
    assert [m.text for m in agent.history] == ["go"]  # the compaction committed; nothing else
    assert agent.current_run is not None and agent.current_run.unfinished_input == "go"


async def test_a_context_deadline_transient_does_not_take_the_salvage_path() -> None:
    shrinker = Shrinker()
    model = ScriptedModel([ProviderTimeout("context deadline exceeded")])
    with pytest.raises(ProviderTimeout):
        await Agent(model, config=config(compactor=shrinker)).run("go")
    assert shrinker.calls == []


async def test_cancel_during_compaction() -> None:
    class Slow:
        async def compact(self, messages: Any, *, target_tokens: int, counter: Any) -> Any:
            agent.cancel()
            await asyncio.sleep(30)
            return [Message.user("s")]

    agent = Agent(ScriptedModel([reply("x")]), config=config(compactor=Slow()))
    with pytest.raises(Cancelled):
        await asyncio.wait_for(agent.run("x" * 7000), 2)
    assert agent.history == []


async def test_no_request_over_the_window_is_ever_sent_in_a_300_turn_run() -> None:
    window = 8000
    counter = HeuristicTokenCounter()
    sizes: list[int] = []

    @tool
    def fetch(page: int) -> str:
        """Fetch a big page."""
        return f"page {page}: " + "lorem ipsum dolor sit amet " * 60

    def respond(request: ModelRequest) -> Any:
        size = estimate_request(
            request.messages, system=request.system, tools=request.tools, counter=counter
        )
        sizes.append(size)
        assert size <= window
        turn = len(sizes)
        return call("fetch", {"page": turn}) if turn < 300 else reply("read everything")

    agent = Agent(
        FunctionModel(respond),
        tools=[fetch],
        system="You read pages.",
        config=RunConfig(context_window=window, max_turns=400),
    )
    run = await agent.run("read 300 pages")
    assert run.output == "read everything" and len(sizes) == 300
    assert max(sizes) <= window and max(sizes) > window * 0.5


async def test_an_empty_final_reply_is_not_committed() -> None:
    model = ScriptedModel([reply(""), reply("second")])
    agent = Agent(model)
    run = await agent.run("one")
    assert run.output == ""
    await agent.run("two")
    assert [m.text for m in agent.history] == ["one", "two", "second"]
