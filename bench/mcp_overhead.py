"""Per-call overhead of an MCP tool through an agent vs a bare ``mcp`` ``ClientSession.call_tool``.

One MCP server (this script with ``--serve``: the SDK's ``MCPServer`` over stdio, one ``echo``
tool) is started per measurement. Three clients make N calls of ``echo`` on it:

- ``bare``: the SDK alone, ``stdio_client`` + ``ClientSession``, ``await session.call_tool(...)``
  N times in a row;
- ``agent, one turn``: ``Agent(FunctionModel, tools=[MCPServer.stdio(...)])`` whose model asks
  for all N calls in one reply (dispatched one after another, the default), then answers;
- ``agent, turn per call``: the same agent, one call per model turn (N + 1 turns): the engine's
  per-turn work (request building, transcript, safety) on top of the call.

Each runs R rounds on a server that is already up (start-up is not timed); the median round is
kept. Reported per call: wall-clock microseconds, client CPU microseconds (``process_time`` of
this process; the server's CPU is in its own), and the ratio to ``bare`` (the goal: <= 1.2x
wall clock for ``agent, one turn``). The model is in-process (``FunctionModel``), so what the
agent adds is agentloop's own work: schema check, dispatch pipeline, result text, the relay.

    python bench/mcp_overhead.py [--calls 200] [--rounds 7]

A benchmark, not a test. Nothing leaves the machine (stdio pipes only).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable


def arguments(i: int) -> dict[str, str]:
    """Each call's own arguments (repeating one call would be a loop the agent stops)."""
    return {"text": f"hello, server #{i}"}


def serve() -> None:
    """The benchmark's MCP server (stdio)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    server.run()


Round = Callable[[int], Awaitable[None]]


async def measure(rounds: int, calls: int, one_round: Round) -> tuple[float, float]:
    """Median (wall, cpu) seconds per call over ``rounds`` rounds of ``calls`` calls."""
    await one_round(min(calls, 20))  # warm up: imports, caches, the server's first calls
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        await one_round(calls)
        walls.append((time.perf_counter() - wall) / calls)
        cpus.append((time.process_time() - cpu) / calls)
    return statistics.median(walls), statistics.median(cpus)


async def bare(rounds: int, calls: int) -> tuple[float, float]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[__file__, "--serve"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def one_round(n: int) -> None:
            for i in range(n):
                result = await session.call_tool("echo", arguments(i))
                assert not result.is_error

        return await measure(rounds, calls, one_round)


async def through_agent(rounds: int, calls: int, *, per_turn: bool) -> tuple[float, float]:
    from agentloop import Agent, ModelRequest, RunConfig
    from agentloop.mcp import MCPServer
    from agentloop.testing import FunctionModel, call, reply

    wanted = [0]

    def model(request: ModelRequest) -> object:
        done = sum(len(m.tool_results_parts) for m in request.messages)
        if done >= wanted[0]:
            return reply("done")
        if per_turn:
            return call("echo", arguments(done))
        return [call("echo", arguments(i)) for i in range(wanted[0])]

    server = MCPServer.stdio(sys.executable, [__file__, "--serve"], name="bench")
    config = RunConfig(max_turns=calls + 10, context_window=0)
    async with Agent(FunctionModel(model), tools=[server], config=config) as agent:

        async def one_round(n: int) -> None:
            wanted[0] = n
            run = await agent.fork().run("echo")  # a fresh conversation, the same server
            assert sum(len(m.tool_results_parts) for m in run.messages) == n

        await agent.run("start the server")  # started and listed before timing
        return await measure(rounds, calls, one_round)


async def main(calls: int, rounds: int) -> None:
    rows = [
        ("bare ClientSession.call_tool", await bare(rounds, calls)),
        ("agent, one turn of N calls", await through_agent(rounds, calls, per_turn=False)),
        ("agent, one call per turn", await through_agent(rounds, calls, per_turn=True)),
    ]
    base_wall, base_cpu = rows[0][1]
    print(f"MCP tool call overhead: {calls} calls per round, median of {rounds} rounds")
    print(f"{'client':<30} {'wall us/call':>12} {'ratio':>6} {'cpu us/call':>12} {'ratio':>6}")
    for name, (wall, cpu) in rows:
        print(
            f"{name:<30} {wall * 1e6:>12.1f} {wall / base_wall:>5.2f}x "
            f"{cpu * 1e6:>12.1f} {cpu / base_cpu:>5.2f}x"
        )


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        parser.add_argument("--calls", type=int, default=200)
        parser.add_argument("--rounds", type=int, default=7)
        options = parser.parse_args()
        asyncio.run(main(options.calls, options.rounds))
