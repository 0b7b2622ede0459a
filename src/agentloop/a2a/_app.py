"""``A2AApp``: an agent behind the A2A protocol (1.0, JSON-RPC binding), as an ASGI app (SPEC 26).

Two routes, relative to where the app is mounted::

    GET  /.well-known/agent-card.json   the card: name, description, one JSONRPC 1.0 interface
                                        at ``url`` (default: the request's base), streaming
    POST /                              JSON-RPC: SendMessage, SendStreamingMessage (SSE),
                                        GetTask, CancelTask; any other method -32601

A body is checked before the official SDK's dispatcher reads it: over ``max_body_bytes`` is
HTTP 413, not JSON (nested beyond the parser's depth included) is -32700; the dispatcher then
answers a wrong shape with -32600/-32602, and ``agentloop.a2a._handler`` does the rest. A
client never sees a traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_1_0
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from agentloop.ui import _json_body as json_body
from agentloop.ui._asgi import lifespan

from ._handler import AgentHandler

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from starlette.types import Message, Receive, Scope, Send

    from agentloop.engine.agent import Agent

__all__ = ["A2AApp"]


class _WithRequest(DefaultServerCallContextBuilder):
    """The SDK's call context, carrying the request for the app's ``session=``/``deps=``."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["request"] = request
        return context


class A2AApp:
    """An ASGI app serving ``agent`` over A2A 1.0 (JSON-RPC): see the module.

    Args:
        agent: The agent every task runs on (each context on its own session).
        name: The card's ``name``.
        description: The card's ``description`` (and its skill's); empty: ``Ask the agent
            '<name>'.``, as ``MCPApp``'s tool, since A2A 1.0 requires both.
        url: The interface's URL on the card; default: the base URL of the card's request.
        session: ``(request, context_id) -> Session`` (sync or async): authenticate and pick
            the conversation; ``PermissionError`` refuses the caller (HTTP 403),
            ``LookupError`` says the context is not theirs (TaskNotFound, -32001). Default:
            one in-memory session per context id this app minted.
        deps: ``(request, message) -> deps`` (sync or async): the run's ``ctx.deps``
            (``message`` is the A2A ``Message``). A follow-up's too, its decisions in
            ``message``: ``PermissionError`` refuses it (HTTP 403, nothing recorded), which is
            how an app keeps approvals for its operators (docs/interop.md).
        max_body_bytes: The largest request body read (HTTP 413 above it).
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        name: str,
        description: str = "",
        url: str | None = None,
        session: Any = None,
        deps: Any = None,
        max_body_bytes: int = 1_000_000,
    ) -> None:
        self.agent = agent
        self.name = name
        self.description = description or f"Ask the agent '{name}'."
        self.url = url
        self.max_body_bytes = max_body_bytes
        self.handler = AgentHandler(agent, session, deps)
        self._dispatcher = JsonRpcDispatcher(self.handler, context_builder=_WithRequest())

    def card(self, base_url: str) -> pb.AgentCard:
        """The agent card, with the interface at ``url`` (or ``base_url``)."""
        return pb.AgentCard(
            name=self.name,
            description=self.description,
            version="1.0.0",
            supported_interfaces=[
                pb.AgentInterface(
                    url=self.url or base_url,
                    protocol_binding="JSONRPC",
                    protocol_version=PROTOCOL_VERSION_1_0,
                )
            ],
            capabilities=pb.AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain", "application/json"],
            skills=[
                pb.AgentSkill(
                    id=self.name, name=self.name, description=self.description, tags=["agent"]
                )
            ],
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI request (the module says which)."""
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        path = scope["path"].removeprefix(scope.get("root_path", "")) or "/"
        if path == AGENT_CARD_WELL_KNOWN_PATH and request.method == "GET":
            card = agent_card_to_dict(self.card(str(request.base_url)))
            await JSONResponse(card)(scope, receive, send)
        elif path != "/":
            await JSONResponse({"error": "not found"}, status_code=404)(scope, receive, send)
        elif request.method != "POST":
            await JSONResponse({"error": "POST JSON-RPC here"}, status_code=405)(
                scope, receive, send
            )
        else:
            await self._rpc(scope, receive, send, request)

    async def _rpc(self, scope: Scope, receive: Receive, send: Send, request: Request) -> None:
        body = await self._body(request)
        if body is None:
            refused = f"the request body is larger than {self.max_body_bytes} bytes"
            await JSONResponse({"error": refused}, status_code=413)(scope, receive, send)
            return
        try:
            json_body.decode(body)
        except ValueError as exc:
            error = {"code": -32700, "message": str(exc)}
            await JSONResponse({"jsonrpc": "2.0", "id": None, "error": error})(scope, receive, send)
            return
        replay = _replay(body, receive)
        try:
            response = await self._dispatcher.handle_requests(Request(scope, replay))
        except HTTPException as exc:
            response = JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        await response(scope, replay, send)

    async def _body(self, request: Request) -> bytes | None:
        """The body, or None when it is larger than the cap."""
        return await json_body.read_capped(request, self.max_body_bytes)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then the server's (a disconnect, for SSE)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
