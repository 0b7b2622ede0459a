"""Bedrock's wire without a server: model ids in the path, profiles, thinking fields, cache
points and the stream state (SPEC 24, issue 33). The twin tests are in ``test_bedrock.py``.
"""

from __future__ import annotations

import json

import pytest

from agentloop.errors import ConfigurationError
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import INVALID_JSON_KEY, ModelRequest, ModelSettings
from agentloop.providers.bedrock import model_url_path
from agentloop.providers.profiles import profile_for

CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


async def test_a_cut_tool_input_is_kept_for_the_engine_to_answer() -> None:
    from agentloop.providers.bedrock._reply import ConverseStreamState

    state = ConverseStreamState(request_id=None, model=CLAUDE)
    state.feed("contentBlockStart", {"contentBlockIndex": 0,
               "start": {"toolUse": {"toolUseId": "t1", "name": "write"}}})  # fmt: skip
    state.feed(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"a": "'}}}
    )
    state.feed("messageStop", {"stopReason": "max_tokens"})
    assert state.response().tool_calls[0].arguments == {INVALID_JSON_KEY: '{"a": "'}


@pytest.mark.parametrize("name", ["../admin", "a?b", "x#y", "", "model id"])
def test_a_model_id_that_is_no_id_is_refused(name: str) -> None:
    with pytest.raises(ConfigurationError):
        model_url_path(name)


def test_an_arn_is_one_escaped_segment() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x-v1:0"
    path = model_url_path(arn)
    assert path.count("/") == 2 and "%2F" in path and "%3A" in path


def test_claude_on_bedrock_carries_the_anthropic_profile() -> None:
    fable = profile_for("bedrock", "us.anthropic.claude-fable-5-1-20261001-v1:0")
    assert fable.append_only and fable.adaptive_thinking
    assert not fable.mid_conversation_system and not fable.server_compaction
    assert not profile_for("bedrock", "amazon.nova-lite-v1:0").append_only


def test_adaptive_thinking_on_bedrock_claude_goes_in_additional_fields() -> None:
    from agentloop.providers.bedrock._encode import build_payload

    model = "us.anthropic.claude-fable-5-1-20261001-v1:0"
    request = ModelRequest([Message.user("x")], settings=ModelSettings(reasoning_effort="high"))
    payload = build_payload(request, model)
    assert payload["additionalModelRequestFields"] == {
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
    }
    assert payload["inferenceConfig"] == {"maxTokens": 128_000}


def test_cache_points_go_where_the_anthropic_breakpoints_go() -> None:
    from agentloop.model import ToolSpec
    from agentloop.providers.bedrock._encode import build_payload

    point = {"cachePoint": {"type": "default"}}
    spec = ToolSpec("get_weather", "The weather.", {"type": "object", "properties": {}})
    history = [
        Message.user("a"),
        Message("assistant", (ToolCallPart("t1", "get_weather", {}),)),
        Message("tool", (ToolResultPart("t1", "get_weather", "sunny"),)),
    ]
    request = ModelRequest(history, tools=[spec], system="be brief")
    claude = build_payload(request, CLAUDE)
    assert claude["system"][-1] == point and claude["toolConfig"]["tools"][-1] == point
    assert claude["messages"][0]["content"][-1] == point  # where the last request ended
    assert claude["messages"][2]["content"][-1] == point  # the end: the next request reads it
    nova = build_payload(request, "amazon.nova-pro-v1:0")
    assert point not in nova["toolConfig"]["tools"] and nova["system"][-1] == point
    plain = ModelRequest(history, tools=[spec], system="be brief",
                         settings=ModelSettings(cache=False))  # fmt: skip
    unmarked = build_payload(plain, CLAUDE)
    assert "cachePoint" not in json.dumps(unmarked)
    assert "cachePoint" not in json.dumps(build_payload(request, "meta.llama3-70b-instruct-v1:0"))
