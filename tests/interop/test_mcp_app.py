"""An agent as an MCP server, driven by the official mcp client over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pydantic
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import agentloop
from agentloop import Agent, Observer, ToolContext, tool
from agentloop.events import Event, RunFinished
from agentloop.mcp import MCPApp
from agentloop.testing import FunctionModel, ScriptedModel, call, reply

from ._serve import serving

HERE = Path(__file__).parent
KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2


@contextlib.asynccontextmanager
async def over_stdio(mode: str, **options: Any) -> AsyncIterator[ClientSession]:
    source = str(Path(agentloop.__file__).parents[1])  # this checkout's agentloop, not another
    params = StdioServerParameters(
        command=sys.executable, args=[str(HERE / "mcp_agent.py"), mode], env={"PYTHONPATH": source}
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, **options) as s:
        await s.initialize()
        yield s


@contextlib.asynccontextmanager
async def over_http(app: MCPApp, **options: Any) -> AsyncIterator[ClientSession]:
    async with serving(app, lifespan=True) as url:
        async with streamable_http_client(url + "/mcp") as (read, write):
            async with ClientSession(read, write, **options) as session:
                await session.initialize()
                yield session


def text(result: types.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return block.text


async def test_over_stdio_one_tool_its_output_and_progress_from_the_runs_events() -> None:
    seen: list[tuple[float, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with over_stdio("basic") as session:
        [listed] = (await session.list_tools()).tools
        assert (listed.name, listed.description) == ("helper", "Answers questions.")
        assert listed.input_schema["required"] == ["input"]
        result = await session.call_tool(
            "helper", {"input": "weather?"}, progress_callback=progress
        )
        bad = await session.call_tool("helper", {"question": "weather?"})
    assert (text(result), result.is_error) == ("Oslo is 21C", False)
    assert [m for _, m in seen] == ["tool 'lookup' finished", "turn 1 finished", "turn 2 finished"]
    assert [v for v, _ in seen] == [1, 2, 3]
    assert (
        bad.is_error and text(bad) == "Invalid arguments for tool 'helper': input: Field required"
    )


async def test_over_stdio_a_hard_error_is_an_is_error_result_redacted() -> None:
    async with over_stdio("failing") as session:
        result = await session.call_tool("helper", {"input": "hi"})
    assert result.is_error
    assert text(result).startswith("agent 'helper' stopped: AuthError: bad key ")
    assert KEY not in text(result)


class Weather(pydantic.BaseModel):
    city: str
    celsius: int


@tool
def forecast(city: str) -> str:
    """Forecast a city's weather."""
    return f"{city}: sunny"


@tool(requires_approval=True)
def book(city: str) -> str:
    """Book a trip."""
    return f"booked {city}"


async def test_over_http_typed_output_is_json_and_structured_and_tools_can_be_exposed() -> None:
    answer = call("final_result", {"city": "Oslo", "celsius": 21})
    typed = Agent(ScriptedModel([answer]), output_type=Weather, tools=[forecast, book])
    async with over_http(MCPApp(typed, name="weather", expose_tools=True)) as session:
        names = [t.name for t in (await session.list_tools()).tools]
        result = await session.call_tool("weather", {"input": "Oslo?"})
        direct = await session.call_tool("forecast", {"city": "Rome"})
        hidden = await session.call_tool("book", {"city": "Rome"})
    assert names == ["weather", "forecast"]  # book needs a decision: not exposed
    assert text(result) == '{"city": "Oslo", "celsius": 21}'
    assert result.structured_content == {"city": "Oslo", "celsius": 21}
    assert text(direct) == "Rome: sunny" and not direct.is_error
    assert hidden.is_error and text(hidden) == "tool 'book' is not available"


def booking_agent() -> Agent[str | None]:
    def answer(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return reply(last.parts[0].content)
        return call("book", {"city": "Oslo"})

    return Agent(FunctionModel(answer), tools=[book])


async def test_a_pause_goes_through_elicitation_where_the_client_has_it() -> None:
    asked: list[types.ElicitRequestParams] = []

    def answering(content: dict[str, Any] | None, action: str = "accept") -> Any:
        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params)
            return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

        return elicit

    app = MCPApp(booking_agent(), name="travel")
    async with over_http(app, elicitation_callback=answering({"decision": "approve"})) as session:
        approved = await session.call_tool("travel", {"input": "book Oslo"})
    assert text(approved) == "booked Oslo"
    schema = asked[0].requested_schema  # type: ignore[union-attr]
    assert schema["properties"]["decision"]["enum"] == ["approve", "deny"]
    denying = answering({"decision": "deny", "message": "too far"})
    async with over_http(app, elicitation_callback=denying) as session:
        denied = await session.call_tool("travel", {"input": "book Oslo"})
    assert text(denied) == "User denied permission: too far"
    async with over_http(app, elicitation_callback=answering(None, "decline")) as session:
        declined = await session.call_tool("travel", {"input": "book Oslo"})
    assert text(declined) == "User denied permission"
    async with over_http(app) as session:  # no elicitation: the client cannot decide
        paused = await session.call_tool("travel", {"input": "book Oslo"})
    assert paused.is_error
    assert text(paused) == "agent 'travel' paused: 'book' needs a decision this client cannot give"


async def test_deps_reach_the_tools_and_a_failing_deps_is_an_is_error_result() -> None:
    seen: list[Any] = []

    @tool
    def whoami(ctx: ToolContext[Any]) -> str:
        """Who asks."""
        seen.append(ctx.deps)
        return "ok"

    calls = iter(["fine", "broken"])

    def deps(ctx: Any) -> Any:
        if next(calls) == "broken":
            raise RuntimeError(f"no db, key {KEY}")
        return {"user": "ann"}

    agent = Agent(ScriptedModel([call("whoami", {}), reply("done")]), tools=[whoami])
    async with over_http(MCPApp(agent, name="me", deps=deps)) as session:
        done = await session.call_tool("me", {"input": "who?"})
        failed = await session.call_tool("me", {"input": "who?"})
    assert text(done) == "done" and seen == [{"user": "ann"}]
    assert failed.is_error
    assert text(failed) == (
        "agent 'me' stopped: the application's deps= callable failed (RuntimeError)"
    )


async def test_an_external_call_is_answered_through_elicitation() -> None:
    @tool(external=True)
    def ask_customer(question: str) -> str:
        """Ask the customer."""
        raise AssertionError("never run by the agent")

    def answer(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return reply(f"The customer said: {last.parts[0].content}")
        return call("ask_customer", {"question": "Which colour?"})

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert params.requested_schema["required"] == ["answer"]  # type: ignore[union-attr]
        return types.ElicitResult(action="accept", content={"answer": "blue"})

    app = MCPApp(Agent(FunctionModel(answer), tools=[ask_customer]), name="shop")
    async with over_http(app, elicitation_callback=elicit) as session:
        result = await session.call_tool("shop", {"input": "paint it"})
    assert text(result) == "The customer said: blue" and not result.is_error


class Ends(Observer):
    def __init__(self) -> None:
        self.runs: list[Any] = []

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self.runs.append(event.run)


async def test_a_cancelled_call_cancels_the_run_and_its_tools_see_the_token() -> None:
    started = asyncio.Event()
    tokens: list[bool] = []

    @tool
    async def wait(ctx: ToolContext[Any]) -> str:
        """Wait for ever."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            tokens.append(ctx.cancel.is_cancelled())
        return "never"

    ends = Ends()
    agent = Agent(ScriptedModel([call("wait", {})]), tools=[wait], observers=[ends])
    async with over_http(MCPApp(agent, name="slow")) as session:
        async with anyio.create_task_group() as group:
            group.start_soon(session.call_tool, "slow", {"input": "go"})
            await started.wait()
            group.cancel_scope.cancel()
        for _ in range(300):
            if ends.runs:
                break
            await asyncio.sleep(0.01)
    assert tokens == [True]
    [run] = ends.runs
    assert run.stop_reason is not None and run.stop_reason.is_cancelled()
