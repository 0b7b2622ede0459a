"""Media through the engine (SPEC 16): input as text and media, a tool returning media, the soft
error when the provider cannot take a kind, the store and the continuation journal.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, ToolOutput, tool
from agentloop.engine.journal import output_entry, replayed_output
from agentloop.errors import InvalidInput
from agentloop.messages import AudioPart, ImagePart, Message, TextPart, input_text
from agentloop.model import ModelRequest, media_kinds
from agentloop.run import Run
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 40


async def test_input_may_hold_text_and_media_and_the_run_keeps_it() -> None:
    image = ImagePart(PNG)
    model = ScriptedModel([reply("a chart")])
    run = await Agent(model).run(["What is this?", image])
    assert run.input == ("What is this?", image)
    [request] = model.requests
    assert request.messages[-1] == Message("user", (TextPart("What is this?"), image))
    again = Run.from_dict(run.to_dict())
    assert again.input == run.input and again == run
    assert input_text(run.input).startswith("What is this? [image: image/png, 208 bytes")


@pytest.mark.parametrize("bad", [42, b"bytes", [], ["ok", 3], [Message.user("x")], None])
async def test_any_other_input_is_invalid_input_naming_what_fits(bad: Any) -> None:
    agent = Agent(ScriptedModel([reply("never")]))
    with pytest.raises(InvalidInput, match="str or a sequence of str and media parts"):
        await agent.run(bad)
    with pytest.raises(InvalidInput, match="str or a sequence"):
        agent.stream(bad)
    assert agent.runs == []


def _words() -> Any:
    yield "hello"


@pytest.mark.parametrize(
    ("bad", "fix"),
    [
        ({"hello": 1, "world": 2}, "a dict would run its keys"),
        ({"hello", "world"}, "a set has no order: pass a list"),
        (frozenset({"hello"}), "a set has no order"),
        (bytearray(b"hello"), "media bytes go in a part: ImagePart(data)"),
        (memoryview(b"hello"), "media bytes go in a part"),
        (_words(), "a one-shot generator: pass list(...) of it"),
        (iter(["hello"]), "a one-shot list_iterator"),
        (ImagePart(PNG), "put the part in a list: ['what is this?', part]"),
    ],
    ids=["dict", "set", "frozenset", "bytearray", "memoryview", "generator", "iterator", "part"],
)
def test_a_dict_a_set_bytes_an_iterator_or_a_lone_part_is_refused_naming_the_fix(
    bad: Any, fix: str
) -> None:
    """SPEC 16: a str or a sequence; a dict used to run its keys, a generator to run empty."""
    model = ScriptedModel([reply("never")])
    agent = Agent(model)
    starts = (
        lambda: asyncio.run(agent.run(bad)),
        lambda: agent.stream(bad),
        lambda: agent.run_sync(bad),
    )
    for start in starts:
        with pytest.raises(InvalidInput, match="str or a sequence of str and media parts") as e:
            start()
        assert fix in str(e.value)
    assert agent.runs == [] and model.requests == []
    agent.close()


async def test_a_tuple_and_any_other_sequence_still_run() -> None:
    from collections import UserList

    model = ScriptedModel([reply("one"), reply("two")])
    agent = Agent(model)
    assert (await agent.run(("hello", ImagePart(PNG)))).output == "one"
    assert (await agent.run(UserList(["hello"]))).output == "two"
    assert [r.input for r in agent.runs] == [("hello", ImagePart(PNG)), ("hello",)]


async def test_a_tool_returning_media_hands_it_to_the_model() -> None:
    chart = ImagePart(PNG)

    @tool
    def plot() -> Any:
        """Draw a chart."""
        return ["the chart:", chart]

    @tool
    def snap() -> ImagePart:
        """Take a screenshot."""
        return chart

    model = ScriptedModel([[call("plot", {}), call("snap", {})], reply("done")])
    run = await Agent(model, tools=[plot, snap]).run("go")
    first, second = run.turns[0].tool_results
    assert (first.content, first.media) == ("the chart:", (chart,))
    assert (second.content, second.media) == ("", (chart,))
    sent = model.requests[1].messages[-1].tool_results_parts
    assert [r.media for r in sent] == [(chart,), (chart,)]


async def test_a_list_of_plain_values_stays_json() -> None:
    @tool
    def numbers() -> list[int]:
        """Numbers."""
        return [1, 2]

    run = await Agent(ScriptedModel([call("numbers", {}), reply("ok")]), tools=[numbers]).run("x")
    assert run.turns[0].tool_results[0].content == "[1, 2]"


class NoAudio(ScriptedModel):
    accepts_media = frozenset({"image", "document"})


async def test_media_the_provider_cannot_take_is_a_soft_error() -> None:
    @tool
    def record() -> ToolOutput:
        """Record a sound."""
        return ToolOutput(["a clip", AudioPart(WAV)])

    model = NoAudio([call("record", {}), reply("ok")])
    assert media_kinds(model) == {"image", "document"}
    run = await Agent(model, tools=[record]).run("x")
    [result] = run.turns[0].tool_results
    assert result.is_error and result.media == ()
    assert result.content == "tool 'record' returned audio, which scripted cannot take"
    assert run.output == "ok"


async def test_media_round_trips_through_the_store(tmp_path: Path) -> None:
    image = ImagePart(PNG)

    @tool
    def snap() -> ImagePart:
        """Take a screenshot."""
        return image

    with SQLiteStore(tmp_path / "m.db") as store:
        agent = Agent(
            ScriptedModel([call("snap", {}), reply("ok")]),
            tools=[snap],
            store=store,
            session_id="s",
        )
        await agent.run(["look", image])
        history = agent.history
    with SQLiteStore(tmp_path / "m.db") as store:
        resumed = Agent.resume("s", store=store, client=ScriptedModel([]))
        assert resumed.history == history
        assert resumed.runs[0].input == ("look", image)
        stored = resumed.history[-2].tool_results_parts[0].media[0]
        assert stored.data == PNG and stored.sha256 == image.sha256


def test_the_journal_replays_a_tools_media() -> None:
    image = ImagePart(PNG)
    for output in (image, ["text", image], ToolOutput([image], is_error=True)):
        entry = output_entry(output)
        assert entry is not None
        replayed = replayed_output(entry)
        from agentloop.tools import split_output

        value = replayed.content if isinstance(replayed, ToolOutput) else replayed
        original = output.content if isinstance(output, ToolOutput) else output
        assert split_output(value) == split_output(original)


def test_a_request_is_a_model_request() -> None:
    assert ModelRequest(messages=[Message.from_input(["a", ImagePart(PNG)])]).messages


async def test_a_2_mb_image_in_a_32k_window_does_not_compact_and_old_media_go_first() -> None:
    from agentloop import RunConfig
    from agentloop.events import Compacted, Event
    from agentloop.observers import Observer

    seen: list[Event] = []

    class Watch(Observer):
        def on_event(self, event: Event) -> None:
            seen.append(event)

    big = ImagePart(PNG + b"\x00" * (2 * 1024 * 1024))
    config = RunConfig(context_window=32_000)
    agent = Agent(ScriptedModel([reply("ok")]), config=config, observers=[Watch()])
    await agent.run(["describe", big])
    assert not any(isinstance(e, Compacted) for e in seen)

    from agentloop.context import without_old_media

    old = [Message.from_input(["a", big]), Message.assistant("seen"), Message.user("next")]
    light = without_old_media(old, keep_recent=2)
    assert light is not None and light[1:] == old[1:]
    assert light[0].parts[0] == TextPart("a") and "removed to fit" in light[0].text
    assert without_old_media(old[1:]) is None
