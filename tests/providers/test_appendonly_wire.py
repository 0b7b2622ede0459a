"""Append-only conversations (SPEC 28) on the wire: server-side compaction, where entries go.

The same transcript reaches each provider its own way: Anthropic in place or folded (and its
server-side compaction, against the twin), OpenAI as a system message or a developer item,
Gemini in its system instruction. Behaviour over whole runs is in ``test_appendonly_twin``.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.messages import Message, ProviderPart, ToolChangePart
from agentloop.model import ModelRequest, ModelSettings, ToolSpec
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import RecordingObserver

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply
from .twins.anthropic_prefix import compaction

KEY = "sk-ant-twin-0123456789"
EFFORT = ModelSettings(reasoning_effort="low")


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def client(url: str, model: str) -> Any:
    return build_client(
        Settings(provider="anthropic", model=model, api_key=KEY, base_url=url, max_retries=0)
    )


def turn(n: int) -> list[TwinReply]:
    """One run: a thought and a tool call, then a thought and an answer."""
    return [
        TwinReply([twin.thinking(f"step {n}"), twin.tool_use("look", {"q": str(n)})], "tool_use"),
        TwinReply([twin.thinking(f"done {n}"), twin.text(f"answer {n}")]),
    ]


# -- server-side compaction ---------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_auto_compaction_asks_the_provider_and_keeps_its_block(stream: bool) -> None:
    compacted = TwinReply(
        [
            compaction("the story so far"),
            twin.thinking("step 2"),
            twin.tool_use("look", {"q": "2"}),
        ],
        "tool_use",
    )
    script = [*turn(1)[:1], compacted, *turn(3)[1:]]
    seen = RecordingObserver()
    config = RunConfig(model_settings=EFFORT, context_window=100_000, stream=stream)
    async with AnthropicTwin(script) as server:
        agent = Agent(
            client(server.url, "claude-fable-5-1"), tools=[look], config=config, observers=[seen]
        )
        run = await agent.run("go")
    assert run.output == "answer 3" and server.rejected == []
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 80_000}}
    assert all(b["context_management"] == {"edits": [edit]} for b in server.requests)
    last = server.requests[-1]["messages"]
    assert last[3]["content"][0] == {"type": "compaction", "content": "the story so far"}
    assert not seen.of("on_compaction")  # the local compactor never ran
    assert isinstance(agent.history[4].parts[0], ProviderPart)


async def test_local_compaction_sends_no_context_management() -> None:
    config = RunConfig(model_settings=EFFORT, compaction="local")
    async with AnthropicTwin(turn(1)) as server:
        await Agent(client(server.url, "claude-fable-5-1"), tools=[look], config=config).run("go")
    assert server.rejected == []
    assert not any("context_management" in b for b in server.requests)


# -- the wire form of entries -------------------------------------------------------------------


def test_an_entry_a_user_message_follows_moves_to_just_before_the_next_assistant_turn() -> None:
    from agentloop.providers.anthropic import build_payload

    request = ModelRequest(
        [
            Message.user("a"),
            Message.assistant("b"),
            Message.system("now in French"),
            Message.user("c"),
            Message.assistant("d"),
            Message.user("e"),
        ],
        system="base",
    )
    body = build_payload(request, model="claude-opus-5-5", stream=False)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user", "system", "assistant", "user"]
    assert body["messages"][3]["content"] == [{"type": "text", "text": "now in French"}]
    assert body["system"][0]["text"] == "base"
    again = build_payload(request, model="claude-opus-5-5", stream=False)
    assert again == body  # identically on every request


async def test_the_twin_refuses_system_messages_where_the_model_takes_none() -> None:
    async with AnthropicTwin([TwinReply([twin.text("ok")])]) as server:
        sonnet = client(server.url, "claude-sonnet-5")
        request = ModelRequest([Message.user("a"), Message.system("x")])
        body = {
            "model": "claude-sonnet-5",
            "max_tokens": 10,
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "system", "content": [{"type": "text", "text": "x"}]},
            ],
        }
        import aiohttp

        async with aiohttp.ClientSession() as session:
            headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
            async with session.post(f"{server.url}/v1/messages", json=body, headers=headers) as r:
                assert r.status == 400
        reply = await sonnet.complete(request)  # our adapter folds it into system instead
        await sonnet.aclose()
    assert server.rejected == ["messages.1.role: Input should be 'user' or 'assistant'"]
    assert reply.text == "ok" and server.requests[0]["system"][0]["text"] == "x"


# -- OpenAI and Gemini: the same transcript, each its own way -----------------------------------


def entries_request() -> ModelRequest:
    note = ToolSpec("note", "Take a note.", {"type": "object", "properties": {}})
    return ModelRequest(
        [
            Message.user("a"),
            Message.assistant("b"),
            Message.user("c"),
            Message.system("now in French"),
            Message("system", (ToolChangePart(added=(note,), removed=("look",)),)),
        ],
        tools=(look.spec(),),
        system="base",
    )


def test_openai_chat_sends_an_entry_as_a_system_message_in_place() -> None:
    from agentloop.providers.openai import encode_request

    body = encode_request(entries_request(), "gpt-5.2")
    assert [m["role"] for m in body["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "system",
    ]
    assert body["messages"][-1]["content"] == "now in French"
    assert [t["function"]["name"] for t in body["tools"]] == ["note"]


def test_openai_responses_sends_an_entry_as_a_developer_item_in_place() -> None:
    from agentloop.providers.responses import encode_request

    body = encode_request(entries_request(), "gpt-5.2")
    assert body["instructions"] == "base"
    assert body["input"][-1] == {"type": "message", "role": "developer", "content": "now in French"}
    assert [t["name"] for t in body["tools"]] == ["note"]


def test_gemini_joins_entries_to_the_system_instruction() -> None:
    from agentloop.providers.gemini import build_payload

    body = build_payload(entries_request(), "gemini-3.8-flash")
    assert body["systemInstruction"] == {"parts": [{"text": "base\n\nnow in French"}]}
    declared = body["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declared] == ["note"]
    assert all(c["role"] in ("user", "model") for c in body["contents"])
