"""SPEC 16's engine half: ThinkingPart in the transcript, reasoning tokens, ModelRefused, cut
tool calls, the truncation reasons, and model profiles (the adapters' halves live beside each
adapter's tests in tests/providers/).
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from agentloop import Agent, tool
from agentloop.engine.loop import CUT_CALL_TEXT
from agentloop.errors import AgentLoopError, ConfigurationError, ModelRefused
from agentloop.events import ThinkingDelta
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, Usage
from agentloop.model import INVALID_JSON_KEY, ModelRequest, ModelResponse, ModelSettings
from agentloop.providers.profiles import check_settings, merge_body, profile_for
from agentloop.run import TRUNCATION_REASONS, Run
from agentloop.testing import FunctionModel, ScriptedModel, reply


def test_a_thinking_part_round_trips_through_to_dict() -> None:
    parts = (
        ThinkingPart("let me think", signature="sig", provider="anthropic"),
        ThinkingPart("", signature="opaque", redacted=True, provider="anthropic"),
        ThinkingPart("summary", signature="enc", provider="openai", id="rs_1"),
        ThinkingPart("", signature="g-sig", provider="gemini"),
        ToolCallPart("c1", "look", {"q": 1}),
    )
    message = Message("assistant", parts)
    assert Message.from_dict(message.to_dict()) == message
    assert message.thinking == parts[:4]
    assert message.text == ""  # reasoning is never the answer's text
    assert ThinkingPart("x").to_dict() == {"type": "thinking", "text": "x"}


def test_a_malformed_thinking_part_is_invalid_input() -> None:
    from agentloop.errors import InvalidInput

    with pytest.raises(InvalidInput):
        Message.from_dict({"role": "assistant", "parts": [{"type": "thinking", "signature": 3}]})


def test_reasoning_tokens_add_and_round_trip() -> None:
    usage = Usage(10, 50, reasoning_tokens=30) + Usage(1, 5, reasoning_tokens=2)
    assert usage.reasoning_tokens == 32
    assert Usage.from_dict(usage.to_dict()) == usage
    assert "reasoning_tokens" not in Usage(1, 2).to_dict()


def test_model_refused_is_hard_never_recoverable_and_pickles() -> None:
    error = ModelRefused("refusal", "I can't help with that")
    assert isinstance(error, AgentLoopError) and not error.is_recoverable()
    assert (error.reason, error.text) == ("refusal", "I can't help with that")
    again = pickle.loads(pickle.dumps(error))
    assert (again.reason, again.text, str(again)) == (error.reason, error.text, str(error))


async def test_a_refusal_ends_the_run_and_salvages_the_turns_before_it() -> None:
    @tool
    def look() -> str:
        """Look."""
        return "seen"

    from agentloop.testing import call

    agent = Agent(ScriptedModel([call("look", {}), ModelRefused("refusal", "no")]), tools=[look])
    with pytest.raises(ModelRefused) as info:
        await agent.run("go")
    run = agent.runs[-1]
    assert run.stop_reason is info.value and run.output is None
    assert len(agent.history) == 3  # user, the call, its result: the completed turn commits


@pytest.mark.parametrize("reason", sorted(TRUNCATION_REASONS))
def test_every_truncation_spelling_sets_run_truncated(reason: str) -> None:
    from agentloop.run import Turn

    run: Run[Any] = Run(id="r", input="x", turns=[Turn(index=0, model="m", stop_reason=reason)])
    assert run.truncated


async def test_a_tool_call_cut_at_the_output_limit_never_runs_and_the_run_goes_on() -> None:
    ran: list[str] = []

    @tool
    def write(path: str, content: str) -> str:
        """Write a file."""
        ran.append(path)
        return "written"

    cut = ToolCallPart("c1", "write", {INVALID_JSON_KEY: '{"path": "a.txt", "content": "lo'})
    steps = [
        ModelResponse(Message("assistant", (TextPart("Writing."), cut)), stop_reason="max_tokens"),
        reply("I will write it in smaller pieces."),
    ]
    model = ScriptedModel(steps)
    run = await Agent(model, tools=[write]).run("write a.txt")
    assert ran == []
    [result] = run.turns[0].tool_results
    assert result.is_error and result.content == CUT_CALL_TEXT.format(name="write")
    assert result.content == (
        "tool call 'write' was cut off at the output token limit and did not run; make it smaller"
    )
    assert run.output == "I will write it in smaller pieces." and not run.truncated


async def test_thinking_deltas_stream_as_their_own_events() -> None:
    from agentloop.model import StreamEvent

    class Thinker(FunctionModel):
        async def stream(self, request: ModelRequest) -> Any:
            yield StreamEvent("thinking_delta", text="hmm ")
            yield StreamEvent("text_delta", text="ok")
            message = Message("assistant", (ThinkingPart("hmm ", signature="s"), TextPart("ok")))
            yield StreamEvent("done", response=ModelResponse(message, stop_reason="end_turn"))

    agent = Agent(Thinker(lambda r: reply("unused")))
    async with agent.stream("q") as events:
        seen = [e async for e in events]
    thinking = [e.text for e in seen if isinstance(e, ThinkingDelta)]
    assert thinking == ["hmm "] and events.run.output == "ok"
    assert agent.history[-1].thinking == (ThinkingPart("hmm ", signature="s"),)


# -- model profiles ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "model", "settings", "setting"),
    [
        ("openai", "gpt-5-mini", ModelSettings(temperature=0.2), "temperature"),
        ("openai", "o3", ModelSettings(top_p=0.5), "top_p"),
        ("openai", "o4-mini", ModelSettings(stop=("x",)), "stop"),
        ("openai", "gpt-4o-mini", ModelSettings(reasoning_effort="low"), "reasoning_effort"),
        ("openai", "gpt-5", ModelSettings(reasoning_effort="none"), "reasoning_effort"),
        ("anthropic", "claude-sonnet-4-5", ModelSettings(temperature=0.5, top_p=0.9), "top_p"),
        ("gemini", "gemini-3-pro-preview", ModelSettings(thinking_budget=1024), "thinking_budget"),
        ("gemini", "gemini-2.5-flash", ModelSettings(reasoning_effort="low"), "reasoning_effort"),
    ],
)
def test_a_refused_setting_names_the_setting_and_the_model(
    provider: str, model: str, settings: ModelSettings, setting: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        check_settings(profile_for(provider, model), model, settings)
    assert info.value.field == setting
    assert model in str(info.value) and setting in str(info.value)


@pytest.mark.parametrize(
    ("provider", "model", "settings"),
    [
        ("openai", "gpt-5-mini", ModelSettings(temperature=1, reasoning_effort="minimal")),
        ("openai", "gpt-5.1", ModelSettings(reasoning_effort="none")),
        ("openai", "gpt-4o-mini", ModelSettings(temperature=0.2, top_p=0.5, stop=("x",))),
        ("anthropic", "claude-sonnet-4-5", ModelSettings(thinking_budget=2048)),
        ("anthropic", "claude-3-5-haiku-latest", ModelSettings(temperature=0.5, top_p=0.9)),
        ("gemini", "gemini-3-flash", ModelSettings(reasoning_effort="low")),
        ("gemini", "gemini-2.5-pro", ModelSettings(thinking_budget=0)),
    ],
)
def test_settings_a_model_takes_pass(provider: str, model: str, settings: ModelSettings) -> None:
    check_settings(profile_for(provider, model), model, settings)


def test_profiles_pick_output_limits_and_fields_by_family() -> None:
    assert profile_for("anthropic", "claude-sonnet-4-5-20250929").max_output_tokens == 64_000
    assert profile_for("anthropic", "claude-opus-4-1").max_output_tokens == 32_000
    assert profile_for("anthropic", "claude-3-haiku-20240307").max_output_tokens == 4_096
    assert profile_for("openai", "gpt-5-mini").max_tokens_field == "max_completion_tokens"
    assert profile_for("openrouter", "openai/o3-mini").max_tokens_field == "max_completion_tokens"
    assert profile_for("openai", "gpt-4o").max_tokens_field == "max_tokens"
    assert not profile_for("openai", "gpt-5-pro").chat_completions
    assert not profile_for("openai", "o3-pro").chat_completions
    assert not profile_for("openai", "gpt-5-codex").chat_completions


def test_extra_body_merges_recursively() -> None:
    payload = {"generationConfig": {"maxOutputTokens": 100, "temperature": 0.2}, "a": 1}
    merged = merge_body(payload, {"generationConfig": {"thinkingConfig": {"thinkingLevel": "low"}}})
    assert merged["generationConfig"] == {
        "maxOutputTokens": 100,
        "temperature": 0.2,
        "thinkingConfig": {"thinkingLevel": "low"},
    }
    assert merge_body({"a": {"b": 1}}, {"a": 2}) == {"a": 2}


@pytest.mark.parametrize(
    "kwargs", [{"reasoning_effort": "ultra"}, {"thinking_budget": -1}, {"thinking_budget": 1.5}]
)
def test_bad_reasoning_settings_are_configuration_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        ModelSettings(**kwargs)
