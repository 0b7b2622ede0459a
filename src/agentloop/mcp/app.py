"""An agent as an MCP server (SPEC 26): ``MCPApp`` (streamable HTTP) and ``serve_stdio``.

Built on the official SDK's low-level ``mcp.server.lowlevel.Server``. The server lists one
tool, ``name``, whose input is ``{"input": string}``; ``expose_tools=True`` adds the agent's
own tools but those that need a decision (``requires_approval``/``external``) and the engine's
that only work inside a run (a handoff's ``transfer_to_<name>``, memory's). Its tool sources
(MCP servers in ``tools=``) are listed before the tools are, so theirs are there from the first
``tools/list``, not only after a first run. ``Agent(toolsets=...)`` (SPEC 22) is never exposed: a
toolset resolves per run, by the run's context and deps, which a direct call has none of. One
call::

    arguments     ``input`` a string, else isError with SPEC 3's validation text
    session       a fresh session of the agent (``deps(ctx)`` gives the run's deps)
    progress      with a ``progressToken``: one ``notifications/progress`` per
                  ToolCallFinished (``tool '<name>' finished``) and TurnFinished
                  (``turn <n> finished``), increasing
    pause         each pending call asked through elicitation when the client has it
                  (approval: ``{decision: "approve"|"deny", message?}``; external:
                  ``{answer}``; a decline means Deny), then the same run continues; without
                  elicitation, or when the client's elicitation fails: isError ``agent
                  '<name>' paused: '<tool>' needs a decision this client cannot give``, and
                  the run is ended ``Cancelled`` (``cancel_run``:
                  nobody else holds the call's session, so it is never left paused)
    result        the output (typed: JSON text and ``structuredContent``)
    hard error    isError ``agent '<name>' stopped: <ErrorClass>: <message>`` (redacted)
    cancelled     ``notifications/cancelled`` cancels the run (``Cancelled``; tools see their
                  cancel token), while it asks for a decision too
"""

from __future__ import annotations

import inspect
import json
import logging
import traceback
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from agentloop import events as ev
from agentloop.batching import refuse_batch
from agentloop.cancel import CancelToken
from agentloop.errors import AgentLoopError, ToolExecutionError, ToolNotFound
from agentloop.pausing import Answer, Approve, Decision, Deny, PendingCall
from agentloop.safety._client_text import served_failure
from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from starlette.types import Receive, Scope, Send

    from agentloop.engine.agent import Agent
    from agentloop.engine.session import Session

__all__ = ["MCPApp", "agent_server", "serve_stdio"]

_log = logging.getLogger("agentloop")

_INPUT_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The request for the agent."}},
    "required": ["input"],
}
_APPROVAL = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "deny"]},
        "message": {"type": "string", "description": "Why (read by the agent when denied)"},
    },
    "required": ["decision"],
}
_EXTERNAL = {
    "type": "object",
    "properties": {"answer": {"type": "string", "description": "The call's result"}},
    "required": ["answer"],
}


def agent_server(
    agent: Agent[Any],
    *,
    name: str,
    description: str | None = None,
    expose_tools: bool = False,
    deps: Any = None,
) -> Server[Any]:
    """The SDK ``Server`` that serves ``agent`` as the tool ``name`` (see the module)."""
    calls = _AgentCalls(agent, name, description, expose_tools, deps)
    return Server(name, on_list_tools=calls.list_tools, on_call_tool=calls.call_tool)


async def serve_stdio(
    agent: Agent[Any],
    *,
    name: str,
    description: str | None = None,
    expose_tools: bool = False,
    deps: Any = None,
) -> None:
    """Serve ``agent`` as an MCP server over this process's stdin/stdout until they close."""
    from mcp.server.stdio import stdio_server

    server = agent_server(
        agent, name=name, description=description, expose_tools=expose_tools, deps=deps
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class MCPApp:
    """``agent`` as an MCP server over streamable HTTP at ``/mcp``, as an ASGI app.

    Args:
        agent: The agent each call runs (a fresh session per call).
        name: The server's and the tool's name.
        description: The tool's description (default: ``Ask the agent '<name>'.``).
        expose_tools: Also list the agent's tools (not those that need a decision).
        deps: ``(ctx) -> deps`` (sync or async), given the SDK's request context.

    The SDK's session manager runs in the app's lifespan: serve it with a server that sends
    lifespan events (uvicorn does), or mount it in an app that runs them.
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        name: str,
        description: str | None = None,
        expose_tools: bool = False,
        deps: Any = None,
    ) -> None:
        refuse_batch(agent, "MCPApp")  # SPEC 25
        self.agent = agent
        self.server = agent_server(
            agent, name=name, description=description, expose_tools=expose_tools, deps=deps
        )
        self._app = self.server.streamable_http_app()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's Starlette app (``/mcp``, and its lifespan)."""
        if scope["type"] == "lifespan":  # the SDK's session manager runs once: one per serving
            self._app = self.server.streamable_http_app()
        await self._app(scope, receive, send)


class _AgentCalls:
    """The two handlers: list the tools, call one (see the module)."""

    def __init__(
        self, agent: Agent[Any], name: str, description: str | None, expose: bool, deps: Any
    ) -> None:
        self.agent = agent
        self.name = name
        self.description = description or f"Ask the agent '{name}'."
        self.expose = expose
        self.deps = deps

    def _exposed(self) -> dict[str, Any]:
        if not self.expose:
            return {}
        inside = _run_only(self.agent)
        return {
            t.name: t
            for t in self.agent.registry
            if not t.requires_approval
            and not t.external
            and t.name != self.name
            and t.name not in inside
        }

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """The agent's tool, and its own tools when exposed."""
        tools = [
            types.Tool(name=self.name, description=self.description, input_schema=_INPUT_SCHEMA)
        ]
        if self.expose and self.agent._toolsets.toolsets:  # its tool sources' tools listed too
            try:
                await self.agent._toolsets.refresh(starting=True)
            except AgentLoopError as exc:  # a source down: the agent's own tool stays listed
                _log.warning("expose_tools: %s", redact_secrets(exc.message))
        for tool in self._exposed().values():
            schema = dict(tool.parameters)
            tools.append(
                types.Tool(name=tool.name, description=tool.description, input_schema=schema)
            )
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """Run the agent (or an exposed tool); every failure is an isError result."""
        arguments = dict(params.arguments or {})
        if params.name != self.name:
            return await self._tool(params.name, arguments)
        text = arguments.get("input")
        if not isinstance(text, str):
            problem = (
                "Field required" if "input" not in arguments else "Input should be a valid string"
            )
            return _error(f"Invalid arguments for tool '{self.name}': input: {problem}")
        try:
            deps = await self._deps(ctx)
        except _DepsFailed as exc:
            return _error(f"agent '{self.name}' stopped: {exc}")
        return await _Call(self, ctx, self.agent.session(), deps).run(text)

    async def _tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if self.expose and self.agent._toolsets.toolsets:
            try:
                await self.agent._toolsets.refresh(starting=True)
            except AgentLoopError as exc:
                return _error(redact_secrets(exc.message))
        tool = self._exposed().get(name)
        if tool is None:
            return _error(f"tool '{name}' is not available")
        registry = type(self.agent.registry)([tool])
        try:
            return _text(await registry.execute(name, arguments))
        except (ToolExecutionError, ToolNotFound) as exc:
            return _error(redact_secrets(getattr(exc, "message", str(exc))))

    async def _deps(self, ctx: ServerRequestContext[Any]) -> Any:
        """The app's ``deps(ctx)``; a failure is logged once (redacted) and named, not shown."""
        if self.deps is None:
            return None
        try:
            value = self.deps(ctx)
            return await value if inspect.isawaitable(value) else value
        except Exception as exc:
            trace = redact_secrets("".join(traceback.format_exception(exc)))
            _log.error("the application's deps= callable failed:\n%s", trace)
            raise _DepsFailed(
                f"the application's deps= callable failed ({type(exc).__name__})"
            ) from exc


def _run_only(agent: Agent[Any]) -> set[str]:
    """The engine's tools that work only inside a run: never exposed (SPEC 26, 27).

    A handoff's ``transfer_to_<name>`` moves a run to another agent, and memory's tools read the
    run's namespace: called alone they would fail with an internal error, or need a key the
    caller does not have.
    """
    names = {h.tool_name for h in getattr(agent, "_handoffs", ())}
    if getattr(agent, "memory", None) is not None:
        from agentloop.memory._capability import TOOL_NAMES

        names.update(TOOL_NAMES)
    return names


class _DepsFailed(Exception):
    """The app's ``deps=`` raised (already logged)."""


class _Call:
    """One call of the agent's tool: the run, its progress, its pauses, its result."""

    def __init__(
        self, calls: _AgentCalls, ctx: ServerRequestContext[Any], session: Session[Any], deps: Any
    ) -> None:
        self.name = calls.name
        self.ctx = ctx
        self.session = session
        self.deps = deps
        self.cancel = CancelToken()
        self.progress = 0

    async def run(self, text: str) -> types.CallToolResult:
        stream: Any = self.session.stream(text, deps=self.deps, cancel=self.cancel)
        try:
            while True:
                run = await self._drain(stream)
                if run.stop_reason is not None:
                    return self._stopped(run.stop_reason)
                if not run.paused:
                    return _output(run.output)
                decisions = await self._ask(run.pending)
                if isinstance(decisions, types.CallToolResult):
                    await self._abandon()
                    return decisions
                stream = self.session.continue_stream(
                    decisions=decisions, deps=self.deps, cancel=self.cancel
                )
        except AgentLoopError as error:
            await self._abandon()
            return self._stopped(error)
        except BaseException:  # cancelled by the client (asking included): the run ends Cancelled
            self.cancel.cancel()
            await self._abandon()
            raise

    async def _abandon(self) -> None:
        """End a run this call leaves paused: its session is this call's alone (SPEC 17).

        Nobody can decide it once the call has returned, and a run left paused in the store
        would wait for ever, or run its approved tool for an operator while no caller reads
        the result: ``cancel_run`` finalizes it ``Cancelled`` (completed turns commit). Shielded,
        so a call the client cancelled still records the end.
        """
        current = self.session.current_run
        if current is None or not current.paused:
            return
        with anyio.CancelScope(shield=True):
            await self.session.cancel_run()

    async def _drain(self, stream: Any) -> Any:
        async with stream as events:
            async for event in _top(events):
                if isinstance(event, ev.ToolCallFinished):
                    await self._progress(f"tool '{event.call.name}' finished")
                elif isinstance(event, ev.TurnFinished):
                    await self._progress(f"turn {event.turn.index + 1} finished")
            return events.run

    async def _progress(self, message: str) -> None:
        if self.ctx.meta is None or "progress_token" not in self.ctx.meta:
            return
        self.progress += 1
        await self.ctx.session.report_progress(self.progress, None, message)

    async def _ask(
        self, pending: tuple[PendingCall, ...]
    ) -> dict[str, Decision] | types.CallToolResult:
        """A decision for each pending call, through elicitation; or the isError result."""
        capabilities = self.ctx.session.client_capabilities
        if capabilities is None or capabilities.elicitation is None:
            return self._undecided(pending[0])
        decisions: dict[str, Decision] = {}
        for waiting in pending:
            try:
                decisions[waiting.id] = await self._elicit(waiting)
            except MCPError:  # its elicitation failed: a client that cannot decide, no answer
                return self._undecided(waiting)
        return decisions

    def _undecided(self, waiting: PendingCall) -> types.CallToolResult:
        tool = waiting.call.name
        return _error(
            f"agent '{self.name}' paused: '{tool}' needs a decision this client cannot give"
        )

    async def _elicit(self, waiting: PendingCall) -> Decision:
        call = waiting.call
        arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
        approval = waiting.kind == "approval"
        question = (
            f"'{call.name}' wants to run with {arguments}: approve?"
            if approval
            else f"'{call.name}' was called with {arguments}: what is its result?"
        )
        if waiting.message:
            question = f"{waiting.message}\n{question}"
        answer = await self.ctx.session.elicit_form(
            question, _APPROVAL if approval else _EXTERNAL, self.ctx.request_id
        )
        content = answer.content or {}
        if answer.action != "accept":
            return Deny()
        if not approval:
            return Answer(content.get("answer", ""))
        if content.get("decision") == "approve":
            return Approve()
        message = content.get("message")
        return Deny(message if isinstance(message, str) and message else None)

    def _stopped(self, error: AgentLoopError) -> types.CallToolResult:
        if error.is_cancelled():
            raise error
        message = served_failure(error, "MCPApp")  # the app's internals (a store) as words
        return _error(f"agent '{self.name}' stopped: {type(error).__name__}: {message}")


async def _top(events: Any) -> AsyncIterator[ev.Event]:
    """The run's own events (a child agent's carry a ``path``)."""
    async for event in events:
        if not event.path:
            yield event


def _output(output: Any) -> types.CallToolResult:
    if isinstance(output, str) or output is None:
        return _text(output or "")
    value = pydantic_core.to_jsonable_python(output, fallback=str)
    structured = value if isinstance(value, dict) else {"result": value}
    text = json.dumps(value, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
