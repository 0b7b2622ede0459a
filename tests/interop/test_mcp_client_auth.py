"""An ``MCPServer.http`` that answers 401/403 is the hard ``RemoteAuthError`` (SPEC 3, 13).

A real MCP server (an agent served by ``MCPApp``) on uvicorn at 127.0.0.1, behind a gate that
answers a status of our choosing to the JSON-RPC methods we name.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Agent
from agentloop.errors import RemoteAuthError
from agentloop.mcp import MCPApp, MCPServer
from agentloop.testing import ScriptedModel, call, reply

from ._serve import serving


class Gate:
    """An ASGI wrapper: a POST whose body names one of ``methods`` is answered ``status``."""

    def __init__(self, app: Any, status: int, methods: tuple[str, ...]) -> None:
        self.app, self.status, self.methods = app, status, methods

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if any(f'"method":"{m}"'.encode() in body.replace(b" ", b"") for m in self.methods):
            headers = [(b"content-type", b"text/plain")]
            await send({"type": "http.response.start", "status": self.status, "headers": headers})
            await send({"type": "http.response.body", "body": b"no"})
            return
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def served() -> MCPApp:
    return MCPApp(Agent(ScriptedModel([reply("from afar")] * 3)), name="helper")


def parent(url: str) -> Agent[Any]:
    server = MCPServer.http(url + "/mcp", name="vault", headers={"Authorization": "Bearer k"})
    model = ScriptedModel([call("helper", {"input": "please"}), reply("thanks")])
    return Agent(model, tools=[server])


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_call_is_the_hard_remote_auth_error(status: int) -> None:
    async with serving(Gate(served(), status, ("tools/call",)), lifespan=True) as url:
        agent = parent(url)
        with pytest.raises(RemoteAuthError) as refused:
            await agent.run("go")
        await agent.aclose()
    assert (refused.value.agent, refused.value.status) == ("vault", status)
    assert str(refused.value) == f"remote agent 'vault' refused our credentials (HTTP {status})"
    assert agent.runs[-1].stop_reason is refused.value


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_start_is_the_hard_remote_auth_error(status: int) -> None:
    async with serving(Gate(served(), status, ("initialize",)), lifespan=True) as url:
        agent = parent(url)
        with pytest.raises(RemoteAuthError) as refused:
            await agent.run("go")
        await agent.aclose()
    assert (refused.value.agent, refused.value.status) == ("vault", status)


async def test_a_refused_listing_is_the_hard_remote_auth_error() -> None:
    async with serving(Gate(served(), 401, ("tools/list",)), lifespan=True) as url:
        agent = parent(url)
        with pytest.raises(RemoteAuthError) as refused:
            await agent.run("go")
        await agent.aclose()
    assert refused.value.status == 401


async def test_other_statuses_stay_soft() -> None:
    async with serving(Gate(served(), 500, ("tools/call",)), lifespan=True) as url:
        agent = parent(url)
        run = await agent.run("go")
        await agent.aclose()
    [result] = [r for turn in run.turns for r in turn.tool_results]
    assert result.is_error and run.output == "thanks"
