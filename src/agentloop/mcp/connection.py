"""The connection behind ``agentloop.mcp.MCPServer``: one MCP session owned by a task of its own.

The SDK's transports are task-scoped async context managers, while tool calls come from many
tasks: so a ``Connection`` task enters the transport and the ``ClientSession``, relays incoming
messages (the end of that stream is how we learn the server went away), and leaves them when
stopped. Calls use the session from their own tasks through ``cancellable`` so that a cancelled
caller tells the server to cancel. On Linux, stdio servers start through a launcher that sets
``PR_SET_PDEATHSIG`` (see docs/mcp.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
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

from agentloop.mcp.elicitation import Elicitor
from agentloop.safety.redact import redact_secrets

__all__ = ["INVALID_RESULT", "Connection", "Http", "StartFailed", "Stdio", "cancellable"]

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


_Incoming = SessionMessage | Exception
_T = TypeVar("_T")
OnMessage = Callable[[IncomingMessage], None]


class StartFailed(Exception):
    """A connection could not be made; ``why`` is the text the model or developer reads."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Stdio:
    """How to start a stdio server; its stderr goes to a temporary file we can quote."""

    def __init__(
        self, command: str, args: list[str], env: dict[str, str] | None, cwd: str | Path | None
    ) -> None:
        self.command, self.args, self.env, self.cwd = command, args, env, cwd

    def parameters(self) -> StdioServerParameters:
        """The SDK's stdio parameters for this command."""
        command, args = self.command, self.args
        if sys.platform == "linux":
            launcher = ["-I", "-S", "-c", _LAUNCHER, str(os.getpid())]
            command, args = sys.executable, [*launcher, command, *args]
        return StdioServerParameters(command=command, args=args, env=self.env, cwd=self.cwd)

    @contextlib.asynccontextmanager
    async def open(self, errlog: IO[str] | None) -> AsyncIterator[Any]:
        """The transport's read and write streams, open for the block."""
        assert errlog is not None
        async with stdio_client(self.parameters(), errlog=errlog) as streams:  # type: ignore[arg-type]
            yield streams

    def secrets(self) -> list[str]:
        """The values the user gave in ``env``: never quoted from the server's stderr."""
        return list((self.env or {}).values())

    def refused(self) -> int | None:
        """Never: credentials are an HTTP matter."""
        return None

    def errlog(self) -> IO[str] | None:
        """Where the server's stderr goes (a temporary file for stdio)."""
        return tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")


class Http:
    """How to reach a streamable HTTP server.

    The SDK turns a 401/403 answer into a plain JSON-RPC error (or a failed start) and drops
    the status, so a response hook keeps it: ``refused()`` is how the caller learns that the
    server refused our credentials (SPEC 13: the hard ``RemoteAuthError``).
    """

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers
        self._refused: int | None = None

    def refused(self) -> int | None:
        """The 401/403 a request was answered with since the last look (then forgotten)."""
        status, self._refused = self._refused, None
        return status

    async def _saw(self, response: httpx2.Response) -> None:
        if response.status_code in (401, 403) and response.request.method == "POST":
            self._refused = response.status_code

    @contextlib.asynccontextmanager
    async def open(self, errlog: IO[str] | None) -> AsyncIterator[Any]:
        """The transport's read and write streams, open for the block."""
        timeout = httpx2.Timeout(30.0, read=300.0)
        hooks = {"response": [self._saw]}
        async with (
            httpx2.AsyncClient(headers=self.headers, timeout=timeout, event_hooks=hooks) as client,
            streamable_http_client(self.url, http_client=client) as streams,
        ):
            yield streams

    def secrets(self) -> list[str]:
        """The header values the user gave (an ``Authorization`` token): never quoted."""
        return list(self.headers.values())

    def errlog(self) -> IO[str] | None:
        """Where the server's stderr goes (none over HTTP)."""
        return None


class Connection:
    """One session, owned by its own task: opened, relayed (to see the server go) and stopped."""

    def __init__(
        self, name: str, launch: Stdio | Http, on_message: OnMessage, elicitor: Elicitor
    ) -> None:
        self.name = name
        self.launch = launch
        self.on_message = on_message
        self.elicitor = elicitor
        self.loop = asyncio.get_running_loop()
        self.errlog = launch.errlog()
        self._last_tail = ""
        self._session: ClientSession | None = None
        self._ready: asyncio.Future[None] = self.loop.create_future()
        self._done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        name: str,
        launch: Stdio | Http,
        on_message: OnMessage,
        limit: float,
        elicitor: Elicitor,
    ) -> Connection:
        """Start the owner task; return once the session is initialized (else StartFailed)."""
        conn = cls(name, launch, on_message, elicitor)
        conn._task = conn.loop.create_task(conn._own(), name=f"agentloop-mcp {name}")
        try:
            async with asyncio.timeout(limit):
                await asyncio.shield(conn._ready)
        except BaseException as exc:  # a start failure, a timeout, or the caller was cancelled
            await asyncio.shield(conn.close())
            tail = conn.stderr_tail()  # read once the process is gone: its last words are in
            if isinstance(exc, TimeoutError):
                raise StartFailed(f"no answer to initialize within {limit:g}s{tail}") from None
            if isinstance(exc, StartFailed):
                raise StartFailed(exc.why + tail) from None
            raise
        return conn

    def session(self) -> ClientSession:
        """The live MCP session; a closed connection is an ``MCPError``."""
        if self._session is None:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        return self._session

    def usable(self) -> bool:
        """True while the session is open and its task alive."""
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
                    async with _Session(
                        relay_out,
                        write,
                        message_handler=self._on_message,
                        elicitation_callback=self.elicitor,
                        advertise_elicitation=self.elicitor.advertised,
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
            self._ready.set_exception(StartFailed(why))
            self._ready.exception()  # retrieved: a close before anyone awaited is no warning

    async def _relay(self, source: Any, sink: Any) -> None:
        """Pass messages to the session; the end of the stream means the server is gone."""
        async with sink:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                async for item in source:
                    await sink.send(_answerable(item))
        self._done.set()

    async def _on_message(self, message: IncomingMessage) -> None:
        self.on_message(message)

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
        quoted = redact_secrets(tail, self.launch.secrets())
        return f"; its stderr ends: {quoted[-_MAX_TAIL_CHARS:]}"


class _Session(ClientSession):
    """The SDK's session, answering elicitation always but advertising it only when asked.

    Our elicitation callback is always given, so that a server that asks without the capability
    gets a decline (not the SDK's "not supported" error); the capability itself is advertised
    only with a user's callback, as the SDK does when none is given.
    """

    def __init__(self, *args: Any, advertise_elicitation: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._advertise_elicitation = advertise_elicitation

    def _build_capabilities(self, version: str) -> types.ClientCapabilities:
        capabilities = super()._build_capabilities(version)
        if self._advertise_elicitation:
            return capabilities
        return capabilities.model_copy(update={"elicitation": None})


async def cancellable(request: Coroutine[Any, Any, _T]) -> _T:
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


INVALID_RESULT = "agentloop: the result is not an object"
"""``data`` of the JSON-RPC error that stands in for a response the SDK could not parse."""


def _answerable(item: _Incoming) -> _Incoming:
    """A response whose ``result`` is not an object, as a JSON-RPC error for its request.

    The SDK drops a message it cannot parse, so the call waiting for that response would wait
    for its timeout (forever without one); the error we put in its place answers it at once.
    """
    if not isinstance(item, ValidationError):
        return item
    for error in item.errors():
        body = error.get("input")
        if (
            isinstance(body, dict)
            and isinstance(body.get("id"), int | str)
            and "result" in body
            and not isinstance(body["result"], dict)
        ):
            kind = type(body["result"]).__name__
            error_data = types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the result is a {_JSON_KINDS.get(kind, kind)}, not an object",
                data=INVALID_RESULT,
            )
            return SessionMessage(
                types.JSONRPCError(jsonrpc="2.0", id=body["id"], error=error_data)
            )
    return item


_JSON_KINDS = {
    "int": "number",
    "float": "number",
    "str": "string",
    "list": "list",
    "bool": "boolean",
    "NoneType": "null",
}


def _describe(exc: BaseException) -> str:
    """A start-up failure in words (the first real error inside exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
        return "it closed the connection during start-up"
    if isinstance(exc, StartFailed):
        return exc.why
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
