"""A key of no recognisable shape never appears in anything agentloop produces.

The keys are not ``sk-...``, ``AIza...`` or a ``Bearer`` token, so no shape rule can catch them:
only the transport's knowledge of the exact value can. Every failure path reachable through the
public API is driven over real sockets on 127.0.0.1, for the OpenAI, Anthropic and Gemini
adapters, through ``RetryingClient`` and an ``Agent`` with a ``SQLiteStore``, streaming and not:
401, 429, 500, 503, 400, 402, 404, a redirect, a reset, a hang, a malformed body, a
schema-invalid body, a truncated stream, an error event mid-stream, an over-long SSE line, a body
that echoes the key back, a key straddling the 8 KiB error-body cut at several offsets, and
headers that echo it (``x-request-id``, ``Location``). Then every artifact is searched for the
key and for 16-character pieces of it (a half-kept key is a leak): ``str``/``repr`` of each
error, its attributes and ``attempt_log``, its pickle, its traceback with causes, every log
record at DEBUG on every logger, each ``Run.to_dict()``, every streamed event's ``repr``, the
SQLite file's bytes (with its WAL), and the output of ``agentloop runs`` and ``runs show``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import random
import string
import threading
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from agentloop import Agent, FallbackClient, tool
from agentloop.cli import main
from agentloop.errors import AgentLoopError, ProviderError
from agentloop.model import ModelClient
from agentloop.providers._http import MAX_ERROR_BODY
from agentloop.providers.anthropic import AnthropicClient
from agentloop.providers.gemini import GeminiClient
from agentloop.providers.openai import OpenAIClient
from agentloop.providers.retrying import RetryingClient
from agentloop.providers.settings import Settings, build_client
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault

_rng = random.Random(9)
KEYS = {
    "random": "K3yNoShape" + "".join(_rng.choices(string.ascii_letters + string.digits, k=30)),
    "words": "plain.words-of-a-key.without_any_shape.at-all.42",
}


def pieces(key: str) -> list[str]:
    """The key and overlapping 16-character pieces of it: a half-kept key still shows one."""
    return [key, *(key[i : i + 16] for i in range(0, len(key) - 15, 8))]


@tool
def lookup(name: str) -> str:
    """Look a name up."""
    return f"{name}: found"


@dataclass
class Artifacts:
    """Every text agentloop produced, by where it came from."""

    texts: list[tuple[str, str]] = field(default_factory=list)
    errors: list[AgentLoopError] = field(default_factory=list)

    def add(self, where: str, text: str | bytes) -> None:
        if isinstance(text, bytes):
            text = text.decode("latin-1")
        self.texts.append((where, text))

    def error(self, where: str, error: BaseException) -> None:
        assert isinstance(error, AgentLoopError), f"{where}: {type(error).__name__} escaped"
        self.errors.append(error)
        self.add(f"{where} str", str(error))
        self.add(f"{where} repr", repr(error))
        self.add(f"{where} args", repr(error.args))
        for name, value in error.attributes().items():
            self.add(f"{where} .{name}", f"{value!s} {value!r}")
        if isinstance(error, ProviderError):
            for record in error.attempt_log:
                self.add(f"{where} attempt_log", repr(record))
        self.add(f"{where} pickle", pickle.dumps(error))
        self.add(f"{where} pickled repr", repr(pickle.loads(pickle.dumps(error))))
        self.add(f"{where} traceback", "".join(traceback.format_exception(error)))

    def leaks(self, key: str) -> list[str]:
        """One line per artifact that holds the key or a piece of it."""
        found = []
        for where, text in self.texts:
            piece = next((p for p in pieces(key) if p in text), None)
            if piece is not None:
                at = text.find(piece)
                found.append(f"{where}: {piece!r} in {text[max(0, at - 100) : at + 60]!r}")
        return found


# -- servers ----------------------------------------------------------------------------------


@dataclass
class Answer:
    """What the hostile server sends to the next request."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def always(answer: Answer) -> Callable[[], Answer]:
    """The same answer to every request."""
    return lambda: answer


@asynccontextmanager
async def hostile_server(answers: Callable[[], Answer]) -> AsyncIterator[str]:
    """Answers every POST with ``answers()``; yields ``http://127.0.0.1:port``."""

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        answer = answers()
        return web.Response(
            status=answer.status,
            body=answer.body,
            headers={"Content-Type": answer.content_type, **answer.headers},
        )

    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def straddling(key: str, offset: int, *, shape: str) -> str:
    """An error body whose text puts ``key`` across the 8 KiB cut, ``offset`` chars before it."""
    start = MAX_ERROR_BODY - offset
    if shape == "text":
        return "e" * start + key + " and more text after it"
    head = '{"error": {"message": "'
    return head + "e" * (start - len(head)) + key + ' and more", "type": "x", "code": "x"}}'


def openai_error(message: str, code: str = "invalid_api_key") -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def anthropic_error(message: str, kind: str = "authentication_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def gemini_error(message: str, code: int = 400, status: str = "INVALID_ARGUMENT") -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


def status_faults(key: str, error: Callable[[str], dict[str, Any]]) -> list[Fault]:
    """Every status fault the scripted server can send, each echoing the key."""
    echo = {"x-request-id": key, "Retry-After": "0"}
    faults = [
        Fault.http(401, error(f"Incorrect API key provided: {key}")),
        Fault.http(403, error(f"key {key} may not use this model")),
        Fault.http(429, error(f"Rate limit for key {key}"), echo),
        Fault.http(429, error(f"quota of {key} insufficient_quota")),
        Fault.http(500, error(f"internal error handling {key}"), echo),
        Fault.http(503, f"<html>overloaded, key={key}</html>", echo),
        Fault.http(529, f"Authorization: Bearer {key}", echo),
        Fault.http(400, error(f"bad request from {key}: context_length_exceeded")),
        Fault.http(402, {"error": {"code": 402, "message": f"no credits on {key}"}}),
        Fault.http(404, error(f"model not found for {key}")),
        Fault.http(413, f"too large {key}"),
        Fault.http(200, f"this is not JSON {key}"),
        Fault.http(200, {"choices": key, "content": key, "candidates": key, "type": key}),
        Fault.redirect(f"https://evil.example/cb?key={key}&token={key}"),
        Fault.redirect(f"https://{key}:{key}@evil.example/{key}"),
        Fault.redirect(f"https://{key}.example/"),
        Fault.malformed(),
        Fault.truncate(),
        Fault.reset(),
        Fault.hang(seconds=5.0),
    ]
    for offset in (1, 8, len(key) // 2, len(key) - 1):
        faults.append(Fault.http(400, straddling(key, offset, shape="text")))
        faults.append(Fault.http(500, straddling(key, offset, shape="json"), echo))
    return faults


def stream_answers(key: str, provider: str) -> list[Answer]:
    """Hostile streams: an error event, undecodable chunks, an over-long line, each with the key."""
    sse = "text/event-stream"
    error = {
        "openai": json.dumps(openai_error(f"stream failed for {key}", "server_error")),
        "anthropic": json.dumps(anthropic_error(f"overloaded {key}", "overloaded_error")),
        "gemini": json.dumps(gemini_error(f"stream failed {key}", 500, "INTERNAL")),
    }[provider]
    event = "event: error\n" if provider == "anthropic" else ""
    return [
        Answer(body=f"{event}data: {error}\n\n".encode(), content_type=sse),
        Answer(body=f"data: {{{key}\n\n".encode(), content_type=sse),
        Answer(
            body=f'data: {{"choices": "{key}", "type": "{key}"}}\n\n'.encode(), content_type=sse
        ),
        Answer(body=b"data: " + key.encode() + b"x" * (1100 * 1024) + b"\n\n", content_type=sse),
        Answer(status=500, body=straddling(key, 5, shape="json").encode(), content_type=sse),
        Answer(body=f"not json at all {key}".encode()),
        Answer(status=401, body=json.dumps(gemini_error(f"API key not valid: {key}")).encode()),
        Answer(body=json.dumps({"candidates": [{"content": key}], "promptFeedback": key}).encode()),
    ]


# -- driving ----------------------------------------------------------------------------------


def retrying(inner: ModelClient) -> RetryingClient:
    return RetryingClient(
        inner, max_retries=2, base_delay=0.001, max_delay=0.002, rate_limit_default_delay=0.001,
        rate_limit_max_delay=0.002, rate_limit_retries=2,
    )  # fmt: skip


async def drive(
    found: Artifacts, client: ModelClient, store: SQLiteStore, session: str, *, stream: bool
) -> None:
    """One agent run through ``client``; every error, record and event into ``found``."""
    agent = Agent(client, tools=[lookup], store=store, session_id=session)
    try:
        if stream:
            async with agent.stream("look up ada") as events:
                async for event in events:
                    found.add(f"{session} event", repr(event))
        else:
            await agent.run("look up ada")
    except AgentLoopError as error:
        found.error(session, error)
    for run in agent.runs:
        found.add(f"{session} Run.to_dict", json.dumps(run.to_dict(), default=repr))
        if run.stop_reason is not None:
            found.error(f"{session} stop_reason", run.stop_reason)


def scripted_client(provider: str, server: FakeProviderServer, key: str) -> ModelClient:
    if provider == "anthropic":
        return AnthropicClient("fake-model", api_key=key, base_url=server.root_url, timeout=0.5)
    return OpenAIClient("fake-model", api_key=key, base_url=server.base_url, timeout=0.5)


def hostile_client(provider: str, url: str, key: str) -> ModelClient:
    if provider == "anthropic":
        return AnthropicClient("m", api_key=key, base_url=url, timeout=0.5)
    if provider == "gemini":
        return GeminiClient("m", api_key=key, base_url=url + "/v1beta", timeout=0.5)
    return OpenAIClient("m", api_key=key, base_url=url + "/v1", timeout=0.5)


async def scripted_paths(found: Artifacts, provider: str, key: str, store: SQLiteStore) -> None:
    """Every status/transport fault of the scripted server, after a completed tool call."""
    error = anthropic_error if provider == "anthropic" else openai_error
    faults = status_faults(key, error)
    for n, fault in enumerate(faults):
        for stream in (False, True):
            script = [FakeReply(tool_calls=[FakeToolCall("lookup", {"name": "ada"})])]
            async with FakeProviderServer(script, default=fault) as server:
                client = retrying(scripted_client(provider, server, key))
                try:
                    await drive(found, client, store, f"{provider}-{n}-{stream}", stream=stream)
                finally:
                    await client.aclose()
                found.add(f"{provider} client repr", repr(client))


async def hostile_paths(found: Artifacts, provider: str, key: str, store: SQLiteStore) -> None:
    """Hand-made bodies and streams no scripted fault sends."""
    answers = stream_answers(key, provider)
    if provider == "gemini":
        echo = {"x-request-id": key, "Retry-After": "0"}
        answers += [
            Answer(status=s, body=straddling(key, o, shape="json").encode(), headers=echo)
            for s in (400, 429, 500) for o in (1, 8, len(key) // 2)
        ]  # fmt: skip
    for n, answer in enumerate(answers):
        for stream in (False, True):
            async with hostile_server(always(answer)) as url:
                client = retrying(hostile_client(provider, url, key))
                try:
                    await drive(found, client, store, f"{provider}-h{n}-{stream}", stream=stream)
                finally:
                    await client.aclose()


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)  # the root logger: every logger's records reach it
    yield caplog


def add_logs(found: Artifacts, caplog: pytest.LogCaptureFixture) -> None:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    for record in caplog.records:
        found.add(f"log {record.name}", formatter.format(record))


def add_store(
    found: Artifacts, db: Path, capsys: pytest.CaptureFixture[str], runs: list[str]
) -> None:
    for path in db.parent.glob(db.name + "*"):  # the database, its WAL and shared memory
        found.add(f"store file {path.name}", path.read_bytes())
    capsys.readouterr()
    main(["runs", "--store", str(db)])
    found.add("agentloop runs", "".join(capsys.readouterr()))
    for run_id in runs:
        main(["runs", "show", run_id, "--store", str(db)])
        found.add(f"agentloop runs show {run_id}", "".join(capsys.readouterr()))


# -- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(KEYS.values()), ids=list(KEYS))
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_no_artifact_of_any_failure_contains_the_key(
    provider: str,
    key: str,
    tmp_path: Path,
    debug_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    found = Artifacts()
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    try:
        if provider != "gemini":
            await scripted_paths(found, provider, key, store)
        await hostile_paths(found, provider, key, store)
        runs = [s.run.id for s in store.load_runs()]
    finally:
        store.close()
    add_logs(found, debug_logs)
    add_store(found, db, capsys, runs)
    kinds = {type(e).__name__ for e in found.errors}
    assert len(found.errors) >= 20 and len(kinds) >= 5, kinds  # the paths were really driven
    assert not found.leaks(key), "\n".join(found.leaks(key)[:20])


async def test_build_client_and_settings_keep_the_key_out(
    tmp_path: Path, debug_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """The public way in: ``Settings`` and ``build_client`` (its own ``RetryingClient``)."""
    key = KEYS["random"]
    found = Artifacts()
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    fault = Fault.http(401, openai_error(f"Incorrect API key provided: {key}"))
    async with FakeProviderServer(default=fault) as server:
        settings = Settings("openai", "fake-model", api_key=key, base_url=server.base_url)
        found.add("Settings repr", repr(settings))
        client = build_client(settings)
        found.add("client repr", repr(client))
        try:
            await drive(found, client, store, "built", stream=False)
        finally:
            await client.aclose()
        assert server.received[0].headers["Authorization"] == f"Bearer {key}"  # it was sent
        echo = {"x-request-id": key, "Retry-After": "0"}
        pairs = [
            (Fault.http(503, f"busy {key}", echo), fault),
            (Fault.reset(), Fault.http(429, f"slow {key}", echo)),
        ]
        for n, faults in enumerate(pairs):
            async with (
                FakeProviderServer(default=faults[0]) as first,
                FakeProviderServer(default=faults[1]) as second,
            ):
                fallback = FallbackClient(
                    [retrying(scripted_client("openai", s, key)) for s in (first, second)]
                )
                try:
                    await drive(found, fallback, store, f"fallback-{n}", stream=bool(n))
                finally:
                    await fallback.aclose()
    runs = [s.run.id for s in store.load_runs()]
    store.close()
    add_logs(found, debug_logs)
    add_store(found, db, capsys, runs)
    assert [type(e).__name__ for e in found.errors][:1] == ["AuthError"]
    assert not found.leaks(key), "\n".join(found.leaks(key)[:20])


@contextmanager
def serving_in_a_thread(default: Fault) -> Iterator[FakeProviderServer]:
    """A fake server on its own thread and loop, for ``main()`` (which runs its own loop)."""
    loop = asyncio.new_event_loop()
    server = FakeProviderServer(default=default)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.mark.parametrize("key", list(KEYS.values()), ids=list(KEYS))
def test_agentloop_run_prints_and_stores_no_key(
    key: str,
    tmp_path: Path,
    debug_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``agentloop run`` failing on a key-echoing server: its paragraph, ``--debug`` traceback,
    and the store it writes."""
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)
    found = Artifacts()
    db = tmp_path / "agentloop.db"
    echo = {"x-request-id": key, "Retry-After": "0"}
    for fault in (
        Fault.http(401, openai_error(f"Incorrect API key provided: {key}")),
        Fault.http(500, straddling(key, len(key) // 2, shape="json"), echo),
        Fault.http(404, f"no such model for {key}", echo),
        Fault.redirect(f"https://{key}.example/?key={key}"),
    ):
        with serving_in_a_thread(fault) as server:
            for extra in ([], ["--debug"], ["--plain", "--debug"]):
                argv = ["run", "task", "--provider", "openai", "--base-url", server.base_url]
                assert main([*argv, "--store", str(db), *extra]) == 1
                found.add(f"agentloop run {fault.status} {extra}", "".join(capsys.readouterr()))
            assert server.received[0].headers["Authorization"] == f"Bearer {key}"
    add_logs(found, debug_logs)
    with SQLiteStore(db) as store:
        runs = [s.run.id for s in store.load_runs()]
    add_store(found, db, capsys, runs)
    assert len(runs) == 12
    printed = "".join(text for where, text in found.texts if where.startswith("agentloop run"))
    assert "AuthError" in printed and "Traceback" in printed and "UnexpectedRedirect" in printed
    assert not found.leaks(key), "\n".join(found.leaks(key)[:20])
