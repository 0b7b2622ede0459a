"""Every tool call that starts in the browser ends there: a sweep of the kinds of call.

Each kind of call the engine can make (a handoff, an agent used as a tool and a stopped one, a
memory tool, tool search and the tool it found, a skill, an MCP tool, a call cut by the limits,
a timed-out, a vetoed, a breaker-refused, a loop-refused and a failing parallel call, a tool
result a guardrail tripped) runs through ``@ag-ui/client``'s ``HttpAgent`` and the ``ai``
package's chat (``tests/ui/node``), on a real uvicorn server on 127.0.0.1, with the model the
fake OpenAI-compatible server behind the real adapter. Each call the client saw start ends
(AG-UI: TOOL_CALL_END and one TOOL_CALL_RESULT; Vercel: an output or an output error), and the
run ends as it should (the hard error the kind ends in, else none).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.ui.test_seams_events import ag_ui, vercel

from agentloop import Agent, RunConfig, tool
from agentloop.errors import ToolError
from agentloop.guardrails import InputGuardrail
from agentloop.hooks import Block, Hook
from agentloop.mcp import MCPServer
from agentloop.memory import InMemoryMemoryStore, Memory, by_session
from agentloop.messages import ToolCallPart
from agentloop.providers import AnthropicClient, OpenAIClient
from agentloop.safety import LoopDetection, ToolBreaker
from agentloop.skills import SkillSet
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall
from agentloop.tools import ToolContext

FAULTY = Path(__file__).parents[1] / "mcp_servers" / "faulty.py"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def flaky(x: int) -> int:
    """A tool whose backend is down."""
    raise ToolError("the backend is down")


@tool
def broken(x: int) -> int:
    """A tool with a bug."""
    raise RuntimeError("bug")


@tool(defer_loading=True)
def weather(city: str) -> str:
    """Tell the weather of a city."""
    return f"sunny in {city}"


@tool(timeout=0.05)
async def stuck(x: int) -> str:
    """A tool that never answers."""
    await asyncio.Event().wait()
    return "never"


class Veto(Hook):
    """Blocks every call to ``add``."""

    async def pre_tool(self, call: ToolCallPart, ctx: ToolContext[Any]) -> Block | None:
        return Block("adding is not allowed here") if call.name == "add" else None


_ids = itertools.count()


def calls(*pairs: tuple[str, dict[str, Any]]) -> FakeReply:
    """One reply saying a word and asking for these calls, each with an id of its own."""
    asked = [FakeToolCall(name, args, id=f"c{next(_ids)}") for name, args in pairs]
    return FakeReply("On it.", tool_calls=asked)  # words first: Claude's call is block 1


Build = Callable[[Any, Path], Agent[Any]]


def handoff(client: Any, tmp: Path) -> Agent[Any]:
    return Agent(client, handoffs=[Agent(client, name="billing", tools=[add])])


def sub_agent(client: Any, tmp: Path) -> Agent[Any]:
    child = Agent(client, tools=[add])
    return Agent(client, tools=[child.as_tool(name="helper", description="Helps.")])


def stopped_sub_agent(client: Any, tmp: Path) -> Agent[Any]:
    child = Agent(client, tools=[add], config=RunConfig(max_turns=1))
    return Agent(client, tools=[child.as_tool(name="helper", description="Helps.")])


def memory(client: Any, tmp: Path) -> Agent[Any]:
    return Agent(client, memory=Memory(InMemoryMemoryStore(), namespace=by_session))


def searching(client: Any, tmp: Path) -> Agent[Any]:
    return Agent(client, tools=[add, weather], config=RunConfig(tool_search="local"))


def skills(client: Any, tmp: Path) -> Agent[Any]:
    folder = tmp / "skills" / "pdf-forms"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text("---\nname: pdf-forms\ndescription: Fill forms.\n---\nUse it.")
    return Agent(client, toolsets=[SkillSet(tmp / "skills")])


def mcp(client: Any, tmp: Path) -> Agent[Any]:
    server = MCPServer.stdio(sys.executable, [str(FAULTY)], name="faulty")
    return Agent(client, tools=[server])


def cut(client: Any, tmp: Path) -> Agent[Any]:
    return Agent(client, tools=[add], config=RunConfig(max_tool_calls_per_turn=1))


def timed_out(client: Any, tmp: Path) -> Agent[Any]:
    return Agent(client, tools=[stuck])


def vetoed(client: Any, tmp: Path) -> Agent[Any]:
    return Agent(client, tools=[add], hooks=[Veto()])


def breaker(client: Any, tmp: Path) -> Agent[Any]:
    config = RunConfig(tool_breaker=ToolBreaker(failure_threshold=1))
    return Agent(client, tools=[broken], config=config)


def no_threes(ctx: Any, text: str) -> str | None:
    return "a three" if "3" in text else None


def guarded_result(client: Any, tmp: Path) -> Agent[Any]:
    guard = InputGuardrail(no_threes, tool_results=True)
    return Agent(client, tools=[add], guardrails=[guard])


def looping(client: Any, tmp: Path) -> Agent[Any]:
    detection = LoopDetection(warn_threshold=2, stop_threshold=3)
    return Agent(client, tools=[add], config=RunConfig(loop_detection=detection))


def parallel(client: Any, tmp: Path) -> Agent[Any]:
    return Agent(client, tools=[add, flaky], config=RunConfig(parallel_tool_calls=True))


# kind: (the agent, the model's script, the hard error the run ends in, or None)
KINDS: dict[str, tuple[Build, list[Any], str | None]] = {
    "handoff": (
        handoff,
        [calls(("transfer_to_billing", {})), calls(("add", {"a": 1, "b": 2})), FakeReply("3")],
        None,
    ),
    "sub_agent": (
        sub_agent,
        [calls(("helper", {"input": "add"})), FakeReply("child says 3"), FakeReply("3")],
        None,
    ),
    "memory": (
        memory,
        [
            calls(("remember", {"text": "likes tea"})),
            calls(("recall", {"query": "tea"})),
            FakeReply("ok"),
        ],
        None,
    ),
    "tool_search": (
        searching,
        [
            calls(("weather", {"city": "Paris"})),
            calls(("search_tools", {"query": "weather"})),
            calls(("weather", {"city": "Paris"})),
            FakeReply("sunny"),
        ],
        None,
    ),
    "skill": (
        skills,
        [
            calls(("load_skill", {"name": "pdf-forms"})),
            calls(("load_skill", {"name": "pdf"})),
            FakeReply("ok"),
        ],
        None,
    ),
    "mcp": (
        mcp,
        [
            calls(("echo", {"text": "hi"})),
            calls(("refuse", {"why": "no"})),
            calls(("crash", {})),
            FakeReply("ok"),
        ],
        None,
    ),
    "cut": (
        cut,
        [calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})), FakeReply("ok")],
        "ToolLimitReached",
    ),
    "stopped_sub_agent": (
        stopped_sub_agent,
        [calls(("helper", {"input": "add"})), calls(("add", {"a": 1, "b": 2})), FakeReply("ok")],
        None,
    ),
    "guarded_result": (
        guarded_result,
        [calls(("add", {"a": 1, "b": 2})), FakeReply("never")],
        "GuardrailTripped",
    ),
    "timed_out": (timed_out, [calls(("stuck", {"x": 1})), FakeReply("ok")], None),
    "vetoed": (vetoed, [calls(("add", {"a": 1, "b": 2})), FakeReply("ok")], None),
    "breaker": (
        breaker,
        [calls(("broken", {"x": 1})), calls(("broken", {"x": 2})), FakeReply("ok")],
        None,
    ),
    "loop": (
        looping,
        [*(calls(("add", {"a": 1, "b": 2})) for _ in range(4)), FakeReply("never")],
        "LoopDetected",
    ),
    "parallel": (
        parallel,
        [calls(("add", {"a": 1, "b": 2}), ("flaky", {"x": 1})), FakeReply("ok")],
        None,
    ),
}


@asynccontextmanager
async def agent_of(kind: str, wire: str, tmp: Path) -> AsyncIterator[Agent[Any]]:
    build, script, _ = KINDS[kind]
    async with FakeProviderServer(list(script)) as fake:
        client: Any = (
            OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
            if wire == "openai"
            else AnthropicClient("claude-sonnet-4-5", api_key="k", base_url=fake.root_url)
        )
        async with client:
            yield build(client, tmp)


WIRES = pytest.mark.parametrize("wire", ["openai", "anthropic"])


@WIRES  # AG-UI on both wires: its streamed calls were matched by the wire's block index
@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_ag_ui(kind: str, wire: str, tmp_path: Path) -> None:
    async with agent_of(kind, wire, tmp_path) as agent:
        seen = await ag_ui(agent, "go", tmp_path)
    assert seen["calls"] and seen["unfinished"] == []
    assert (seen["error"] or {}).get("code") == KINDS[kind][2]


@pytest.mark.parametrize("wire", ["anthropic"])  # the wire whose calls follow words
@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_vercel(kind: str, wire: str, tmp_path: Path) -> None:
    async with agent_of(kind, wire, tmp_path) as agent:
        seen = await vercel(agent, "go")
    tools = [
        (p.get("toolCallId"), p.get("state"), p.get("output"), p.get("errorText"))
        for p in seen["parts"]
        if p["type"].startswith("tool-")
    ]
    assert tools and seen["unfinished"] == []
    error = KINDS[kind][2]
    assert [e.split(":")[0] for e in seen["errors"]] == ([error] if error else [])
