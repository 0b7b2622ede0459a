"""A seeded history with a ``system`` message mid-way is valid and sendable (SPEC 12, 28).

``Agent(history=[user, system, assistant])`` is accepted at construction, and each provider
adapter sends that message its own way (SPEC 28): Chat Completions as a system message in place,
Responses as a developer item, Anthropic and Gemini joined to the top-level system prompt where
the model takes no system messages in place (in place where it does), Bedrock in ``system``.
Against the fake provider server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentloop import Agent
from agentloop.messages import Message
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import FakeProviderServer, FakeReply

HISTORY = [
    Message.user("hi"),
    Message.system("Answer in French."),
    Message.assistant("Bonjour"),
]


def _settings(provider: str, model: str, url: str, **extra: Any) -> Any:
    return build_client(
        Settings(provider=provider, model=model, api_key="k", base_url=url, max_retries=0, **extra)
    )


def chat(server: FakeProviderServer) -> Any:
    return _settings("openai", "gpt-test", server.base_url)


def responses(server: FakeProviderServer) -> Any:
    from agentloop.providers.responses import OpenAIResponsesClient

    return OpenAIResponsesClient("gpt-test", api_key="k", base_url=server.base_url)


def anthropic(server: FakeProviderServer) -> Any:
    return _settings("anthropic", "claude-test", server.root_url)


def anthropic_append_only(server: FakeProviderServer) -> Any:
    return _settings("anthropic", "claude-opus-5-5", server.root_url)


def gemini(server: FakeProviderServer) -> Any:
    return _settings("gemini", "gemini-3.8-flash", f"{server.root_url}/v1beta")


def bedrock(server: FakeProviderServer) -> Any:
    return build_client(
        Settings(
            provider="bedrock",
            model="anthropic.claude-sonnet-4-5-20250929-v1:0",
            region="us-east-1",
            base_url=server.root_url,
            max_retries=0,
        )
    )


def _where(body: dict[str, Any]) -> str:
    """Where the seeded system text went in ``body``."""
    for key in ("messages", "input", "contents"):
        for item in body.get(key) or ():
            if "Answer in French." in json.dumps(item):
                return f"{key}:{item.get('role')}"
    return "top-level" if "Answer in French." in json.dumps(body) else "nowhere"


@pytest.mark.parametrize(
    ("make", "where"),
    [
        (chat, "messages:system"),
        (responses, "input:developer"),
        (anthropic, "top-level"),
        (anthropic_append_only, "messages:system"),
        (gemini, "top-level"),
        (bedrock, "top-level"),
    ],
)
async def test_a_mid_history_system_message_reaches_each_provider(
    make: Callable[[FakeProviderServer], Any], where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "fake-key")
    async with FakeProviderServer([FakeReply("Salut")]) as server:
        async with make(server) as client:
            agent = Agent(client, system="Be brief.", history=HISTORY)
            run = await agent.run("again")
        [body] = server.requests
    assert run.output == "Salut"
    assert _where(dict(body)) == where
    assert "Be brief." in json.dumps(body)


async def test_a_leading_system_message_that_is_no_base_opens_no_append_only_conversation() -> None:
    """SPEC 28: only a base (text then a ``ToolChangePart``) continues a conversation."""
    from agentloop.testing import ScriptedModel, reply

    model = ScriptedModel([reply("ok")])
    seeded = [Message.system("Answer in French."), *HISTORY[::2]]
    agent = Agent(model, system="Be brief.", history=seeded)
    await agent.run("again")
    [request] = model.requests
    assert request.system == "Be brief."
    assert [(m.role, m.text) for m in request.messages] == [
        ("system", "Answer in French."),
        ("user", "hi"),
        ("assistant", "Bonjour"),
        ("user", "again"),
    ]
    assert agent.history[0] == seeded[0]
