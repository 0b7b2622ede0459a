"""Client lifecycle (SPEC section 12): ``async with``, ``aclose`` then reuse, any number of loops.

Every client kind runs against real sockets on 127.0.0.1: ``Wire`` is a raw keep-alive HTTP
server that answers each provider's JSON shape and counts the connections it saw opened and
closed, so "the connections were released" is observed from the server's side. Sync tests
(``asyncio.run`` twice, ``run_sync``) need a server that outlives their loops: ``in_thread``
serves from a loop of its own thread. The subprocess tests check what a user sees at exit: no
"Unclosed client session", nothing at all on stderr.
"""

from __future__ import annotations

import asyncio
import gc
import json
import queue
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent
from agentloop.messages import Message
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.providers import (
    AnthropicClient,
    FallbackClient,
    GeminiClient,
    OpenAIClient,
    RetryingClient,
    Settings,
    build_client,
)
from agentloop.testing import FakeProviderServer, FakeReply

from .conftest import read_request, serve_raw

REQUEST = ModelRequest(messages=(Message.user("hi"),))
DOCS = Path(__file__).resolve().parents[2] / "docs" / "providers.md"
KINDS = ["openai", "anthropic", "gemini", "retrying", "fallback"]

_BODIES: dict[str, dict[str, Any]] = {
    "openai": {
        "id": "c1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hello"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    },
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hello"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
    "gemini": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "hello"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
    },
}


def _wire_format(head: bytes) -> str:
    path = head.split(b" ", 2)[1]
    if b":generateContent" in path:
        return "gemini"
    return "anthropic" if path.endswith(b"/messages") else "openai"


class Wire:
    """A keep-alive server speaking the three JSON wire formats; counts connections.

    ``closed`` counts only the connections the client closed (not the server's teardown), and
    the counts are guarded by a thread lock, so sync tests can wait on them too.
    """

    def __init__(self, *, keep_alive: bool = True) -> None:
        self.keep_alive = keep_alive
        self.opened = 0
        self.closed = 0
        self._changed = threading.Condition()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._count(opened=1)
        try:
            while True:
                head = await read_request(reader)
                body = json.dumps(_BODIES[_wire_format(head)]).encode()
                connection = b"keep-alive" if self.keep_alive else b"close"
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Connection: " + connection + b"\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
                )
                await writer.drain()
                if not self.keep_alive:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            self._count(closed=1)  # the client closed the connection

    def _count(self, opened: int = 0, closed: int = 0) -> None:
        with self._changed:
            self.opened += opened
            self.closed += closed
            self._changed.notify_all()

    def wait_all_closed(self) -> None:
        """Block until the client has closed every connection it opened (5 s at most)."""
        with self._changed:
            done = self._changed.wait_for(lambda: self.closed == self.opened, timeout=5)
        assert done, f"{self.opened} connections opened, {self.closed} closed by the client"

    async def all_closed(self) -> None:
        """``wait_all_closed`` without blocking the running loop."""
        await asyncio.to_thread(self.wait_all_closed)


@asynccontextmanager
async def serve_wire(wire: Wire) -> AsyncIterator[str]:
    async with serve_raw(wire.handle) as url:
        yield url


@asynccontextmanager
async def serve_fake() -> AsyncIterator[str]:
    async with FakeProviderServer(default=FakeReply("hello")) as server:
        yield server.root_url


@contextmanager
def in_thread(server: Callable[[], AbstractAsyncContextManager[str]]) -> Iterator[str]:
    """Serve on the loop of a thread of its own, so sync code can call it from its own loops."""
    ready: queue.Queue[tuple[asyncio.AbstractEventLoop, asyncio.Event, str]] = queue.Queue()

    async def serve() -> None:
        stop = asyncio.Event()
        async with server() as url:
            ready.put((asyncio.get_running_loop(), stop, url))
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    loop, stop, url = ready.get(timeout=10)
    try:
        yield url
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)


AnyClient = OpenAIClient | AnthropicClient | GeminiClient | RetryingClient | FallbackClient


def make_client(kind: str, url: str) -> AnyClient:
    """A client of ``kind`` (an HTTP adapter or a wrapper over them) for the server at ``url``."""
    if kind == "anthropic":
        return AnthropicClient("m", api_key="test-key", base_url=url)
    if kind == "gemini":
        return GeminiClient("m", api_key="test-key", base_url=f"{url}/v1beta")
    openai = OpenAIClient("m", base_url=f"{url}/v1")
    if kind == "retrying":
        return RetryingClient(openai)
    if kind == "fallback":
        return FallbackClient([RetryingClient(openai), make_client("anthropic", url)])
    return openai


# --- async with, aclose, reuse ----------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_async_with_yields_the_client_and_releases_its_connections(kind: str) -> None:
    wire = Wire()
    async with serve_wire(wire) as url:
        client = make_client(kind, url)
        async with client as entered:
            assert entered is client
            assert (await client.complete(REQUEST)).text == "hello"
        await wire.all_closed()
    assert wire.opened == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_aclose_releases_connections_and_the_client_stays_usable(kind: str) -> None:
    wire = Wire()
    async with serve_wire(wire) as url:
        client = make_client(kind, url)
        assert (await client.complete(REQUEST)).text == "hello"
        await client.aclose()
        await wire.all_closed()
        assert (await client.complete(REQUEST)).text == "hello"  # a new session, lazily
        assert wire.opened == 2
        await client.aclose()
        await client.aclose()  # idempotent
        await wire.all_closed()


class _Spy:
    """A ``ModelClient`` that only counts ``aclose`` calls."""

    model = "spy"
    provider = "spy"

    def __init__(self) -> None:
        self.closed = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError
        yield  # pragma: no cover

    async def aclose(self) -> None:
        self.closed += 1


async def test_wrappers_close_every_inner_client_on_exit() -> None:
    first, second, third = _Spy(), _Spy(), _Spy()
    async with FallbackClient([RetryingClient(first), second, RetryingClient(third)]) as client:
        assert isinstance(client, FallbackClient)
    assert (first.closed, second.closed, third.closed) == (1, 1, 1)


# --- one client, many event loops -------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_one_client_serves_successive_asyncio_runs(kind: str) -> None:
    wire = Wire()
    with in_thread(lambda: serve_wire(wire)) as url:
        client = make_client(kind, url)

        async def ask() -> str:
            return (await client.complete(REQUEST)).text

        assert [asyncio.run(ask()) for _ in range(3)] == ["hello"] * 3
        wire.wait_all_closed()  # each loop's session closed before its loop ended
        gc.collect()  # an unclosed session would warn here, and warnings are errors
    assert wire.opened == 3


def test_an_idle_runner_keeps_its_session_while_other_loops_run() -> None:
    """The shape of ``run_sync`` on a private ``asyncio.Runner``, used between other loops."""
    wire = Wire()
    with in_thread(lambda: serve_wire(wire)) as url:
        client = make_client("openai", url)

        async def ask() -> str:
            return (await client.complete(REQUEST)).text

        with asyncio.Runner() as runner:
            assert runner.run(ask()) == "hello"
            assert asyncio.run(ask()) == "hello"
            assert runner.run(ask()) == "hello"  # its pooled connection, still open
            assert wire.opened == 2
            runner.run(client.aclose())
            wire.wait_all_closed()
        gc.collect()
    assert wire.opened == 2


def test_loops_in_several_threads_share_one_client() -> None:
    wire = Wire()
    with in_thread(lambda: serve_wire(wire)) as url:
        client = make_client("openai", url)

        async def ask() -> str:
            return (await client.complete(REQUEST)).text

        answers: list[str] = []
        threads = [
            threading.Thread(target=lambda: answers.extend(asyncio.run(ask()) for _ in range(3)))
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        wire.wait_all_closed()
        gc.collect()
    assert answers == ["hello"] * 12
    assert wire.opened == 12


def test_a_session_left_open_by_a_loop_closed_without_shutdown_is_dropped() -> None:
    """``loop.close()`` without ``shutdown_asyncgens()``: the next loop still works, quietly."""
    wire = Wire(keep_alive=False)  # no pooled socket outlives the dead loop
    with in_thread(lambda: serve_wire(wire)) as url:
        client = make_client("openai", url)
        loop = asyncio.new_event_loop()
        assert loop.run_until_complete(client.complete(REQUEST)).text == "hello"
        loop.close()
        assert asyncio.run(client.complete(REQUEST)).text == "hello"
        gc.collect()


def test_streams_on_successive_loops() -> None:
    with in_thread(serve_fake) as url:
        client = make_client("openai", url)

        async def stream() -> list[str]:
            return [event.kind async for event in client.stream(REQUEST)]

        for _ in range(2):
            assert asyncio.run(stream())[-1] == "done"
        gc.collect()


def test_one_agent_runs_sync_fifty_times() -> None:
    with in_thread(serve_fake) as url:
        client = build_client(Settings(provider="openai", model="m", base_url=f"{url}/v1"))
        agent = Agent(client)
        for _ in range(50):
            assert agent.run_sync("hi").output == "hello"
        gc.collect()


# --- what a script prints at exit --------------------------------------------------------------

_SCRIPT = """
import asyncio, sys
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.providers import Settings, build_client

kind, url, streams = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
client = build_client(Settings(provider=kind, model="m", api_key="test-key", base_url=url))
request = ModelRequest(messages=(Message.user("hi"),))

async def ask() -> None:
    assert (await client.complete(request)).text == "hello"
    if streams:
        assert [event async for event in client.stream(request)][-1].kind == "done"

asyncio.run(ask())
asyncio.run(ask())
"""

_AGENT_SCRIPT = """
import sys
from agentloop import Agent
from agentloop.providers import Settings, build_client

client = build_client(Settings(provider="openai", model="m", base_url=sys.argv[1]))
agent = Agent(client)
assert agent.run_sync("hi").output == "hello"
assert agent.run_sync("hi").output == "hello"
"""


def run_script(
    source: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``source`` in a fresh interpreter that shows every ``ResourceWarning``."""
    command = [sys.executable, "-W", "always::ResourceWarning", "-c", source, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.mark.parametrize(
    ("kind", "server", "path", "streams"),
    [
        ("openai", serve_fake, "/v1", True),
        ("anthropic", serve_fake, "", True),
        ("gemini", lambda: serve_wire(Wire()), "/v1beta", False),
    ],
)
def test_a_script_using_a_client_on_two_loops_exits_silently(
    kind: str, server: Callable[[], AbstractAsyncContextManager[str]], path: str, streams: bool
) -> None:
    with in_thread(server) as url:
        done = run_script(_SCRIPT, kind, url + path, "1" if streams else "0")
    assert (done.returncode, done.stderr) == (0, "")


def test_a_script_calling_run_sync_twice_exits_silently() -> None:
    with in_thread(serve_fake) as url:
        done = run_script(_AGENT_SCRIPT, f"{url}/v1")
    assert (done.returncode, done.stderr) == (0, "")


def test_the_lifecycle_example_in_the_docs_runs_silently(tmp_path: Path) -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Client lifecycle", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    done = run_script(textwrap.dedent(blocks[0]), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split() == ["hello"] * 4
