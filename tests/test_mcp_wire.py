"""What an MCP server sends that is not what it seems (issue 25, item 10), over real servers.

A JSON-RPC error -32000 from a live server is the tool's own error (soft, no restart); a
``result`` that is not an object answers the call at once; a start-up error never quotes a
value the user gave in ``env``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig
from agentloop.errors import ConfigurationError
from agentloop.mcp import MCPServer
from agentloop.run import Run
from agentloop.testing import ScriptedModel, call, reply

SERVERS = Path(__file__).parent / "mcp_servers"


def results(run: Run[Any]) -> list[str]:
    return [p.content for m in run.messages for p in m.tool_results_parts]


async def test_a_minus_32000_error_is_the_tools_own_and_the_server_lives_on(
    tmp_path: Path,
) -> None:
    server = MCPServer.stdio(
        sys.executable, [str(SERVERS / "faulty.py")], env={"MARKER_DIR": str(tmp_path)}
    )
    model = ScriptedModel([call("pid"), call("own_error"), call("pid"), reply("done")])
    async with Agent(model, tools=[server]) as agent:
        run = await agent.run("go")
    first, error, second = results(run)
    assert error == "rate limited, try again in a minute"
    assert first == second  # the same process: nobody restarted it


@pytest.mark.parametrize(
    ("raw", "kind"),
    [("5", "number"), ('"yes"', "string"), ("[1, 2]", "list"), ("null", "null")],
)
async def test_a_result_that_is_not_an_object_answers_at_once(raw: str, kind: str) -> None:
    server = MCPServer.stdio(
        sys.executable, [str(SERVERS / "raw.py")], env={"RAW_RESULT": raw}, name="raw"
    )
    model = ScriptedModel([call("number"), reply("done")])
    async with Agent(model, tools=[server], config=RunConfig(tool_timeout=None)) as agent:
        async with asyncio.timeout(20):
            run = await agent.run("go")
    assert results(run) == [
        f"tool server 'raw' sent an invalid result: the result is a {kind}, not an object"
    ]
    assert run.output == "done"


async def test_a_start_error_never_quotes_a_value_given_in_env(tmp_path: Path) -> None:
    secret = "hunter2-not-for-logs"
    (tmp_path / "fail-start").write_text(f"token {secret} rejected")  # what a server might say
    server = MCPServer.stdio(
        sys.executable,
        [str(SERVERS / "faulty.py")],
        env={"MARKER_DIR": str(tmp_path), "SERVICE_TOKEN": secret},
        name="faulty",
    )
    with pytest.raises(ConfigurationError) as caught:
        await Agent(ScriptedModel([reply("never")]), tools=[server]).run("go")
    assert str(caught.value) == (
        "tool server 'faulty' could not start: it closed the connection during start-up; "
        "its stderr ends: faulty: cannot start: token [REDACTED] rejected"
    )
