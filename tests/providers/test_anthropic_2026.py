"""Claude's late-2026 models through the public API against the Anthropic twin (issue 40).

Issue 40's Anthropic breaks 4-6: ``reasoning_effort`` on ``claude-fable-5-1`` was refused (no
row for Fable or Mythos), and on ``claude-opus-5-5`` it and ``thinking_budget`` sent
``thinking: {"type": "enabled"}``, which Claude 4.7 and later answer with a 400
(provider-rules "Anthropic, late 2026" 7). The twin (``twins/anthropic.py``) answers that 400.
"""

from __future__ import annotations

import aiohttp
import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.errors import ConfigurationError
from agentloop.model import ModelSettings
from agentloop.providers.profiles import profile_for
from agentloop.providers.settings import Settings, build_client

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

KEY = "sk-ant-twin-0123456789"


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def agent(url: str, model: str, settings: ModelSettings) -> Agent:
    client = build_client(
        Settings(provider="anthropic", model=model, api_key=KEY, base_url=url, max_retries=0)
    )
    return Agent(client, tools=[look], config=RunConfig(model_settings=settings))


TWO_TURNS = [
    TwinReply([twin.thinking("Look it up."), twin.tool_use("look", {"q": "x"})], "tool_use"),
    TwinReply([twin.thinking(""), twin.text("It is x.")]),
]


@pytest.mark.parametrize("model", ["claude-fable-5-1", "claude-opus-5-5", "claude-mythos-5-2"])
@pytest.mark.parametrize("effort", ["low", "high", "xhigh", "max"])
async def test_effort_on_adaptive_models_sends_adaptive_thinking(model: str, effort: str) -> None:
    """Breaks 4 and 5: effort is adaptive thinking with ``output_config.effort``, two turns."""
    async with AnthropicTwin(list(TWO_TURNS)) as server:
        run = await agent(server.url, model, ModelSettings(reasoning_effort=effort)).run("x?")  # type: ignore[arg-type]
    assert run.output == "It is x." and server.rejected == []
    for body in server.requests:
        assert body["thinking"] == {"type": "adaptive"}
        assert body["output_config"] == {"effort": effort}
        assert body["max_tokens"] == 128_000
    # the thinking block of turn one went back unchanged, first, in the second request
    assert server.requests[1]["messages"][1]["content"][0]["type"] == "thinking"


async def test_thinking_budget_on_opus_5_5_is_refused_before_sending() -> None:
    """Break 6: ``thinking_budget`` is a ConfigurationError naming ``reasoning_effort``."""
    async with AnthropicTwin(list(TWO_TURNS)) as server:
        with pytest.raises(ConfigurationError) as info:
            await agent(server.url, "claude-opus-5-5", ModelSettings(thinking_budget=4096)).run(
                "x?"
            )
    assert server.requests == [] and server.rejected == []
    assert info.value.field == "thinking_budget"
    assert "reasoning_effort" in str(info.value) and "claude-opus-5-5" in str(info.value)


async def test_effort_none_on_adaptive_model_sends_no_thinking() -> None:
    async with AnthropicTwin([TwinReply([twin.text("hi")])]) as server:
        run = await agent(
            server.url, "claude-sonnet-5", ModelSettings(reasoning_effort="none")
        ).run("hi")
    assert run.output == "hi" and "thinking" not in server.requests[0]
    assert "output_config" not in server.requests[0]


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-sonnet-4-5"])
async def test_minimal_effort_is_refused_where_no_budget_table_applies(model: str) -> None:
    """``minimal`` exists on budget models only; ``xhigh``/``max`` on adaptive ones only."""
    effort = "minimal" if model == "claude-opus-5-5" else "xhigh"
    async with AnthropicTwin([]) as server:
        with pytest.raises(ConfigurationError) as info:
            await agent(server.url, model, ModelSettings(reasoning_effort=effort)).run("x")  # type: ignore[arg-type]
    assert server.requests == [] and info.value.field == "reasoning_effort"
    assert model in str(info.value) and repr(effort) in str(info.value)


async def test_enabled_in_extra_body_on_adaptive_model_is_refused_before_sending() -> None:
    settings = ModelSettings(extra_body={"thinking": {"type": "enabled", "budget_tokens": 2048}})
    async with AnthropicTwin([]) as server:
        with pytest.raises(ConfigurationError) as info:
            await agent(server.url, "claude-opus-4-7", settings).run("x")
    assert server.requests == [] and info.value.field == "reasoning_effort"


async def test_claude_4_5_keeps_enabled_with_a_budget() -> None:
    async with AnthropicTwin(list(TWO_TURNS)) as server:
        run = await agent(
            server.url, "claude-sonnet-4-5", ModelSettings(reasoning_effort="medium")
        ).run("x?")
    assert run.output == "It is x." and server.rejected == []
    assert server.requests[0]["thinking"] == {"type": "enabled", "budget_tokens": 16_384}
    assert "output_config" not in server.requests[0]


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-fable-5-1", "claude-opus-4-7"])
async def test_the_twin_answers_enabled_on_new_models_with_the_api_400(model: str) -> None:
    """What the old code sent (``enabled`` + ``budget_tokens``) is the provider's own 400."""
    body = {
        "model": model,
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [{"role": "user", "content": "x"}],
    }
    async with AnthropicTwin([]) as server, aiohttp.ClientSession() as session:
        url, headers = f"{server.url}/v1/messages", {"x-api-key": KEY}
        async with session.post(url, json=body, headers=headers) as reply:
            error = await reply.json()
    assert reply.status == 400 and error["error"]["message"] == twin.ENABLED_REJECTED


@pytest.mark.parametrize(
    ("model", "append_only", "system", "compaction"),
    [
        ("claude-fable-5", False, True, True),
        ("claude-fable-5-1", True, True, True),
        ("claude-fable-5-2", True, False, True),
        ("claude-mythos-5-1-20261001", True, True, True),
        ("claude-opus-4-8", False, True, True),
        ("claude-opus-5", False, True, True),
        ("claude-opus-5-5", True, True, True),
        ("claude-sonnet-5", False, False, True),
        ("claude-sonnet-5-5", True, True, True),
        ("claude-haiku-5-5", True, True, True),
        ("claude-opus-4-7", False, False, True),
        ("claude-sonnet-4-5", False, False, False),
        ("claude-fable-6-0", True, False, True),  # an unknown name: the newest family's row
        ("us.anthropic.claude-opus-5-5-v1:0", True, True, True),  # a Bedrock id
        ("claude-opus-5-5@20261001", True, True, True),  # a Vertex id
    ],
)
def test_profile_rows_of_claude_2026(
    model: str, append_only: bool, system: bool, compaction: bool
) -> None:
    found = profile_for("anthropic", model)
    assert (found.append_only, found.mid_conversation_system) == (append_only, system)
    assert found.mid_conversation_tools == system and found.server_compaction == compaction
    adaptive = not model.startswith("claude-sonnet-4-5")
    assert found.adaptive_thinking == adaptive and found.thinking_budget == (not adaptive)
    assert found.media == {"image", "document"} and (found.max_output_tokens or 0) >= 64_000
