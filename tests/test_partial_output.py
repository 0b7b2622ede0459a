"""Partial typed output (SPEC 18): ``PartialOutput`` while a typed answer streams.

The parser (``engine/partial.py``) on its own: any JSON split anywhere gives partials that only
grow and end at the value; its cost stays linear. Then the engine: tool and native mode over the
real OpenAI-compatible fake server (streamed SSE) and over ``ScriptedModel``'s streams; a
pydantic model, a wrapped ``list[str]``, an invalid answer then a valid one, a retried stream,
an answer an output guardrail withholds; nothing for untyped or unstreamed runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import pydantic
import pydantic_core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agentloop import Agent, Observer, RunConfig
from agentloop.engine import partial
from agentloop.engine.partial import EAGER_CHARS, GROWTH, UNCHANGED, PartialJson
from agentloop.events import (
    AttemptReset,
    Event,
    ModelResponded,
    PartialOutput,
    TextDelta,
    ToolCallDelta,
    TurnFinished,
)
from agentloop.guardrails import OutputGuardrail
from agentloop.providers.openai import OpenAIClient
from agentloop.providers.retrying import RetryingClient
from agentloop.testing import (
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
    Fault,
    ScriptedModel,
    call,
    reply,
)

# -- what "only grows" means ---------------------------------------------------------------------


def extends(before: Any, after: Any) -> bool:
    """``after`` is ``before`` grown at its end: keys and items only added, only the last open."""
    if isinstance(before, dict):
        if not isinstance(after, dict) or list(after)[: len(before)] != list(before):
            return False
        keys = list(before)
        if any(before[k] != after[k] for k in keys[:-1]):
            return False
        return not keys or extends(before[keys[-1]], after[keys[-1]])
    if isinstance(before, list):
        if not isinstance(after, list) or len(after) < len(before):
            return False
        if not before:
            return True
        if before[:-1] != after[: len(before) - 1]:
            return False
        return extends(before[-1], after[len(before) - 1])
    if isinstance(before, str):
        return isinstance(after, str) and after.startswith(before)
    return type(before) is type(after) and before == after


def partials_of(text: str, cuts: list[int], *, fenced: bool = False) -> list[Any]:
    """Feed ``text`` cut at ``cuts``; every value the parser gave, the flush's last."""
    parser = PartialJson(fenced=fenced)
    bounds = [0, *sorted(set(cuts)), len(text)]
    values = [parser.feed(text[a:b]) for a, b in itertools.pairwise(bounds)]
    values.append(parser.flush())
    return [v for v in values if v is not UNCHANGED]


def assert_grows(values: list[Any]) -> None:
    for before, after in itertools.pairwise(values):
        assert before != after, "a partial is emitted only when the value grew"
        assert extends(before, after), (before, after)


# -- the parser on its own -----------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    value=json_objects,
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=40),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 2]),
)
def test_any_object_split_anywhere_only_grows_and_ends_at_its_value(
    value: dict[str, Any], cuts: list[int], ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    values = partials_of(text, [c for c in cuts if c < len(text)])
    assert values, "a whole object always gives a value"
    assert_grows(values)
    assert values[-1] == value


@settings(max_examples=80, deadline=None)
@given(value=json_objects, step=st.integers(min_value=1, max_value=7))
def test_every_character_its_own_fragment(value: dict[str, Any], step: int) -> None:
    text = json.dumps(value)
    values = partials_of(text, list(range(step, len(text), step)))
    assert_grows(values)
    assert values[-1] == value


def test_a_number_at_the_end_waits_for_what_follows_it() -> None:
    parser = PartialJson()
    assert parser.feed('{"n": 1') == {}
    assert parser.feed("2") is UNCHANGED  # 12 or 123...: not yet
    assert parser.feed("3,") == {"n": 123}
    assert parser.feed(' "ok": tr') is UNCHANGED  # a partial literal is left out
    assert parser.feed("ue}") == {"n": 123, "ok": True}


def test_strings_grow_by_their_end_escapes_included() -> None:
    text = json.dumps({"s": 'caf\u00e9 \U0001f600 "q" \\ end'}, ensure_ascii=True)
    values = partials_of(text, list(range(1, len(text))))
    assert_grows(values)
    assert values[-1] == {"s": 'café 😀 "q" \\ end'}


def test_a_fenced_answer_is_read_past_its_fence() -> None:
    text = '```json\n{"a": [1, 2], "b": "x"}\n```'
    values = partials_of(text, list(range(1, len(text))), fenced=True)
    assert_grows(values)
    assert values[-1] == {"a": [1, 2], "b": "x"}


def test_prose_is_no_value() -> None:
    assert partials_of("I think the answer is 42.", [3, 9], fenced=True) == []


def test_a_reset_starts_over() -> None:
    parser = PartialJson()
    assert parser.feed('{"a": "first') == {"a": "first"}
    parser.reset()
    assert parser.feed('{"b": 1}') == {"b": 1}


def test_parsing_a_long_answer_costs_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each parse reads the whole text; the throttle keeps the sum linear, not O(n^2)."""
    read: list[int] = []
    real = pydantic_core.from_json

    def counting(data: str, **kwargs: Any) -> Any:
        read.append(len(data))
        return real(data, **kwargs)

    monkeypatch.setattr(partial, "from_json", counting)
    value = {"items": [f"item number {i} of a long answer" for i in range(10_000)]}
    text = json.dumps(value)
    parser = PartialJson()
    values = [parser.feed(text[i : i + 4]) for i in range(0, len(text), 4)]
    values.append(parser.flush())
    grown = [v for v in values if v is not UNCHANGED]
    assert_grows(grown)  # throttled past EAGER_CHARS, and still only growing
    assert grown[-1] == value
    n = len(text)
    eager = EAGER_CHARS * EAGER_CHARS // 4  # every 4-char fragment of the first EAGER_CHARS
    assert sum(read) <= (GROWTH + 2) * n + eager, (sum(read), n)
    assert len(read) < 2 * GROWTH * 10 + EAGER_CHARS // 4  # parses grow geometrically


# -- the engine ----------------------------------------------------------------------------------


class City(BaseModel):
    """A city."""

    name: str
    population: int
    rivers: list[str] = []


@dataclasses.dataclass
class Point:
    x: int
    y: int


PARIS = {"name": "Paris, on the Seine", "population": 2_100_000, "rivers": ["Seine", "Bièvre"]}


async def streamed(agent: Agent[Any], prompt: str = "go") -> tuple[list[Event], Any]:
    async with agent.stream(prompt) as events:
        seen = [event async for event in events]
    return seen, events.run


def partial_values(events: list[Event], turn: int | None = None) -> list[Any]:
    return [
        e.value
        for e in events
        if isinstance(e, PartialOutput) and (turn is None or e.turn_index == turn)
    ]


def assert_before_the_reply(events: list[Event]) -> None:
    """Every partial comes after a fragment of its turn and before that turn's reply."""
    for i, event in enumerate(events):
        if isinstance(event, PartialOutput):
            earlier = [e for e in events[:i] if e.turn_index == event.turn_index]
            assert any(isinstance(e, ToolCallDelta | TextDelta) for e in earlier)
            assert not any(isinstance(e, ModelResponded) for e in earlier)


async def test_tool_mode_streams_a_pydantic_answer_as_it_grows() -> None:
    agent = Agent(ScriptedModel([call("final_result", PARIS)]), output_type=City)
    events, run = await streamed(agent)
    values = partial_values(events)
    assert len(values) > 5
    assert_grows(values)
    assert values[-1] == run.output.model_dump() == PARIS
    assert_before_the_reply(events)
    assert all(e.run_id == run.id and e.turn == 0 for e in events if isinstance(e, PartialOutput))


async def test_the_last_partial_is_the_validated_value_defaults_and_coercions_included() -> None:
    agent = Agent(
        ScriptedModel([call("final_result", {"population": "12", "name": "Hamlet"})]),
        output_type=City,
    )
    events, run = await streamed(agent)
    values = partial_values(events)
    assert values[-2] == {"population": "12", "name": "Hamlet"}  # as the model wrote it
    assert (
        values[-1] == run.output.model_dump() == {"name": "Hamlet", "population": 12, "rivers": []}
    )


async def test_a_dataclass_answer_ends_as_a_plain_dict() -> None:
    agent = Agent(ScriptedModel([call("final_result", {"x": 1, "y": 2})]), output_type=Point)
    events, run = await streamed(agent)
    assert run.output == Point(1, 2)
    assert partial_values(events)[-1] == {"x": 1, "y": 2}


async def test_a_wrapped_list_of_str_streams_unwrapped() -> None:
    words = ["alpha", "beta", "gamma", "delta"]
    agent = Agent(ScriptedModel([call("final_result", {"result": words})]), output_type=list[str])
    events, run = await streamed(agent)
    values = partial_values(events)
    assert all(isinstance(v, list) for v in values)
    assert_grows(values)
    assert values[-1] == run.output == words


async def test_an_invalid_answer_streams_then_reads_invalid_output_then_a_valid_one() -> None:
    model = ScriptedModel(
        [call("final_result", {"name": "Lyon", "population": "many"}), call("final_result", PARIS)]
    )
    events, run = await streamed(Agent(model, output_type=City))
    first = partial_values(events, turn=0)
    assert first[-1] == {"name": "Lyon", "population": "many"}  # no accepted value: no final
    finished = next(e for e in events if isinstance(e, TurnFinished))
    (soft,) = finished.turn.tool_results
    assert soft.is_error and soft.content.startswith("Invalid output: population:")
    assert events.index(finished) > max(
        i for i, e in enumerate(events) if isinstance(e, PartialOutput) and e.turn_index == 0
    )
    second = partial_values(events, turn=1)
    assert_grows(second)
    assert second[-1] == run.output.model_dump() == PARIS


async def test_text_mode_streams_the_json_of_the_reply() -> None:
    text = "```json\n" + json.dumps(PARIS) + "\n```"
    agent = Agent(
        ScriptedModel([reply(text)]), output_type=City, config=RunConfig(output_mode="text")
    )
    events, run = await streamed(agent)
    values = partial_values(events)
    assert_grows(values)
    assert values[-1] == run.output.model_dump() == PARIS
    assert_before_the_reply(events)


def lookup(q: str) -> str:
    """Look something up."""
    return f"{q}: a city"


async def test_tool_calls_before_the_answer_are_not_the_answer() -> None:
    agent = Agent(
        ScriptedModel([call("lookup", {"q": "Paris"}), call("final_result", PARIS)]),
        output_type=City,
        tools=[lookup],
    )
    events, _ = await streamed(agent)
    assert partial_values(events, turn=0) == []
    assert partial_values(events, turn=1)[-1] == PARIS


class Everything(Observer):
    def __init__(self) -> None:
        self.events: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.events.append(event)


async def test_untyped_and_unstreamed_runs_have_no_partials() -> None:
    untyped = Everything()
    agent = Agent(ScriptedModel([reply('{"a": 1}')]), observers=[untyped])
    events, _ = await streamed(agent)
    assert partial_values(events) == []
    unstreamed = Everything()
    typed = Agent(
        ScriptedModel([call("final_result", PARIS)]), output_type=City, observers=[unstreamed]
    )
    run = await typed.run("go")
    assert run.output.model_dump() == PARIS
    assert partial_values(unstreamed.events) == [] and unstreamed.events


async def test_run_with_stream_true_tells_observers_too() -> None:
    seen = Everything()
    agent = Agent(
        ScriptedModel([call("final_result", PARIS)]),
        output_type=City,
        observers=[seen],
        config=RunConfig(stream=True),
    )
    await agent.run("go")
    assert partial_values(seen.events)[-1] == PARIS


async def test_a_withheld_answer_sends_no_partials() -> None:
    def no_lyon(ctx: Any, value: City) -> str | None:
        return "not Lyon" if value.name == "Lyon" else None

    model = ScriptedModel(
        [call("final_result", {"name": "Lyon", "population": 1}), call("final_result", PARIS)]
    )
    agent = Agent(model, output_type=City, guardrails=[OutputGuardrail(no_lyon, retry=True)])
    events, run = await streamed(agent)
    values = partial_values(events)
    assert values and all("Lyon" not in json.dumps(v) for v in values)
    assert values[-1] == run.output.model_dump() == PARIS


# -- over the wire: the real fake server, streamed SSE -------------------------------------------


def openai_at(server: FakeProviderServer) -> OpenAIClient:
    return OpenAIClient("fake-model", api_key="k", base_url=server.base_url)


async def test_tool_mode_over_sse() -> None:
    async with FakeProviderServer(
        [FakeReply(tool_calls=[FakeToolCall("final_result", PARIS)])]
    ) as server:
        async with openai_at(server) as client:
            events, run = await streamed(Agent(client, output_type=City))
    assert server.received[0].body["stream"] is True
    values = partial_values(events)
    assert len(values) > 5
    assert_grows(values)
    assert values[-1] == run.output.model_dump() == PARIS


async def test_native_mode_over_sse_with_a_list_of_str() -> None:
    words = ["north", "south", "east", "west"]
    async with FakeProviderServer([FakeReply(json.dumps(words))]) as server:
        async with openai_at(server) as client:
            agent = Agent(client, output_type=list[str], config=RunConfig(output_mode="native"))
            events, run = await streamed(agent)
    assert "response_format" in server.received[0].body  # native: the reply text is the JSON
    values = partial_values(events)
    assert_grows(values)
    assert values[-1] == run.output == words


async def test_native_mode_over_sse_starts_over_after_a_retried_stream() -> None:
    async def no_sleep(_: float) -> None:
        return None

    first = json.dumps({"name": "Lyon, cut short by a dropped stream", "population": 5})
    script: list[FakeReply | Fault] = [
        Fault.truncate(FakeReply(first)),
        FakeReply(json.dumps(PARIS)),
    ]
    async with FakeProviderServer(script) as server:
        client = RetryingClient(openai_at(server), replay_streams=True, sleep=no_sleep)
        async with client:
            agent = Agent(client, output_type=City, config=RunConfig(output_mode="native"))
            events, run = await streamed(agent)
    reset = next(i for i, e in enumerate(events) if isinstance(e, AttemptReset))
    before, after = partial_values(events[:reset]), partial_values(events[reset:])
    assert before and all(v.get("name", "Lyon").startswith("Lyon") for v in before)
    assert_grows(after)
    assert after[-1] == run.output.model_dump() == PARIS


async def test_a_str_answer_in_text_mode_is_its_text_deltas_then_one_partial() -> None:
    text = '[1] "quoted" prose, not JSON'
    agent = Agent(
        ScriptedModel([reply(text)]), output_type=str, config=RunConfig(output_mode="text")
    )
    events, run = await streamed(agent)
    assert run.output == text
    assert partial_values(events) == [text]


class Stamp(BaseModel):
    at: str

    @pydantic.field_serializer("at")
    def broken(self, at: str) -> str:
        raise RuntimeError("serializer bug")


async def test_a_serializer_bug_costs_the_final_partial_not_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = Agent(ScriptedModel([call("final_result", {"at": "noon"})]), output_type=Stamp)
    events, run = await streamed(agent)
    assert run.output == Stamp(at="noon")
    assert partial_values(events)[-1] == {"at": "noon"}  # as parsed; no final value
    assert "no final PartialOutput" in caplog.text
