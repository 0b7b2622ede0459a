"""One event channel (SPEC 10/12): typed events reach observers and streams alike."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agentloop import Agent, Observer, RetryingClient, RunConfig, tool
from agentloop import events as ev
from agentloop.errors import ProviderUnavailable
from agentloop.messages import ToolCallPart
from agentloop.run import Run
from agentloop.safety import Budget, LoopDetection
from agentloop.testing import ScriptedModel, call, reply


class Collect(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def kinds(events: list[ev.Event]) -> list[str]:
    return [type(e).__name__ for e in events]


async def test_a_tool_run_emits_the_events_in_order() -> None:
    seen = Collect()
    model = ScriptedModel([call("echo", {"text": "hi"}), reply("done")])
    run = await Agent(model, tools=[echo], observers=[seen]).run("go")
    assert kinds(seen.events) == [
        "RunStarted",
        "TurnStarted",
        "ModelResponded",
        "ToolCallRequested",
        "ToolCallStarted",
        "ToolCallFinished",
        "TurnFinished",
        "TurnStarted",
        "ModelResponded",
        "TurnFinished",
        "RunFinished",
    ]
    assert {e.run_id for e in seen.events} == {run.id}
    assert [e.turn for e in seen.events if isinstance(e, ev.TurnStarted)] == [0, 1]
    finished = [e for e in seen.events if isinstance(e, ev.TurnFinished)]
    assert [e.turn.index for e in finished] == [0, 1] and finished[0].turn is run.turns[0]
    done = next(e for e in seen.events if isinstance(e, ev.ToolCallFinished))
    assert done.result.content == "hi" and not done.result.is_error and done.attempt == 0
    assert done.duration >= 0 and done.turn == 0
    last = seen.events[-1]
    assert isinstance(last, ev.RunFinished) and last.run is run


async def test_events_are_frozen_and_carry_a_path() -> None:
    seen = Collect()
    await Agent(ScriptedModel([reply("x")]), observers=[seen]).run("go")
    event = seen.events[0]
    assert event.path == ()
    with pytest.raises(AttributeError):
        event.run_id = "other"  # type: ignore[misc]


async def test_streaming_forwards_text_and_tool_call_deltas() -> None:
    seen = Collect()
    model = ScriptedModel([call("echo", {"text": "a long argument"}), reply("a reply of words")])
    agent = Agent(model, tools=[echo], observers=[seen], config=RunConfig(stream=True))
    await agent.run("go")
    deltas = [e for e in seen.events if isinstance(e, ev.ToolCallDelta)]
    assert deltas[0].name == "echo" and deltas[0].index == 0 and deltas[0].call_id
    assert json.loads("".join(d.arguments_delta for d in deltas)) == {"text": "a long argument"}
    text = "".join(e.text for e in seen.events if isinstance(e, ev.TextDelta))
    assert text == "a reply of words"
    assert all(e.turn == 1 for e in seen.events if isinstance(e, ev.TextDelta))


async def test_a_hard_error_still_ends_with_run_finished() -> None:
    seen = Collect()
    model = ScriptedModel([ProviderUnavailable("down", provider="x")])
    with pytest.raises(ProviderUnavailable):
        await Agent(model, observers=[seen]).run("go")
    last = seen.events[-1]
    assert isinstance(last, ev.RunFinished)
    assert isinstance(last.run.stop_reason, ProviderUnavailable)


async def test_retries_become_retry_scheduled_events() -> None:
    seen = Collect()
    inner = ScriptedModel([ProviderUnavailable("down", provider="x"), reply("ok")])
    client = RetryingClient(inner, base_delay=0.0, jitter=0.0)
    await Agent(client, observers=[seen]).run("go")
    retry = next(e for e in seen.events if isinstance(e, ev.RetryScheduled))
    assert isinstance(retry.error, ProviderUnavailable) and retry.attempt == 1


async def test_loop_and_budget_warnings_are_events() -> None:
    seen = Collect()
    steps: list[Any] = [call("echo", {"text": "same"}) for _ in range(3)] + [reply("ok")]
    config = RunConfig(
        loop_detection=LoopDetection(warn_threshold=3, stop_threshold=0),
        budget=Budget(turns=4, soft_fraction=0.5),
    )
    await Agent(ScriptedModel(steps), tools=[echo], observers=[seen], config=config).run("go")
    loop = [e for e in seen.events if isinstance(e, ev.LoopWarning)]
    assert len(loop) == 1 and loop[0].repetitions == 3 and "echo" in loop[0].pattern
    budget = [e for e in seen.events if isinstance(e, ev.BudgetWarning)]
    assert [(b.dimension, b.limit) for b in budget] == [("turns", 4)]


async def test_legacy_observer_methods_receive_the_same_channel() -> None:
    calls: list[tuple[str, Any]] = []

    class Legacy(Observer):
        def on_tool_post(
            self, run: Run, call: ToolCallPart, result: Any, attempt: int, duration: float
        ) -> None:
            calls.append(("post", result.content))

        def on_run_end(self, run: Run) -> None:
            calls.append(("end", run.output))

    await Agent(
        ScriptedModel([call("echo", {"text": "x"}), reply("fin")]),
        tools=[echo],
        observers=[Legacy()],
    ).run("go")
    assert calls == [("post", "x"), ("end", "fin")]


async def test_an_observer_that_raises_is_logged_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Observer):
        def on_event(self, event: ev.Event) -> None:
            raise RuntimeError("observer bug")

    after = Collect()
    with caplog.at_level(logging.ERROR, logger="agentloop"):
        run = await Agent(ScriptedModel([reply("ok")]), observers=[Broken(), after]).run("go")
    assert run.output == "ok" and kinds(after.events)[-1] == "RunFinished"
    assert "observer bug" in caplog.text


async def test_no_observer_means_no_event_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    original = ev.ToolCallStarted.__init__

    def spy(self: ev.ToolCallStarted, *args: Any, **kwargs: Any) -> None:
        built.append("started")
        original(self, *args, **kwargs)

    monkeypatch.setattr(ev.ToolCallStarted, "__init__", spy)
    await Agent(ScriptedModel([call("echo", {"text": "x"}), reply("ok")]), tools=[echo]).run("go")
    assert built == []
    await Agent(
        ScriptedModel([call("echo", {"text": "x"}), reply("ok")]),
        tools=[echo],
        observers=[Collect()],
    ).run("go")
    assert built == ["started"]
