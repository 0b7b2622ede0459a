"""Media counted by the formula of the provider that will read them (SPEC 16 x 7 x 8 x 26).

A run counts an image by its provider's own formula (Gemini 258 tokens a 768-px tile, Anthropic
width x height / 750): a 768 x 768 image is 258 tokens on Gemini and 786 on Claude. A run whose
requests may reach another provider than its client's own (a ``FallbackClient`` of several, a
handoff to a receiver on another provider) must count what that provider will read, or it sends
a request over the window (SPEC 7: never) that its formula says fits. Real twins on 127.0.0.1.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agentloop import Agent, FallbackClient, RunConfig
from agentloop.errors import CompactionStalled, ContextExceeded
from agentloop.media import ImagePart, media_tokens
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import RecordingObserver

from .conftest import serve_app
from .twins import gemini as gemini_twin
from .twins.anthropic import AnthropicTwin, TwinReply, text
from .twins.gemini import GeminiTwin

ANTHROPIC_KEY = "sk-ant-twin-0123456789"
GEMINI_KEY = "twin-key"
DEAD = "http://127.0.0.1:9"  # nothing listens: the primary fails at once


def png(side: int) -> bytes:
    """A PNG whose header says ``side`` x ``side`` (only the header is read for its size)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00")) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


IMAGE = ImagePart(png(768))


def test_the_formulas_differ_threefold() -> None:
    assert media_tokens(IMAGE, "gemini") == 258 and media_tokens(IMAGE, "anthropic") == 786


def claude(url: str) -> Any:
    settings = Settings(provider="anthropic", model="claude-sonnet-4-5", api_key=ANTHROPIC_KEY,
                        base_url=url, max_retries=0)  # fmt: skip
    return build_client(settings)


def gemini(url: str) -> Any:
    settings = Settings(provider="gemini", model="gemini-3.8-flash", api_key=GEMINI_KEY,
                        base_url=url, max_retries=0)  # fmt: skip
    return build_client(settings)


@asynccontextmanager
async def gemini_at(*replies: gemini_twin.Reply) -> AsyncIterator[tuple[GeminiTwin, str]]:
    twin = GeminiTwin(*replies, key=GEMINI_KEY)
    async with serve_app(twin.app()) as url:
        yield twin, f"{url}/v1beta"


async def test_a_fallback_to_another_provider_never_gets_a_request_over_the_window() -> None:
    """Six images: 1,548 tokens by Gemini's formula, 4,716 by Claude's; the window is 4,000."""
    config = RunConfig(context_window=4_000)
    async with AnthropicTwin([TwinReply([text("six pictures")])]) as server:
        agent = Agent(FallbackClient([gemini(DEAD), claude(server.url)]), config=config)
        with pytest.raises((ContextExceeded, CompactionStalled)):  # the cannot-fit family
            await agent.run(["what are these?", *[IMAGE] * 6])
    assert server.requests == []  # never sent: the fallback's Claude could not have read it


async def test_a_handoff_to_another_provider_counts_its_formula() -> None:
    """Gemini hands off to Claude: four images (1,032 / 3,144 tokens) in a 3,500 window."""
    seen = RecordingObserver()
    config = RunConfig(context_window=3_500)
    transfer = gemini_twin.Reply([gemini_twin.call("transfer_to_claude", {})])
    async with gemini_at(transfer) as (twin, url), AnthropicTwin([TwinReply([text("done")])]) as s:
        receiver = Agent(claude(s.url), name="claude")
        agent = Agent(gemini(url), handoffs=[receiver], config=config, observers=[seen])
        run = await agent.run(["look at these", *[IMAGE] * 4])
    assert run.output == "done" and run.last_agent == "claude"
    first = twin.accepted[0].body["contents"][0]["parts"]
    assert sum("inlineData" in part for part in first) == 4  # they fit by Gemini's formula
    assert seen.of("on_compaction")  # Claude's request was measured by Claude's formula
    sent = s.requests[0]["messages"][0]["content"]
    assert sum(block["type"] == "image" for block in sent) < 4  # old media went first
