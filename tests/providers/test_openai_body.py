"""The body OpenAIClient sends is ``json.dumps(encode_request(...))``, byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloop.media import ImagePart
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.model import INVALID_JSON_KEY, ModelRequest, ModelSettings, OutputSpec, ToolSpec
from agentloop.providers.openai import OpenAIClient, _chat_request
from agentloop.providers.openai._chat_request import encode_body, encode_request

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
LOOKUP = ToolSpec("lookup", "Look a key up.", {"type": "object", "properties": {"k": {}}})
HISTORY = [
    Message.user("naïve question \u2603 \ud83d\ude00"),
    Message.assistant("", [ToolCallPart("c1", "lookup", {"k": "é"})]),
    Message.tool_results([ToolResultPart("c1", "lookup", "value")]),
    Message.assistant("", [ToolCallPart("c2", "lookup", {INVALID_JSON_KEY: "{bad"})]),
    Message.tool_results([ToolResultPart("c2", "lookup", "Invalid arguments", is_error=True)]),
    Message.from_input(["look", ImagePart(PNG)]),
]
CASES: dict[str, dict[str, Any]] = {
    "bare": {},
    "system and tools": {"system": "Be brief.", "tools": [LOOKUP]},
    "settings": {"settings": ModelSettings(temperature=0.2, stop=("x",), tool_choice="lookup")},
    "extra body": {"settings": ModelSettings(extra_body={"user": "u", "stream_options": {"a": 1}})},
    "extra sets messages": {"settings": ModelSettings(extra_body={"messages": []})},
    "extra sets tools": {"tools": [LOOKUP], "settings": ModelSettings(extra_body={"tools": []})},
    "output": {"output": OutputSpec("answer", {"type": "object"})},
    "session": {"session_id": "s-1"},
    "other model": {"model": "gpt-4.1"},
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_the_body_is_json_dumps_of_the_payload(case: str, stream: bool, strict: bool) -> None:
    request = ModelRequest(messages=list(HISTORY), **CASES[case])
    options: dict[str, Any] = {
        "stream": stream,
        "max_field": "max_completion_tokens",
        "cache_key": True,
        "strict": strict,
        "media": frozenset({"image"}),
    }
    tools = json.dumps([json.loads(json.dumps(t)) for t in _tools(request, strict)])
    for _ in range(2):  # the second time from each message's cached JSON
        body = encode_body(request, "gpt-4o", tools, **options)
        assert body == json.dumps(encode_request(request, "gpt-4o", **options)).encode()


def _tools(request: ModelRequest, strict: bool) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = encode_request(request, "m", strict=strict).get("tools", [])
    return tools


def test_the_client_encodes_its_tools_again_when_they_change() -> None:
    client = OpenAIClient("gpt-4o", api_key="k")
    other = ToolSpec("other", "Another.", {"type": "object", "properties": {}})
    for tools in ([LOOKUP], [LOOKUP], [LOOKUP, other], [other], []):
        request = ModelRequest(messages=[Message.user("q")], tools=tuple(tools))
        body, _ = client._payload(request, "gpt-4o", False)
        sent = json.loads(body)
        assert [t["function"]["name"] for t in sent.get("tools", [])] == [t.name for t in tools]


def test_a_value_json_cannot_encode_fails_as_before() -> None:
    request = ModelRequest(
        messages=[Message.user("q")], settings=ModelSettings(extra_body={"when": object()})
    )
    client = OpenAIClient("gpt-4o", api_key="k")
    with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
        client._payload(request, "gpt-4o", False)


def test_the_client_encodes_its_options_again_when_they_change() -> None:
    client = OpenAIClient("gpt-4o", api_key="k", base_url="https://api.openai.com/v1")
    cold = ModelSettings(temperature=0.0)
    warm = ModelSettings(temperature=0.9, extra_body={"user": "u"})
    output = OutputSpec("answer", {"type": "object"})
    steps: list[tuple[ModelSettings, OutputSpec | None, str | None, bool]] = [
        (cold, None, None, False),
        (cold, None, None, False),
        (cold, None, None, True),
        (warm, None, None, True),
        (warm, output, None, True),
        (warm, output, "s-1", True),
        (warm, output, "s-2", True),
        (ModelSettings(temperature=0.9, extra_body={"user": "u"}), None, None, False),
    ]
    for settings, out, session, stream in steps:
        request = ModelRequest(
            messages=[Message.user("q")], settings=settings, output=out, session_id=session
        )
        body, _ = client._payload(request, "gpt-4o", stream)
        strict = client._rules.profile("gpt-4o").strict_schema
        expected = encode_request(
            request,
            "gpt-4o",
            stream=stream,
            max_field="max_completion_tokens",
            cache_key=True,
            strict=strict,
            media=frozenset({"image", "document"}),
        )
        assert body == json.dumps(expected).encode()


TURNS = [
    Message.assistant(
        'said "so" \\ \u2028 \ud800', [ToolCallPart("c\n1", "look\u00e9", {"k": [1.5]})]
    ),
    Message("assistant", (ThinkingPart("why"), TextPart("a"), TextPart("b"))),
    Message.assistant("", [ToolCallPart("c1", "f", {}), ToolCallPart("c2", "g", {"x": None})]),
    Message.tool_results(
        [ToolResultPart("c1", "f", "\x00 \ud83d\ude00"), ToolResultPart("c2", "g", "")]
    ),
    Message.tool_results([]),
    Message.user('naïve "q" \u2603 \ud83d\ude00 \x00'),
    Message("user", (TextPart("a"), TextPart("b"))),
    Message.assistant("", [ToolCallPart("c3", "h", {"s": "é\n", "n": 2, "t": True, "f": False})]),
    Message.assistant("", [ToolCallPart("c4", "h", {"big": 10**40, "x": 1.0, "l": [None]})]),
]


@pytest.mark.parametrize("index", range(len(TURNS)))
def test_a_turns_messages_are_written_as_json_dumps_writes_them(index: int) -> None:
    message = TURNS[index]
    wire, _ = _chat_request._encode_message(message)
    assert _chat_request._turn_json(message) == ", ".join(json.dumps(w) for w in wire)


def test_a_user_message_with_media_takes_the_generic_path() -> None:
    message = Message.from_input(["look", ImagePart(PNG)])
    assert _chat_request._turn_json(message) is None


def test_a_request_shaped_as_the_last_one_is_spliced_and_any_change_is_seen() -> None:
    client = OpenAIClient("gpt-4o", api_key="k", base_url="https://api.openai.com/v1")
    settings = ModelSettings(temperature=0.5)
    history: list[Message] = [Message.user("q")]
    variants: list[dict[str, Any]] = [
        {},
        {},  # the same shape: spliced
        {"system": "Be brief."},
        {"system": "Be brief.", "session_id": "s-1"},
        {"system": "Be brief.", "tools": (LOOKUP,)},
        {"system": "Be brief.", "output": OutputSpec("answer", {"type": "object"})},
        {"system": "Be brief.", "model": "gpt-4.1"},
        {"system": "Be brief.", "settings": ModelSettings(temperature=0.1)},
    ]
    for options in variants:
        for stream in (False, True):
            history.append(Message.assistant("a"))
            request = ModelRequest(messages=tuple(history), **{"settings": settings, **options})
            body, _ = client._payload(request, request.model or "gpt-4o", stream)
            strict = client._rules.profile(request.model or "gpt-4o").strict_schema
            expected = encode_request(
                request,
                "gpt-4o",
                stream=stream,
                max_field="max_completion_tokens",
                cache_key=True,
                strict=strict,
                media=frozenset({"image", "document"}),
            )
            assert body == json.dumps(expected).encode()


def test_a_refused_setting_is_refused_on_every_request() -> None:
    from agentloop.errors import ConfigurationError

    client = OpenAIClient("o3", api_key="k")
    refused = ModelSettings(temperature=0.5)
    for _ in range(2):
        request = ModelRequest(messages=(Message.user("q"),), settings=refused)
        with pytest.raises(ConfigurationError, match="temperature"):
            client._payload(request, "o3", False)
    client._payload(ModelRequest(messages=(Message.user("q"),)), "o3", False)
    with pytest.raises(ConfigurationError, match="temperature"):
        client._payload(ModelRequest(messages=(Message.user("q"),), settings=refused), "o3", False)
