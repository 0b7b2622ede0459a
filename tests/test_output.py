"""Typed output (SPEC 12): the three modes, soft validation failures, the retry ceiling."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentloop import Agent, RunConfig, tool
from agentloop.errors import ConfigurationError, OutputValidationFailed
from agentloop.messages import Message, ToolCallPart
from agentloop.model import ModelRequest, ModelResponse
from agentloop.testing import ScriptedModel, call, reply
from agentloop.transcript import validate_transcript


class Invoice(BaseModel):
    """An invoice."""

    total: float
    currency: str


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


def last_feedback(request: ModelRequest) -> str:
    """The text the model read last: a tool result or a user message."""
    message = request.messages[-1]
    if message.role == "tool":
        return message.tool_results_parts[-1].content
    return message.text


def final_spec(request: ModelRequest) -> dict[str, object]:
    spec = next(s for s in request.tools if s.name == "final_result")
    return dict(spec.parameters)


async def test_tool_mode_returns_a_validated_pydantic_model() -> None:
    model = ScriptedModel([call("final_result", {"total": "12.5", "currency": "EUR"})])
    run = await Agent(model, output_type=Invoice).run("bill")
    assert run.output == Invoice(total=12.5, currency="EUR")
    assert final_spec(model.requests[0])["properties"] == {
        "total": {"title": "Total", "type": "number"},
        "currency": {"title": "Currency", "type": "string"},
    }


@pytest.mark.parametrize(
    ("output_type", "arguments", "expected"),
    [
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Movie, {"title": "Alien", "year": 1979}, {"title": "Alien", "year": 1979}),
        (int, {"result": 42}, 42),
        (list[str], {"result": ["a", "b"]}, ["a", "b"]),
    ],
)
async def test_every_kind_of_output_type(
    output_type: type, arguments: dict[str, object], expected: object
) -> None:
    model = ScriptedModel([call("final_result", arguments)])
    run = await Agent(model, output_type=output_type).run("go")
    assert run.output == expected


async def test_a_non_object_type_is_wrapped_in_one_field() -> None:
    model = ScriptedModel([call("final_result", {"result": [1]})])
    await Agent(model, output_type=list[int]).run("go")
    schema = final_spec(model.requests[0])
    assert schema["required"] == ["result"]
    assert schema["properties"] == {"result": {"items": {"type": "integer"}, "type": "array"}}


async def test_invalid_output_is_soft_and_written_for_the_model() -> None:
    model = ScriptedModel(
        [
            call("final_result", {"total": "lots"}),
            call("final_result", {"total": 3, "currency": "EUR"}),
        ]
    )
    run = await Agent(model, output_type=Invoice).run("bill")
    assert run.output == Invoice(total=3, currency="EUR")
    assert last_feedback(model.requests[1]) == (
        "Invalid output: total: Input should be a valid number, unable to parse string as a "
        "number; currency: Field required"
    )
    assert model.requests[1].messages[-1].tool_results_parts[0].is_error


async def test_a_plain_text_reply_in_tool_mode_is_asked_to_call_final_result() -> None:
    model = ScriptedModel(
        [reply("it is 3 EUR"), call("final_result", {"total": 3, "currency": "E"})]
    )
    run = await Agent(model, output_type=Invoice).run("bill")
    assert run.output is not None and run.output.total == 3
    assert model.requests[1].messages[-1] == Message.user(
        "Reply by calling 'final_result' with your answer."
    )


async def test_the_fourth_invalid_answer_raises_with_attempts_4() -> None:
    bad = call("final_result", {"total": "x", "currency": "E"})
    model = ScriptedModel([bad, reply("no"), bad, bad, call("final_result", {})])
    agent = Agent(model, output_type=Invoice)
    with pytest.raises(OutputValidationFailed) as caught:
        await agent.run("bill")
    assert caught.value.attempts == 4
    assert caught.value.errors.startswith("Invalid output: total:")
    assert not caught.value.is_recoverable()
    assert len(model.requests) == 4 and model.remaining == 1
    validate_transcript(agent.history)  # the in-flight fourth answer was dropped
    assert agent.current_run is not None and agent.current_run.output is None


async def test_output_retries_zero_raises_on_the_first_invalid_answer() -> None:
    model = ScriptedModel([reply("no")])
    agent = Agent(model, output_type=Invoice, config=RunConfig(output_retries=0))
    with pytest.raises(OutputValidationFailed) as caught:
        await agent.run("bill")
    assert caught.value.attempts == 1
    assert caught.value.errors == "Reply by calling 'final_result' with your answer."


def test_output_config_is_checked() -> None:
    with pytest.raises(ConfigurationError):
        RunConfig(output_retries=-1)
    with pytest.raises(ConfigurationError):
        RunConfig(output_mode="json")  # type: ignore[arg-type]


def test_a_tool_named_final_result_clashes_with_typed_output() -> None:
    @tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(ConfigurationError, match="final_result"):
        Agent(ScriptedModel([]), tools=[final_result], output_type=int)


async def test_history_after_a_typed_run_is_valid_to_send_again() -> None:
    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return q

    model = ScriptedModel(
        [
            call("lookup", {"q": "a"}),
            call("final_result", {"total": 1, "currency": "E"}),
            call("final_result", {"total": 2, "currency": "E"}),
        ]
    )
    agent = Agent(model, output_type=Invoice, tools=[lookup])
    await agent.run("one")
    validate_transcript(agent.history)
    assert agent.history[-1].tool_results_parts[0].content == "Final result accepted."
    run = await agent.run("two")
    assert run.output == Invoice(total=2, currency="E")
    validate_transcript(agent.history)


async def test_final_result_beside_other_tools_ends_the_run_without_running_them() -> None:
    ran: list[str] = []

    @tool
    def side_effect(x: int) -> str:
        """Do something."""
        ran.append("yes")
        return "done"

    model = ScriptedModel(
        [[call("side_effect", {"x": 1}), call("final_result", {"total": 1, "currency": "E"})]]
    )
    agent = Agent(model, output_type=Invoice, tools=[side_effect])
    run = await agent.run("go")
    assert ran == [] and run.output == Invoice(total=1, currency="E")
    results = agent.history[-1].tool_results_parts
    assert [r.content for r in results] == [
        "not executed: the run ended with 'final_result'",
        "Final result accepted.",
    ]
    validate_transcript(agent.history)


async def test_an_invalid_final_result_beside_other_tools_runs_them() -> None:
    ran: list[int] = []

    @tool
    def side_effect(x: int) -> str:
        """Do something."""
        ran.append(x)
        return "done"

    model = ScriptedModel(
        [
            [call("final_result", {"total": "?"}), call("side_effect", {"x": 1})],
            call("final_result", {"total": 1, "currency": "E"}),
        ]
    )
    agent = Agent(model, output_type=Invoice, tools=[side_effect])
    await agent.run("go")
    assert ran == [1]
    results = model.requests[1].messages[-1].tool_results_parts
    assert results[0].is_error and results[0].content.startswith("Invalid output: total:")
    assert results[1].content == "done" and not results[1].is_error


async def test_truncation_is_flagged_on_an_untyped_run() -> None:
    run = await Agent(ScriptedModel([reply("half a sent", stop_reason="length")])).run("go")
    assert run.truncated and run.output == "half a sent"
    complete = await Agent(ScriptedModel([reply("whole")])).run("go")
    assert not complete.truncated


@pytest.mark.parametrize("reason", ["length", "max_tokens", "MAX_TOKENS"])
async def test_a_truncated_typed_answer_is_invalid_output(reason: str) -> None:
    model = ScriptedModel(
        [
            reply('{"total": 1', stop_reason=reason),
            reply('{"total": 1, "currency": "E"}'),
        ]
    )
    agent = Agent(model, output_type=Invoice, config=RunConfig(output_mode="text"))
    run = await agent.run("go")
    assert run.output == Invoice(total=1, currency="E") and not run.truncated
    assert last_feedback(model.requests[1]) == (
        "Invalid output: the reply was cut off at the output token limit"
    )


async def test_a_truncated_final_result_call_is_invalid_output() -> None:
    part = ToolCallPart("c1", "final_result", {"total": 1, "currency": "E"})
    truncated = ModelResponse(Message.assistant(calls=[part]), stop_reason="length")
    model = ScriptedModel([truncated, call("final_result", {"total": 2, "currency": "E"})])
    run = await Agent(model, output_type=Invoice).run("go")
    assert run.output == Invoice(total=2, currency="E")
    assert last_feedback(model.requests[1]) == (
        "Invalid output: the reply was cut off at the output token limit"
    )


async def test_text_mode_reads_json_from_the_reply_and_tells_the_schema() -> None:
    model = ScriptedModel([reply("sure!"), reply('```json\n{"x": 1, "y": 2}\n```')])
    agent = Agent(
        model, output_type=Point, system="Be terse.", config=RunConfig(output_mode="text")
    )
    run = await agent.run("where")
    assert run.output == Point(1, 2)
    first = model.requests[0]
    assert all(s.name != "final_result" for s in first.tools)
    assert first.system is not None and first.system.startswith("Be terse.\n\nReply with only")
    assert '"required":["x","y"]' in first.system
    assert last_feedback(model.requests[1]).startswith("Invalid output: the reply is not JSON")


async def test_text_mode_with_str_output_takes_the_reply_as_is() -> None:
    model = ScriptedModel([reply("plain words")])
    run = await Agent(model, output_type=str, config=RunConfig(output_mode="text")).run("go")
    assert run.output == "plain words"


async def test_native_mode_falls_back_to_the_tool_for_providers_without_it() -> None:
    model = ScriptedModel([call("final_result", {"total": 1, "currency": "E"})])
    agent = Agent(model, output_type=Invoice, config=RunConfig(output_mode="native"))
    run = await agent.run("go")
    assert run.output == Invoice(total=1, currency="E")
    assert model.requests[0].output is None
    assert any(s.name == "final_result" for s in model.requests[0].tools)


async def test_a_typed_run_round_trips_its_output_as_json() -> None:
    model = ScriptedModel([call("final_result", {"total": 1, "currency": "E"})])
    run = await Agent(model, output_type=Invoice).run("go")
    data = run.to_dict()
    assert data["output"] == {"total": 1.0, "currency": "E"}
    assert type(run).from_dict(data).output == {"total": 1.0, "currency": "E"}


async def test_invalid_json_arguments_are_invalid_output() -> None:
    model = ScriptedModel(
        [
            call("final_result", {"__invalid_json__": "{total: 1"}),
            call("final_result", {"total": 1, "currency": "E"}),
        ]
    )
    await Agent(model, output_type=Invoice).run("go")
    assert last_feedback(model.requests[1]) == (
        "Invalid output: arguments: not valid JSON: {total: 1"
    )
