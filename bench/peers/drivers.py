"""The six drivers of the peers' comparison: one conversation each, the same on the wire.

Every driver runs the conversation of ``bench/provider_overhead.py``'s fake server: the model
asks for the ``lookup`` tool K times (one call a reply), the driver runs the tool and sends its
result back, and the model then answers with text. ``run(stream)`` does one conversation (JSON,
or SSE when ``stream``) and returns the number of model calls it made (K + 1), read from what the
framework itself reports, so a driver that skipped a turn fails the worker's check. Each driver
is built once and runs every conversation of a sample, as an application builds its agent once:

- ``raw aiohttp``: ``provider_overhead.AiohttpLoop``, the hand loop every other bench compares to;
- ``openai SDK``: the same hand loop on ``AsyncOpenAI().chat.completions.create``;
- ``agentloop``: ``provider_overhead.AgentloopLoop`` (``Agent(OpenAIClient)``, a session a run);
- ``pydantic-ai``: ``Agent(OpenAIChatModel)`` with ``tool_plain``; ``run`` / ``run_stream_events``;
- ``openai-agents``: ``Agent(OpenAIChatCompletionsModel)`` with ``function_tool``, tracing off;
  ``Runner.run`` / ``Runner.run_streamed``;
- ``LangGraph``: ``create_react_agent(ChatOpenAI)`` with a ``@tool``; ``ainvoke`` / ``astream``
  of messages (``ChatOpenAI(streaming=True)``).

Frameworks are imported inside their driver only, so a worker process loads one framework and
nothing of the others. Only 127.0.0.1 is used: every client gets the fake server's base URL.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH)

from provider_overhead import (  # noqa: E402
    MODEL,
    AgentloopLoop,
    AiohttpLoop,
    _after_reply,
    _payload,
)

API_KEY = "sk-bench"

# The first lines a program of each framework needs to build its agent (timed by run.py).
IMPORTS = {
    "raw aiohttp": "import aiohttp",
    "openai SDK": "from openai import AsyncOpenAI",
    "agentloop": "from agentloop import Agent, tool; from agentloop.providers import OpenAIClient",
    "pydantic-ai": "from pydantic_ai import Agent; from pydantic_ai.models.openai import "
    "OpenAIChatModel; from pydantic_ai.providers.openai import OpenAIProvider",
    "openai-agents": "from agents import Agent, Runner, function_tool, OpenAIChatCompletionsModel",
    "LangGraph": "from langgraph.prebuilt import create_react_agent; from langchain_core.tools "
    "import tool; from langchain_openai import ChatOpenAI",
}

# Each framework's command line, if it has one: (console script, arguments, the package it is in).
CLIS: dict[str, tuple[str, list[str], str] | None] = {
    "raw aiohttp": None,
    "openai SDK": None,
    "agentloop": ("agentloop", ["--help"], "agentloop[cli]"),
    "pydantic-ai": ("pai", ["--help"], "pydantic-ai-slim[cli] (also shipped as clai)"),
    "openai-agents": None,
    "LangGraph": ("langgraph", ["--help"], "langgraph-cli"),
}


async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class OpenAISDKLoop:
    """The raw loop on the official SDK: ``chat.completions.create``, deltas joined by hand."""

    name = "openai SDK"

    def __init__(self, url: str) -> None:
        from openai import AsyncOpenAI

        self.client = AsyncOpenAI(base_url=url, api_key=API_KEY)

    async def run(self, stream: bool) -> int:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        turns = 0
        while True:
            turns += 1
            payload = _payload(messages, stream)
            if stream:
                chunks = await self.client.chat.completions.create(**payload)
                message = await _joined(chunks)
            else:
                reply = await self.client.chat.completions.create(**payload)
                message = reply.choices[0].message.model_dump(exclude_none=True)
            if await _after_reply(messages, message):
                return turns

    async def aclose(self) -> None:
        await self.client.close()


async def _joined(chunks: Any) -> dict[str, Any]:
    """The assistant message of a stream of SDK chunks (text and tool calls by index)."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async for chunk in chunks:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for part in delta.tool_calls or ():
                call = calls.setdefault(
                    part.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["function"]["name"] = part.function.name or call["function"]["name"]
                    call["function"]["arguments"] += part.function.arguments or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


class PydanticAILoop:
    """``pydantic_ai.Agent`` on ``OpenAIChatModel``, one plain async tool."""

    name = "pydantic-ai"

    def __init__(self, url: str) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url, api_key=API_KEY))
        self.provider_client = model.client
        self.agent: Any = Agent(model, tools=[lookup])

    async def run(self, stream: bool) -> int:
        from pydantic_ai.messages import ModelResponse

        if stream:
            async with self.agent.run_stream_events("go") as events:
                async for event in events:
                    result = getattr(event, "result", None)
            messages = result.all_messages()
        else:
            messages = (await self.agent.run("go")).all_messages()
        return sum(isinstance(m, ModelResponse) for m in messages)

    async def aclose(self) -> None:
        await self.provider_client.close()


class OpenAIAgentsLoop:
    """``agents.Agent`` on ``OpenAIChatCompletionsModel`` (Chat Completions), tracing off."""

    name = "openai-agents"

    def __init__(self, url: str) -> None:
        from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
        from openai import AsyncOpenAI

        set_tracing_disabled(True)  # its default exports traces to the vendor: not here
        self.client = AsyncOpenAI(base_url=url, api_key=API_KEY)
        model = OpenAIChatCompletionsModel(model=MODEL, openai_client=self.client)
        self.agent = Agent(name="bench", model=model, tools=[function_tool(lookup)])

    async def run(self, stream: bool) -> int:
        from agents import Runner

        if stream:
            result: Any = Runner.run_streamed(self.agent, "go", max_turns=100)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(self.agent, "go", max_turns=100)
        return len(result.raw_responses)

    async def aclose(self) -> None:
        await self.client.close()


class LangGraphLoop:
    """LangGraph's prebuilt ReAct agent on ``ChatOpenAI``, one ``@tool``."""

    name = "LangGraph"

    def __init__(self, url: str) -> None:
        from langchain_core.tools import tool
        from langchain_openai import ChatOpenAI
        from langgraph.prebuilt import create_react_agent

        tools = [tool(lookup)]
        self.graphs = {
            stream: create_react_agent(
                ChatOpenAI(model=MODEL, base_url=url, api_key=API_KEY, streaming=stream), tools
            )
            for stream in (False, True)
        }
        self.config = {"recursion_limit": 100}

    async def run(self, stream: bool) -> int:
        graph, inputs = self.graphs[stream], {"messages": [("user", "go")]}
        if stream:
            state: Any = None
            async for mode, data in graph.astream(
                inputs, self.config, stream_mode=["messages", "values"]
            ):
                state = data if mode == "values" else state
        else:
            state = await graph.ainvoke(inputs, self.config)
        return sum(m.type == "ai" for m in state["messages"])

    async def aclose(self) -> None:
        pass  # ChatOpenAI keeps its clients for the process's life; the worker exits after


class RawLoop(AiohttpLoop):
    """``provider_overhead.AiohttpLoop`` under this comparison's name."""

    name = "raw aiohttp"


DRIVERS: dict[str, Callable[[str], Any]] = {
    "raw aiohttp": RawLoop,
    "openai SDK": OpenAISDKLoop,
    "agentloop": AgentloopLoop,
    "pydantic-ai": PydanticAILoop,
    "openai-agents": OpenAIAgentsLoop,
    "LangGraph": LangGraphLoop,
}
FRAMEWORKS = list(DRIVERS)

__all__ = ["CLIS", "DRIVERS", "FRAMEWORKS", "IMPORTS"]
