"""The streamed turn's path (issue 26): the test double's chunks, the engine's streamed model
call, and a stream's buffer read in bursts. No test here sleeps: ``sleep(0)`` only yields."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentloop import Agent, CancelToken, Observer, RunConfig, StreamEvent, tool
from agentloop import events as ev
from agentloop.errors import Cancelled, ResponseInvalid
from agentloop.messages import Message
from agentloop.model import ModelRequest, ModelResponse
from agentloop.testing import ScriptedModel, call, reply

REQUEST = ModelRequest(messages=(Message.user("go"),))


@tool
async def echo(text: str) -> str:
    """Echo (async: no worker thread, so a run finishes within a few loop iterations)."""
    return text


class Collect(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"key": "k1"},
        {"a": "x", "b": "y", "c": ""},
        {"quote": 'say "hi"\\', "control": "tab\there\nnew\x00", "wide": "日本語 ✓ \U0001f600"},
        {"n": 1, "f": 1.5, "b": True, "none": None},
        {"nested": {"list": [1, "two"]}, "text": "t"},
        {"key": "v", "later": 3},
    ],
)
async def test_the_double_streams_json_dumps_of_the_arguments(arguments: dict[str, Any]) -> None:
    model = ScriptedModel([call("f", arguments, id="c1")])
    chunks = [e async for e in model.stream(REQUEST)]
    header, *rest, done = chunks
    assert header.kind == "tool_call_delta" and header.arguments == ""
    assert (header.index, header.call_id, header.name) == (0, "c1", "f")
    text = json.dumps(dict(arguments))
    assert [c.arguments for c in rest] == [text[i : i + 8] for i in range(0, len(text), 8)]
    assert all(c.kind == "tool_call_delta" and c.name is None for c in rest)
    assert done.kind == "done" and done.response is not None
    assert done.response.tool_calls[0].arguments == arguments


async def test_arguments_json_cannot_encode_raise_as_before() -> None:
    model = ScriptedModel([call("f", {"key": object()})])
    with pytest.raises(TypeError, match="not JSON serializable"):
        [e async for e in model.stream(REQUEST)]


class Chunks:
    """A stream that is not a generator: its ``aclose`` must still be awaited."""

    def __init__(self, events: list[StreamEvent]) -> None:
        self.events = events
        self.closed = False

    def __aiter__(self) -> Chunks:
        return self

    async def __anext__(self) -> StreamEvent:
        if not self.events:
            raise StopAsyncIteration
        return self.events.pop(0)

    async def aclose(self) -> None:
        self.closed = True


class IteratorModel(ScriptedModel):
    def __init__(self, events: list[StreamEvent]) -> None:
        super().__init__([])
        self.made = Chunks(events)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self.made


async def test_a_finished_stream_object_is_still_closed() -> None:
    done = StreamEvent("done", response=ModelResponse(Message.assistant("hi")))
    model = IteratorModel([StreamEvent("text_delta", text="hi"), done])
    agent = Agent(model, config=RunConfig(stream=True))
    assert (await agent.run("go")).output == "hi"
    assert model.made.closed


async def test_a_stream_without_its_terminal_event_is_invalid() -> None:
    model = IteratorModel([StreamEvent("text_delta", text="hi")])
    agent = Agent(model, config=RunConfig(stream=True))
    with pytest.raises(ResponseInvalid, match="the stream ended without its terminal event"):
        await agent.run("go")
    assert model.made.closed


async def test_a_generator_left_mid_stream_is_closed_and_the_run_cancelled() -> None:
    closed = []
    token = CancelToken()

    class Stalled(ScriptedModel):
        async def stream(self, request: ModelRequest) -> Any:
            try:
                yield StreamEvent("text_delta", text="one")
                yield StreamEvent("text_delta", text="two")  # the cancel check stops here
                yield StreamEvent("done", response=ModelResponse(Message.assistant("onetwo")))
            finally:
                closed.append(True)

    class Canceller(Observer):
        def on_event(self, event: ev.Event) -> None:
            if isinstance(event, ev.TextDelta):
                token.cancel()

    seen = Collect()
    agent = Agent(Stalled([]), observers=[seen, Canceller()])
    got: list[ev.Event] = []
    with pytest.raises(Cancelled):
        async with agent.stream("go", cancel=token) as events:
            async for event in events:
                got.append(event)
    assert closed == [True]
    assert [e.text for e in got if isinstance(e, ev.TextDelta)] == ["one"]
    assert got == seen.events and isinstance(got[-1], ev.RunFinished)


def burst_agent(seen: Collect) -> Agent[str | None]:
    steps = [call("echo", {"text": f"value {i}"}) for i in range(5)] + [reply("a long reply")]
    return Agent(ScriptedModel(steps), tools=[echo], observers=[seen])


async def test_a_burst_read_after_the_run_ended_is_whole_and_in_order() -> None:
    seen = Collect()
    agent = burst_agent(seen)
    async with agent.stream("go") as events:
        for _ in range(50):  # the run finishes while nobody reads
            await asyncio.sleep(0)
        assert events.run.ended_at is not None
        got = [e async for e in events]
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()
    deltas = [e for e in got if isinstance(e, ev.ToolCallDelta | ev.TextDelta)]
    assert got == seen.events and len(deltas) > 10
    assert isinstance(got[-1], ev.RunFinished) and got[-1].run.output == "a long reply"


async def test_a_consumer_yielding_after_each_event_sees_every_event() -> None:
    seen = Collect()
    agent = burst_agent(seen)
    got = []
    async with agent.stream("go") as events:
        async for event in events:
            got.append(event)
            await asyncio.sleep(0)  # the run goes on meanwhile: events queue up
    assert got == seen.events and isinstance(got[-1], ev.RunFinished)


async def test_a_consumer_waiting_on_an_empty_buffer_is_woken_in_order() -> None:
    gate = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait for the test."""
        await gate.wait()
        return "went on"

    seen = Collect()
    agent = Agent(ScriptedModel([call("wait"), reply("done")]), tools=[wait], observers=[seen])
    got = []
    async with agent.stream("go") as events:
        async for event in events:
            got.append(event)
            if isinstance(event, ev.ToolCallStarted):
                asyncio.get_running_loop().call_soon(gate.set)  # set while the reader waits
    assert got == seen.events and isinstance(got[-1], ev.RunFinished)
    assert got[-1].run.output == "done"
