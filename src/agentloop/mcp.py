"""MCP servers as tool sources (SPEC 13), on the official ``mcp`` SDK (extra ``mcp``).

``MCPServer.stdio(...)`` and ``MCPServer.http(...)`` are ``Toolset`` objects: put one in
``Agent(tools=[...])`` and its tools are listed when a run starts, listed again after a
``tools/list_changed`` notification, and called like any tool. The failure map::

    when                                   what the run sees
    start-up fails when a run begins       ConfigurationError naming the server (stdio: the
                                           tail of its stderr); the run does not start
    a result with isError                  the server's own text (soft, neutral)
    a JSON-RPC error                       its message (soft, neutral)
    arguments fail the listed schema       Invalid arguments for tool 'x': ... (no request sent)
    server died / connection dropped       tool server '<name>' is unavailable: <why> (soft,
      (or cannot be restarted)             counted as sick by the tool breaker); the next
                                           call restarts or reconnects, with backoff
    a call past its timeout                the engine's timeout text; the SDK sends the
                                           server notifications/cancelled

Each connection is owned by a task of its own, because the SDK's transports are task-scoped
context managers while calls come from many tasks. ``aclose`` stops it (the stdio transport
closes stdin, then terminates and kills the process group). On Linux a stdio server is started
through a tiny launcher that sets ``PR_SET_PDEATHSIG`` so the kernel kills it if our process
dies without cleaning up (even by SIGKILL); elsewhere a server relies on seeing its stdin close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import anyio
import httpx2
import mcp.types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from agentloop._mcp_tools import MCPTool
from agentloop.errors import ConfigurationError, ToolError
from agentloop.safety.redact import redact_secrets
from agentloop.tools import Tool

__all__ = ["MCPServer"]

logger = logging.getLogger("agentloop")

_TAIL_LINES = 5
_TAIL_BYTES = 4096
_MAX_TAIL_CHARS = 800

# The Linux launcher: ask the kernel to SIGKILL us when the parent dies, then become the server.
_LAUNCHER = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write(f"cannot run {sys.argv[2]!r}: {exc}\\n")
    os._exit(127)
"""


def restart_delay(failures: int) -> float:
    """Seconds before the restart that follows ``failures`` consecutive failures.

    0 after one failure, then 0.5 s doubling to 30 s: a server that keeps dying is not
    restarted in a tight loop.
    """
    if failures <= 1:
        return 0.0
    return min(0.5 * 2.0 ** min(failures - 2, 16), 30.0)


_Incoming = SessionMessage | Exception
_T = TypeVar("_T")


class _StartFailed(Exception):
    """A connection could not be made; ``why`` is the text the model or developer reads."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class MCPServer:
    """An MCP server whose tools an agent uses: a ``Toolset`` for ``Agent(tools=[...])``."""

    def __init__(
        self,
        launch: _Stdio | _Http,
        *,
        name: str,
        prefix: str | None = None,
        start_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if start_timeout <= 0:
            raise ConfigurationError("MCPServer start_timeout must be > 0", field="start_timeout")
        self.name = name
        self.prefix = prefix
        self.start_timeout = start_timeout
        self._launch = launch
        self._clock = clock
        self._version = 0
        self._conn: _Connection | None = None
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
    ) -> MCPServer:
        """A server run as a child process speaking MCP on its stdin and stdout.

        ``env`` is added to the SDK's safe default environment (HOME, PATH, ...); the name
        defaults to the command's file name and its first argument's (unless an option).
        """
        if isinstance(args, str):
            raise ConfigurationError(
                "MCPServer.stdio args must be a list, not a string", field="args"
            )
        script = [Path(args[0]).name] if args and not args[0].startswith("-") else []
        default = " ".join([Path(command).name, *script])
        launch = _Stdio(command, list(args), dict(env) if env else None, cwd)
        return cls(
            launch,
            name=name or default,
            prefix=prefix,
            start_timeout=start_timeout,
            clock=clock,
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
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (``headers`` go with every request)."""
        launch = _Http(url, dict(headers or {}))
        return cls(
            launch, name=name or url, prefix=prefix, start_timeout=start_timeout, clock=clock
        )

    @property
    def version(self) -> int:
        """Bumped by ``tools/list_changed``, a restart and ``aclose``: list the tools again."""
        return self._version

    def __repr__(self) -> str:
        return f"<MCPServer {self.name!r}>"

    # -- Toolset -----------------------------------------------------------------------------

    async def list_tools(self) -> Sequence[Tool]:
        """The server's tools, starting it if needed.

        A server that cannot start before it ever started (since construction or ``aclose``)
        is a ``ConfigurationError``; later, the failure is an error the engine logs.
        """
        fresh = not self._started
        try:
            conn = await self._connect()
        except _StartFailed as failed:
            text = f"tool server '{self.name}' could not start: {failed.why}"
            if fresh:
                raise ConfigurationError(text, field="tools") from None
            raise ToolError(text, sick=True) from None
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await conn.session().list_tools(params=params)
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
        except _StartFailed as failed:
            raise ToolError(self._unavailable(failed.why), sick=True) from None
        try:
            result = await _cancellable(conn.session().call_tool(remote, dict(arguments)))
        except MCPError as exc:
            if exc.code != types.CONNECTION_CLOSED:
                raise ToolError(exc.message or f"tool server error {exc.code}") from None
            raise ToolError(self._lost(conn, exc.message), sick=True) from None
        except (RuntimeError, ValidationError) as exc:
            text = f"tool server '{self.name}' sent an invalid result: {exc}"
            raise ToolError(text, sick=True) from None
        if not isinstance(result, types.CallToolResult):
            text = f"tool server '{self.name}' sent an unexpected {type(result).__name__}"
            raise ToolError(text, sick=True)
        self._failures = 0
        return result

    def _unavailable(self, why: str) -> str:
        return f"tool server '{self.name}' is unavailable: {why}"

    def _lost(self, conn: _Connection, message: str) -> str:
        """Record a connection lost mid-call; the text the model reads."""
        why = f"it dropped the connection mid-call ({message})"
        if conn is self._conn:
            self._failures += 1
            self._next_start = self._clock() + restart_delay(self._failures)
            self._why = why
            conn.stop()
        logger.warning("tool server %r: %s%s", self.name, why, conn.stderr_tail())
        return self._unavailable(why)

    async def _connect(self) -> _Connection:
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
                raise _StartFailed(f"{self._why}; next restart attempt in {wait:.1f}s")
            try:
                conn = await _Connection.open(self, self._launch, self.start_timeout)
            except _StartFailed as failed:
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


class _Stdio:
    """How to start a stdio server; its stderr goes to a temporary file we can quote."""

    def __init__(
        self, command: str, args: list[str], env: dict[str, str] | None, cwd: str | Path | None
    ) -> None:
        self.command, self.args, self.env, self.cwd = command, args, env, cwd

    def parameters(self) -> StdioServerParameters:
        command, args = self.command, self.args
        if sys.platform == "linux":
            launcher = ["-I", "-S", "-c", _LAUNCHER, str(os.getpid())]
            command, args = sys.executable, [*launcher, command, *args]
        return StdioServerParameters(command=command, args=args, env=self.env, cwd=self.cwd)

    @contextlib.asynccontextmanager
    async def open(self, errlog: IO[str] | None) -> AsyncIterator[Any]:
        assert errlog is not None
        async with stdio_client(self.parameters(), errlog=errlog) as streams:  # type: ignore[arg-type]
            yield streams

    def errlog(self) -> IO[str] | None:
        return tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")


class _Http:
    """How to reach a streamable HTTP server."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers

    @contextlib.asynccontextmanager
    async def open(self, errlog: IO[str] | None) -> AsyncIterator[Any]:
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(headers=self.headers, timeout=timeout) as client,
            streamable_http_client(self.url, http_client=client) as streams,
        ):
            yield streams

    def errlog(self) -> IO[str] | None:
        return None


class _Connection:
    """One session, owned by its own task: opened, relayed (to see the server go) and stopped."""

    def __init__(self, server: MCPServer, launch: _Stdio | _Http) -> None:
        self.server = server
        self.launch = launch
        self.loop = asyncio.get_running_loop()
        self.errlog = launch.errlog()
        self._last_tail = ""
        self._session: ClientSession | None = None
        self._ready: asyncio.Future[None] = self.loop.create_future()
        self._done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, server: MCPServer, launch: _Stdio | _Http, limit: float) -> _Connection:
        conn = cls(server, launch)
        conn._task = conn.loop.create_task(conn._own(), name=f"agentloop-mcp {server.name}")
        try:
            async with asyncio.timeout(limit):
                await asyncio.shield(conn._ready)
        except BaseException as exc:  # a start failure, a timeout, or the caller was cancelled
            await asyncio.shield(conn.close())
            tail = conn.stderr_tail()  # read once the process is gone: its last words are in
            if isinstance(exc, TimeoutError):
                raise _StartFailed(f"no answer to initialize within {limit:g}s{tail}") from None
            if isinstance(exc, _StartFailed):
                raise _StartFailed(exc.why + tail) from None
            raise
        return conn

    def session(self) -> ClientSession:
        if self._session is None:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        return self._session

    def usable(self) -> bool:
        return (
            self._session is not None
            and not self._done.is_set()
            and self.loop is asyncio.get_running_loop()
        )

    async def _own(self) -> None:
        try:
            async with self.launch.open(self.errlog) as (read, write):
                relay_in, relay_out = anyio.create_memory_object_stream[SessionMessage | Exception](
                    0
                )
                async with anyio.create_task_group() as group:
                    group.start_soon(self._relay, read, relay_in)
                    async with ClientSession(
                        relay_out, write, message_handler=self._on_message
                    ) as session:
                        await session.initialize()
                        self._session = session
                        self._ready.set_result(None)
                        await self._done.wait()
                    group.cancel_scope.cancel()
        except asyncio.CancelledError:
            self._fail("start-up was cancelled")
            raise
        except BaseException as exc:
            self._fail(_describe(exc))
        finally:
            self._session = None
            self._done.set()
            self._fail("it closed the connection during start-up")
            self._release_errlog()  # the transport is down, so the server said its last words

    def _fail(self, why: str) -> None:
        if not self._ready.done():
            self._ready.set_exception(_StartFailed(why))
            self._ready.exception()  # retrieved: a close before anyone awaited is no warning

    async def _relay(self, source: Any, sink: Any) -> None:
        """Pass messages to the session; the end of the stream means the server is gone."""
        async with sink:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                async for item in source:
                    await sink.send(item)
        self._done.set()

    async def _on_message(self, message: IncomingMessage) -> None:
        self.server._notified(message)

    def stop(self) -> None:
        """Ask the owner task to wind down (it notices at once)."""
        self._done.set()

    async def close(self) -> None:
        """Stop the session and the server, and drop the stderr file."""
        await self.stop_and_wait()
        self._release_errlog()

    def _release_errlog(self) -> None:
        """Keep the stderr tail as text and close the file (also when the loop tears us down)."""
        if self.errlog is not None:
            self._last_tail = self.stderr_tail()
            self.errlog.close()
            self.errlog = None

    async def stop_and_wait(self) -> None:
        """Stop the session and the server; wait until the owner task has finished."""
        task = self._task
        if task is not None and not task.done():
            if task.get_loop() is not asyncio.get_running_loop():
                task.get_loop().call_soon_threadsafe(task.cancel)
            else:
                if self._session is None:
                    task.cancel()  # still starting: nothing to wind down gracefully
                self._done.set()
                await asyncio.wait({task})

    def stderr_tail(self) -> str:
        """``; its stderr ends: <last lines>`` for a stdio server that wrote any, else ''."""
        if self.errlog is None or self.errlog.closed:
            return self._last_tail
        fd = self.errlog.fileno()
        size = os.fstat(fd).st_size
        raw = os.pread(fd, _TAIL_BYTES, max(0, size - _TAIL_BYTES))
        lines = [line.strip() for line in raw.decode("utf-8", "replace").splitlines()]
        tail = " | ".join([line for line in lines if line][-_TAIL_LINES:])
        if not tail:
            return ""
        return f"; its stderr ends: {redact_secrets(tail)[-_MAX_TAIL_CHARS:]}"


async def _cancellable(request: Coroutine[Any, Any, _T]) -> _T:
    """Await an SDK request so that cancelling the caller tells the server to cancel too.

    The SDK sends ``notifications/cancelled`` when its request is cancelled, from a shielded
    scope; a second native ``task.cancel()`` (a run being torn down) would cut that short.
    So the request runs in a task of its own that only an anyio scope cancels.
    """
    scope = anyio.CancelScope()

    async def guarded() -> _T:
        with scope:
            return await request
        raise asyncio.CancelledError  # the scope was cancelled: the caller is gone anyway

    task = asyncio.get_running_loop().create_task(guarded())
    task.add_done_callback(_retrieve)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        scope.cancel()
        raise


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a caller that left does not want it logged as lost


def _describe(exc: BaseException) -> str:
    """A start-up failure in words (the first real error inside exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
        return "it closed the connection during start-up"
    if isinstance(exc, _StartFailed):
        return exc.why
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
