"""An agent served over MCP stdio for the tests: ``python mcp_agent.py MODE``.

``basic`` looks something up, then answers; ``failing`` fails with a key in its message.
"""

from __future__ import annotations

import asyncio
import sys

from agentloop import Agent, tool
from agentloop.errors import AuthError
from agentloop.mcp import serve_stdio
from agentloop.testing import ScriptedModel, call, reply

KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2


@tool
def lookup(city: str) -> str:
    """Look a city's weather up."""
    return f"{city}: 21C"


def make(mode: str) -> Agent[str | None]:
    if mode == "failing":
        return Agent(ScriptedModel([AuthError(f"bad key {KEY}")]))
    return Agent(
        ScriptedModel([call("lookup", {"city": "Oslo"}), reply("Oslo is 21C")]), tools=[lookup]
    )


if __name__ == "__main__":
    asyncio.run(serve_stdio(make(sys.argv[1]), name="helper", description="Answers questions."))
