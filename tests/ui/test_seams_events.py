"""Every call ends and reasoning comes first, as the real clients see it (issue 32, items 2, 5).

The AG-UI side is ``@ag-ui/client``'s ``HttpAgent`` (``node/agui_seams.mjs``) and the recorded
stream also passes ``ag-ui-validate``; the Vercel side is the ``ai`` package's own chat
(``node/vercel_seams.mjs``). Both scripts check on the client: every tool call the client saw
start has its end and exactly one result, and every reasoning part comes before the text. The
apps run on a real uvicorn server on 127.0.0.1; the model is the fake OpenAI-compatible server
behind the real adapter, or a model client that does not stream (it answers whole).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
import uvicorn

from agentloop import Agent, tool
from agentloop.messages import Message, TextPart, ThinkingPart
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent
from agentloop.providers import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, FunctionModel
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

NODE_DIR = Path(__file__).parent / "node"
VALIDATE = shutil.which("ag-ui-validate") or str(Path(sys.executable).parent / "ag-ui-validate")

if shutil.which("node") is None:
    pytest.skip("node is not installed (make ui-deps)", allow_module_level=True)
for package in ("ai", "@ag-ui/client"):
    if not (NODE_DIR / "node_modules" / package / "package.json").exists():
        missing = f"tests/ui/node/node_modules/{package} is missing (make ui-deps)"
        pytest.skip(missing, allow_module_level=True)


class Whole:
    """A model client that does not stream: its ``stream`` is the whole reply as ``done``."""

    def __init__(self, reply: Callable[[ModelRequest], ModelResponse]) -> None:
        self.inner = FunctionModel(reply)
        self.model, self.provider = "whole", "whole"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield StreamEvent("done", response=await self.inner.complete(request))

    async def aclose(self) -> None:
        await self.inner.aclose()


def thoughtful(request: ModelRequest) -> ModelResponse:
    """A reply whose reasoning precedes its answer."""
    parts = (ThinkingPart("six times seven"), TextPart("42"))
    return ModelResponse(Message("assistant", parts), stop_reason="end_turn")


CLIENTS: dict[str, Callable[[], ModelClient]] = {
    "whole": lambda: Whole(thoughtful),
    "function_model": lambda: FunctionModel(thoughtful),
}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Tap:
    """An ASGI wrapper that keeps every byte each response sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        chunks: list[bytes] = []

        async def tapped(message: Any) -> None:
            if message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, tapped)
        finally:
            self.bodies.append(b"".join(chunks))


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` on a real uvicorn server on a free port of 127.0.0.1; yields its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def node(script: str, *args: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        "node", str(NODE_DIR / script), *args, stdout=-1, stderr=-1
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)  # type: ignore[no-any-return]


async def ag_ui(agent: Agent[Any], text: str, tmp_path: Path) -> dict[str, Any]:
    """One run through ``@ag-ui/client``; the recorded stream passes ``ag-ui-validate``."""
    tap = Tap(AGUIApp(agent))
    async with serving(tap) as url:
        seen = await node("agui_seams.mjs", url, text)
    capture = tmp_path / "run.sse"
    capture.write_bytes(tap.bodies[0])
    validator = await asyncio.create_subprocess_exec(
        VALIDATE, str(capture), "--json", stdout=-1, stderr=-1
    )
    report, _ = await asyncio.wait_for(validator.communicate(), 60)
    assert validator.returncode == 0, report.decode()
    return seen


async def vercel(agent: Agent[Any], text: str) -> dict[str, Any]:
    """One message through the ``ai`` package's chat."""
    async with serving(VercelAIApp(agent)) as url:
        return await node("vercel_seams.mjs", json.dumps({"url": url + "api/chat", "send": text}))


@asynccontextmanager
async def unknown_tool_agent() -> AsyncIterator[Agent[Any]]:
    """An agent whose model calls a tool it was never offered, then answers."""
    script = [
        FakeReply(tool_calls=[FakeToolCall("nope", {"x": 1}, id="call_nope")]),
        FakeReply("there is no such tool"),
    ]
    async with FakeProviderServer(script) as fake:
        client = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
        async with client:
            yield Agent(client, tools=[add])


async def test_ag_ui_an_unknown_tool_call_ends_with_its_soft_error(tmp_path: Path) -> None:
    async with unknown_tool_agent() as agent:
        seen = await ag_ui(agent, "use nope", tmp_path)
    assert seen["error"] is None and seen["outcome"] == "success"
    assert seen["unfinished"] == []
    call = seen["calls"]["call_nope"]
    assert call["name"] == "nope" and call["ended"]
    assert call["results"] == [{"content": "tool 'nope' is not available", "error": True}]
    tool_messages = [m for m in seen["messages"] if m["role"] == "tool"]
    assert [m["toolCallId"] for m in tool_messages] == ["call_nope"]


async def test_vercel_an_unknown_tool_call_ends_with_its_soft_error() -> None:
    async with unknown_tool_agent() as agent:
        seen = await vercel(agent, "use nope")
    assert seen["errors"] == [] and seen["status"] == "ready"
    assert seen["unfinished"] == []
    [part] = [p for p in seen["parts"] if p.get("toolCallId") == "call_nope"]
    assert part["state"] == "output-error"
    assert part["errorText"] == "tool 'nope' is not available"


@pytest.mark.parametrize("client", sorted(CLIENTS))
async def test_ag_ui_reasoning_of_a_reply_that_came_whole_comes_first(
    client: str, tmp_path: Path
) -> None:
    seen = await ag_ui(Agent(CLIENTS[client]()), "the answer?", tmp_path)
    assert seen["error"] is None and seen["reasoningFirst"], seen["types"]
    kinds = seen["types"]
    assert kinds.index("REASONING_END") < kinds.index("TEXT_MESSAGE_START")
    assert [m["content"] for m in seen["messages"] if m["role"] == "assistant"] == ["42"]
    [thought] = [m for m in seen["messages"] if m["role"] == "reasoning"]
    assert thought["content"] == "six times seven"


@pytest.mark.parametrize("client", sorted(CLIENTS))
async def test_vercel_reasoning_of_a_reply_that_came_whole_comes_first(client: str) -> None:
    seen = await vercel(Agent(CLIENTS[client]()), "the answer?")
    assert seen["errors"] == [] and seen["reasoningFirst"], seen["parts"]
    assert [(p["type"], p["text"]) for p in seen["parts"]] == [
        ("reasoning", "six times seven"),
        ("text", "42"),
    ]
