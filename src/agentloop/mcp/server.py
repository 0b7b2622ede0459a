"""MCP servers as tool sources (SPEC 13), on the official ``mcp`` SDK (extra ``mcp``).

``MCPServer.stdio(...)`` and ``MCPServer.http(...)`` are ``Toolset`` objects: put one in
``Agent(tools=[...])`` and its tools are listed when a run starts, listed again after a
``tools/list_changed`` notification, and called like any tool. The failure map::

    when                                   what the run sees
    start-up fails when a run begins       ConfigurationError naming the server (stdio: the
                                           tail of its stderr, with every value given in
                                           ``env`` redacted); the run does not start
    a result with isError                  the server's own text (soft, neutral)
    a JSON-RPC error                       its message (soft, neutral); -32000 too, unless
                                           it is the SDK's own "connection closed"
    a result that is not an object         tool server '<name>' sent an invalid result: the
                                           result is a <kind>, not an object (soft, sick), at
                                           once (the SDK alone would drop it and wait)
    arguments fail the listed schema       Invalid arguments for tool 'x': ... (no request sent)
    server died / connection dropped       tool server '<name>' is unavailable: <why> (soft,
      (or cannot be restarted)             counted as sick by the tool breaker); the next
                                           call restarts or reconnects, with backoff
    a call past its timeout                the engine's timeout text; the SDK sends the
                                           server notifications/cancelled
    an HTTP server answers 401 / 403       hard: RemoteAuthError(<name>, status), at start
      (at start, on a listing or a call)   and mid-run alike (SPEC 3, 13)

Each connection is owned by a task of its own (``_mcp_connection``), because the SDK's
transports are task-scoped context managers while calls come from many tasks. ``aclose`` stops
it (the stdio transport closes stdin, then terminates and kills the process group). On Linux a
stdio server is started through a tiny launcher that sets ``PR_SET_PDEATHSIG`` so the kernel
kills it if our process dies without cleaning up (even by SIGKILL); elsewhere a server relies
on seeing its stdin close.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import mcp.types as types
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from agentloop._util.backoff import exponential_backoff
from agentloop._util.numbers import is_finite
from agentloop.errors import ConfigurationError, RemoteAuthError, ToolError
from agentloop.mcp.connection import (
    INVALID_RESULT,
    Connection,
    Http,
    StartFailed,
    Stdio,
    cancellable,
)
from agentloop.mcp.elicitation import Elicitation, Elicitor
from agentloop.mcp.mapping import MCPTool
from agentloop.tools import Tool
from agentloop.toolsets import AbstractToolset, Entry, Scope

__all__ = ["MCPServer", "restart_delay"]

logger = logging.getLogger("agentloop")


def restart_delay(failures: int) -> float:
    """Seconds before the restart that follows ``failures`` consecutive failures.

    0 after one failure, then 0.5 s doubling to 30 s: a server that keeps dying is not
    restarted in a tight loop.
    """
    if failures <= 1:
        return 0.0
    return exponential_backoff(failures - 2, 0.5, 30.0)


_SDK_CLOSED = ("Connection closed", "SSE stream ")
"""How the SDK's own -32000 errors begin (a closed transport, a broken HTTP stream)."""


def _lost_connection(conn: Connection, exc: MCPError) -> bool:
    """Whether an error means the connection is gone, not that the tool failed.

    The SDK reports a closed transport as code -32000 (``Connection closed``, over HTTP ``SSE
    stream failed: ...`` and ``SSE stream ended ...``), a code servers also use for their own
    errors: only the SDK's own texts, or a connection that is really down, count as lost (a
    server's ``-32000 rate limited`` is the tool's own soft text, and the server lives on).
    """
    if exc.code != types.CONNECTION_CLOSED:
        return False
    return not conn.usable() or (exc.data is None and exc.message.startswith(_SDK_CLOSED))


class MCPServer(AbstractToolset):
    """An MCP server whose tools an agent uses: in ``Agent(tools=[...])`` or ``toolsets=[...]``.

    As a toolset it has every wrapper (``filtered``, ``prefixed``, ...); ``defer_loading=True``
    defers all its tools (tool search finds them, SPEC 22).
    """

    def __init__(
        self,
        launch: Stdio | Http,
        *,
        name: str,
        prefix: str | None = None,
        start_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        elicitation: Elicitation | None = None,
        defer_loading: bool = False,
    ) -> None:
        if not is_finite(start_timeout) or start_timeout <= 0:
            raise ConfigurationError("MCPServer start_timeout must be > 0", field="start_timeout")
        if elicitation is not None and not callable(elicitation):
            raise ConfigurationError(
                f"MCPServer elicitation must be a callable, not {type(elicitation).__name__}",
                field="elicitation",
            )
        self.name = name
        self.prefix = prefix
        self.defer_loading = bool(defer_loading)
        self.start_timeout = start_timeout
        self.elicitation = elicitation
        self._launch = launch
        self._clock = clock
        self._version = 0
        self._conn: Connection | None = None
        self._started = False  # a connection was made since construction or aclose
        self._failures = 0  # consecutive start failures and lost connections
        self._next_start = 0.0
        self._why = ""
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str | None = None,
        prefix: str | None = None,
        start_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        elicitation: Elicitation | None = None,
        defer_loading: bool = False,
    ) -> MCPServer:
        """A server run as a child process speaking MCP on its stdin and stdout.

        ``env`` is added to the SDK's safe default environment (HOME, PATH, ...); the name
        defaults to the command's file name and its first argument's (unless an option).
        ``elicitation`` answers the server's questions for the user (``agentloop.mcp.
        ElicitationRequest`` in, the answer or None out); without it they are declined.
        """
        if isinstance(args, str):
            raise ConfigurationError(
                "MCPServer.stdio args must be a list, not a string", field="args"
            )
        script = [Path(args[0]).name] if args and not args[0].startswith("-") else []
        default = " ".join([Path(command).name, *script])
        launch = Stdio(command, list(args), dict(env) if env else None, cwd)
        return cls(
            launch,
            name=name or default,
            prefix=prefix,
            start_timeout=start_timeout,
            clock=clock,
            elicitation=elicitation,
            defer_loading=defer_loading,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        start_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        elicitation: Elicitation | None = None,
        defer_loading: bool = False,
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (``headers`` go with every request).

        ``elicitation`` is as for ``stdio``.
        """
        launch = Http(url, dict(headers or {}))
        return cls(
            launch,
            name=name or url,
            prefix=prefix,
            start_timeout=start_timeout,
            clock=clock,
            elicitation=elicitation,
            defer_loading=defer_loading,
        )

    @property
    def version(self) -> int:
        """Bumped by ``tools/list_changed``, a restart and ``aclose``: list the tools again."""
        return self._version

    def __repr__(self) -> str:
        return f"<MCPServer {self.name!r}>"

    # -- Toolset -----------------------------------------------------------------------------

    async def entries(self, scope: Scope) -> list[Entry]:
        """The listed tools (listed again after a change), deferred with ``defer_loading``."""
        tools = await scope.listed(self)
        return [Entry.of(t, self.name, deferred=self.defer_loading) for t in tools]

    async def list_tools(self) -> Sequence[Tool]:
        """The server's tools, starting it if needed.

        A server that cannot start before it ever started (since construction or ``aclose``)
        is a ``ConfigurationError``; later, the failure is an error the engine logs.
        """
        fresh = not self._started
        try:
            conn = await self._connect()
        except StartFailed as failed:
            self._hard_if_refused()
            text = f"tool server '{self.name}' could not start: {failed.why}"
            if fresh:  # chained: a served run's client reads no stderr (safety._client_text)
                raise ConfigurationError(text, field="tools") from failed
            raise ToolError(text, sick=True) from None
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            try:
                page = await conn.session().list_tools(params=params)
            except MCPError:
                self._hard_if_refused()
                raise
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return [MCPTool(item, prefix=self.prefix, call=self._call) for item in listed]

    async def aclose(self) -> None:
        """Stop the server (or drop the connection); the next run starts it again."""
        conn, self._conn = self._conn, None
        if self._started:
            self._version += 1  # the next run lists the tools again, starting the server
        self._started = False
        self._failures = 0
        self._next_start = 0.0
        if conn is not None:
            await conn.close()

    # -- calls -------------------------------------------------------------------------------

    async def _call(self, remote: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
        """One ``tools/call``; failures become soft text (see the module's failure map)."""
        try:
            conn = await self._connect()
        except StartFailed as failed:
            self._hard_if_refused()
            raise ToolError(self._unavailable(failed.why), sick=True) from None
        try:
            with conn.elicitor.during_call():
                result = await cancellable(conn.session().call_tool(remote, dict(arguments)))
        except MCPError as exc:
            self._hard_if_refused()
            if exc.data == INVALID_RESULT:
                text = f"tool server '{self.name}' sent an invalid result: {exc.message}"
                raise ToolError(text, sick=True) from None
            if _lost_connection(conn, exc):
                raise ToolError(self._lost(conn, exc.message), sick=True) from None
            raise ToolError(exc.message or f"tool server error {exc.code}") from None
        except (RuntimeError, ValidationError) as exc:
            text = f"tool server '{self.name}' sent an invalid result: {exc}"
            raise ToolError(text, sick=True) from None
        if not isinstance(result, types.CallToolResult):
            text = f"tool server '{self.name}' sent an unexpected {type(result).__name__}"
            raise ToolError(text, sick=True)
        self._failures = 0
        return result

    def _hard_if_refused(self) -> None:
        """An HTTP server that answered 401/403 refused our credentials: hard (SPEC 3, 13)."""
        status = self._launch.refused()
        if status is not None:
            raise RemoteAuthError(self.name, status) from None

    def _unavailable(self, why: str) -> str:
        return f"tool server '{self.name}' is unavailable: {why}"

    def _lost(self, conn: Connection, message: str) -> str:
        """Record a connection lost mid-call; the text the model reads."""
        why = f"it dropped the connection mid-call ({message})"
        if conn is self._conn:
            self._failures += 1
            self._next_start = self._clock() + restart_delay(self._failures)
            self._why = why
            conn.stop()
        logger.warning("tool server %r: %s%s", self.name, why, conn.stderr_tail())
        return self._unavailable(why)

    async def _connect(self) -> Connection:
        """The live connection, made (or remade, with backoff) if needed."""
        conn = self._conn
        if conn is not None and conn.usable():
            return conn
        async with self._loop_lock():
            conn = self._conn
            if conn is not None and conn.usable():
                return conn
            self._conn = None
            if conn is not None:
                await conn.close()
            wait = self._next_start - self._clock()
            if wait > 0:
                raise StartFailed(f"{self._why}; next restart attempt in {wait:.1f}s")
            try:
                elicitor = Elicitor(self.name, self.elicitation)
                conn = await Connection.open(
                    self.name, self._launch, self._notified, self.start_timeout, elicitor
                )
            except StartFailed as failed:
                self._failures += 1
                self._next_start = self._clock() + restart_delay(self._failures)
                self._why = failed.why
                raise
            if self._started:
                self._version += 1  # a restarted server may list other tools
            self._started = True
            self._conn = conn
            return conn

    def _loop_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    def _notified(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._version += 1
        elif isinstance(message, Exception):
            logger.debug("tool server %r: transport error %r", self.name, message)
