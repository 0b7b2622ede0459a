"""A conversation's media outgrowing Anthropic's 32 MiB request limit (SPEC 16 x 7, Anthropic 5).

Every request re-sends every earlier turn's media. A screenshot agent on Claude (3 MB a step)
passes the API's 32 MiB request limit at its eighth screenshot while its window is nearly
empty (about 1,600 tokens an image), so the token count never asks for a compaction. The API
answers such a request 413 ``request_too_large`` (a ``ContextLengthExceeded``): the adapter says
so before sending, and the run's overflow salvage compacts (old media go first) and goes on.
One message whose own media pass the limit can never be sent: a ``ConfigurationError`` naming
it, as before.
"""

from __future__ import annotations

import pytest

from agentloop import Agent, tool
from agentloop.errors import ConfigurationError
from agentloop.media import ImagePart
from agentloop.messages import Message, ToolResultPart
from agentloop.providers.anthropic import AnthropicClient
from agentloop.testing import RecordingObserver

from .test_media_counting_switch import png
from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

KEY = "sk-ant-twin-0123456789"
SCREENSHOT = ImagePart(png(1500) + bytes(3 * 1024 * 1024))  # 3 MB: 4 MiB of base64
STEPS = 14


@tool
def screenshot(n: int) -> list[object]:
    """Take a screenshot of the screen."""
    return [f"screen {n}", SCREENSHOT]


def images_in(body: dict[str, object]) -> int:
    return str(body).count("'type': 'image'")


async def test_a_screenshot_agent_goes_on_past_the_request_limit() -> None:
    steps = [TwinReply([twin.tool_use("screenshot", {"n": n})], "tool_use") for n in range(STEPS)]
    seen = RecordingObserver()
    async with AnthropicTwin([*steps, TwinReply([twin.text("all seen")])]) as server:
        client = AnthropicClient("claude-sonnet-4-5", api_key=KEY, base_url=server.url)
        agent = Agent(client, tools=[screenshot], observers=[seen])
        run = await agent.run("look around")
    assert run.output == "all seen" and len(run.turns) == STEPS + 1
    assert server.rejected == []  # no request over the limit ever reached the API
    assert seen.of("on_compaction")  # the salvage compacted: old screenshots became notes
    assert max(images_in(body) for body in server.requests) <= 8
    kept = [p for m in agent.history for p in m.parts if isinstance(p, ToolResultPart)]
    assert len(kept) == STEPS and all("screen" in p.content for p in kept)


async def test_one_message_over_the_limit_is_still_a_configuration_error() -> None:
    async with AnthropicTwin([TwinReply([twin.text("never")])]) as server:
        client = AnthropicClient("claude-sonnet-4-5", api_key=KEY, base_url=server.url)
        agent = Agent(client, history=[Message.user("hi"), Message.assistant("hello")])
        with pytest.raises(ConfigurationError, match="request limit"):
            await agent.run(["read these", *[SCREENSHOT] * 9])
    assert server.requests == []
