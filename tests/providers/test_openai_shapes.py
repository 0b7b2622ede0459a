"""OpenAIClient keeps the checked parts of each request shape: runs in flight interleave them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloop.errors import ConfigurationError
from agentloop.messages import Message
from agentloop.model import ModelRequest, ModelSettings, OutputSpec, ToolSpec
from agentloop.providers.openai import OpenAIClient
from agentloop.providers.openai._chat_request import encode_request
from agentloop.providers.openai._chat_shapes import SHAPE_LIMIT

LOOKUP = ToolSpec("lookup", "Look a key up.", {"type": "object", "properties": {"k": {}}})
OTHER = ToolSpec("other", "Another.", {"type": "object", "properties": {"x": {"type": "string"}}})
OPENAI = "https://api.openai.com/v1"  # a host that gets prompt_cache_key
LOCAL = "http://127.0.0.1:9/v1"


def _expected(client: OpenAIClient, request: ModelRequest, stream: bool) -> bytes:
    model = request.model or "gpt-4o"
    payload = encode_request(
        request,
        "gpt-4o",
        stream=stream,
        max_field=client._rules.max_field(model),
        cache_key=client._cache_key,
        strict=client._rules.profile(model).strict_schema,
        media=client._rules.profile(model).media,
    )
    return json.dumps(payload).encode()


def _send(client: OpenAIClient, stream: bool = False, **fields: Any) -> bytes:
    request = ModelRequest(messages=(Message.user("q"),), **fields)
    body, _ = client._payload(request, request.model or "gpt-4o", stream)
    assert body == _expected(client, request, stream)
    return body


@pytest.mark.parametrize("url", [OPENAI, LOCAL])
def test_interleaved_sessions_of_one_agent_share_a_shape_and_keep_their_own_cache_key(
    url: str,
) -> None:
    client = OpenAIClient("gpt-4o", api_key="k", base_url=url)
    settings = ModelSettings(temperature=0.5)
    for session in ("s-1", "s-2", "s-1", None, "s-3", "s-2"):
        for stream in (False, True):
            body = _send(client, stream, settings=settings, tools=(LOOKUP,), session_id=session)
            assert (b"prompt_cache_key" in body) == (url == OPENAI and session is not None)
    assert len(client._shapes._shapes) == 4  # stream or not, with a session or without


def test_a_kept_shape_is_found_again_without_checking_or_encoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = OpenAIClient("gpt-4o", api_key="k", base_url=OPENAI)
    settings = ModelSettings(temperature=0.5)
    _send(client, settings=settings, tools=(LOOKUP,), session_id="s-1", system="Be brief.")

    def refuse(*args: object) -> None:
        raise AssertionError("checked again")

    monkeypatch.setattr(client._rules, "check", refuse)
    for session in ("s-2", "s-3"):  # other runs of the same agent
        _send(client, settings=settings, tools=(LOOKUP,), session_id=session, system="Be brief.")
    with pytest.raises(AssertionError, match="checked again"):  # other tools: a new shape
        _send(client, settings=settings, tools=(LOOKUP, OTHER), session_id="s-1")


def test_changed_tools_settings_or_output_are_encoded_again() -> None:
    client = OpenAIClient("gpt-4o", api_key="k", base_url=OPENAI)
    settings = ModelSettings(temperature=0.5)
    output = OutputSpec("answer", {"type": "object", "properties": {"a": {"type": "string"}}})
    steps: list[dict[str, Any]] = [
        {"tools": (LOOKUP,)},
        {"tools": (LOOKUP, OTHER)},
        {"tools": (OTHER,)},
        {"tools": ()},
        {"tools": (LOOKUP,), "settings": ModelSettings(temperature=0.1)},
        {"tools": (LOOKUP,), "settings": ModelSettings(temperature=0.1, max_tokens=5)},
        {"tools": (LOOKUP,), "output": output},
        {"tools": (LOOKUP,), "output": OutputSpec("other", {"type": "object"})},
        {"tools": (LOOKUP,), "system": "Be brief."},
        {"tools": (LOOKUP,), "model": "gpt-4.1"},
        {"tools": (LOOKUP,)},
    ]
    for step in steps:
        for session in ("s-1", "s-2"):
            _send(client, **{"settings": settings, "session_id": session, **step})


def test_an_extra_body_that_sets_the_cache_key_keeps_it_per_session() -> None:
    client = OpenAIClient("gpt-4o", api_key="k", base_url=OPENAI)
    for extra in ({"prompt_cache_key": "mine"}, {"user": "agentloop-"}):
        settings = ModelSettings(extra_body=extra)
        for session in ("s-1", "s-2", "s-1"):
            _send(client, settings=settings, session_id=session)


def test_the_shapes_kept_are_bounded() -> None:
    client = OpenAIClient("gpt-4o", api_key="k", base_url=LOCAL)
    for n in range(SHAPE_LIMIT * 2 + 3):
        _send(client, settings=ModelSettings(seed=n))
        assert len(client._shapes._shapes) <= SHAPE_LIMIT


def test_a_refused_setting_is_refused_whatever_shapes_are_kept() -> None:
    client = OpenAIClient("o3", api_key="k")
    allowed, refused = ModelSettings(), ModelSettings(temperature=0.5)
    for settings in (allowed, refused, allowed, refused):
        request = ModelRequest(messages=(Message.user("q"),), settings=settings, tools=(LOOKUP,))
        if settings is refused:
            with pytest.raises(ConfigurationError, match="temperature"):
                client._payload(request, "o3", False)
        else:
            client._payload(request, "o3", False)
