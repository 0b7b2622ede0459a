"""A real, fault-injecting, OpenAI-compatible HTTP server on 127.0.0.1 for tests and the demo.

Provider behaviour is only worth testing through real sockets: ``FakeProviderServer`` runs an
aiohttp web server on an ephemeral port and answers ``POST /v1/chat/completions`` (JSON, or SSE
when the request says ``"stream": true``) from a script, one step per request::

    async with FakeProviderServer([
        Fault.rate_limit(retry_after=0.01),
        FakeReply(tool_calls=[FakeToolCall("read_file", {"path": "a.txt"})]),
        FakeReply("done"),
    ]) as server:
        client = OpenAIClient("fake-model", api_key="k", base_url=server.base_url)
        ...
        server.requests        # every request body received, in order

A step is a ``FakeReply``, a ``Fault`` or a callable ``body -> step``. When the script runs out,
``default`` answers (a 500 naming the exhaustion when it is None). Faults: any status with body
and headers (``Fault.http``, and shorthands for 429 + Retry-After, 401, 402, 400
context_length_exceeded, 500, 503, 529), a 3xx redirect, a connection reset before the response,
a hang (read timeout), a truncated stream (no ``[DONE]``), a malformed JSON body, slow chunks.
Every step may wait ``delay`` seconds before it answers.

The same script also answers ``POST /v1/messages`` in the Anthropic Messages format (JSON, or
SSE ending with ``message_stop``; a truncated stream stops before it), so
``AnthropicClient(base_url=server.root_url)`` works too, and ``POST /v1/responses`` in OpenAI's
Responses format (JSON, or SSE ending with ``response.completed``), for
``OpenAIResponsesClient(base_url=server.base_url)``; and the routes of SPEC 24 (Azure's
``/openai/...`` paths, Bedrock's ``/model/{id}/converse`` and ``converse-stream`` in AWS
event-stream frames, Gemini's ``/v1beta/models/{m}:generateContent`` and Vertex AI's
``publishers/google`` and ``publishers/anthropic`` paths; ``fake_converse``, ``fake_gemini``).
A reply may carry reasoning (``FakeReply.thinking``) and be a refusal (``FakeReply.refusal``)
in each format. Status faults send an OpenAI-shaped error body unless given one (agentloop
classifies both shapes).

On ``/v1/messages`` for a model whose profile is ``append_only`` (``claude-fable-5-1``,
``claude-opus-5-5``), it plays that model's prefix check (SPEC 28, ``fake_binding``): a thinking
block sent back after its ``system``, ``tools`` or earlier messages changed is the documented
400 ``The block is bound to a different conversation``.

Beyond the script the server is strict, as a real provider is: ``GET /v1/models`` lists the
models it serves; any other path is a 404 with an OpenAI error body (``unknown_url``); with a
``models`` list, a request for another model is a 404 ``model_not_found`` that uses no step.
``rate_limit=(rpm, window)`` makes it a provider with a rate limit: a model request beyond
``rpm`` arrivals in the last ``window`` seconds is a 429 with ``Retry-After`` (until the oldest
leaves the window) that uses no step and is not counted; ``rate_limited`` counts them. It logs
nothing of its own: a client that disconnects mid-answer and its own ``reset`` and
``hang`` faults end the exchange quietly. It also speaks the batch APIs of OpenAI and
Anthropic (``fake_batches``; a batch completes ``batch_after`` seconds after it is created).
Scripts can also come from a JSON or TOML file (``FakeProviderServer.from_script``; the
format is in ``fake_script``).

aiohttp is imported lazily (``import agentloop`` stays light). The steps (``FakeReply``,
``Fault``, ``FakeToolCall``) are data in ``fake_steps``, re-exported here; the wire formats are
in ``fake_wire``. This module is re-exported from ``agentloop.testing``.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from agentloop._util.aio import AsyncClosing
from agentloop._util.slots import record
from agentloop.testing import fake_wire as wire
from agentloop.testing.fake_batches import FakeBatches
from agentloop.testing.fake_binding import Binding
from agentloop.testing.fake_converse import FORMAT
from agentloop.testing.fake_gemini import FORMAT as GEMINI
from agentloop.testing.fake_ledger import Ledger
from agentloop.testing.fake_script import load_fake_script
from agentloop.testing.fake_steps import FakeReply, FakeToolCall, Fault, Step

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["FakeProviderServer", "FakeReply", "FakeToolCall", "Fault", "RecordedRequest", "Step"]

_HANG_POLL = 0.05
"""How often a hanging answer looks whether its client is still there (seconds)."""


@record
class RecordedRequest:
    """One model request the server received (``/v1/models`` and unknown paths are not kept)."""

    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]


class FakeProviderServer(AsyncClosing):
    """An OpenAI-compatible server on 127.0.0.1 that answers from a script of replies and faults."""

    def __init__(
        self,
        script: Sequence[Step] = (),
        *,
        default: Step | None = None,
        model: str = "fake-model",
        models: Sequence[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        rate_limit: tuple[int, float] | None = None,
        batch_after: float = 0.0,
    ) -> None:
        """Prepare the server (``start()`` or ``async with`` binds the port).

        Args:
            script: One step per request, in order.
            default: Answers once the script is exhausted; None = a 500 saying so.
            model: The model name echoed in replies (and listed, without ``models``).
            models: The models served: ``GET /v1/models`` lists them, a request for any other
                is a 404 ``model_not_found``, and replies echo the requested name. None (the
                default) accepts every model name.
            host: Interface to bind (keep 127.0.0.1 in tests).
            port: Port to bind; 0 picks a free one.
            rate_limit: ``(rpm, window)``: answer 429 above ``rpm`` requests per ``window`` s.
            batch_after: Seconds a batch (``fake_batches``) takes to complete.
        """
        self._script: list[Step] = list(script)
        self.default = default
        self.model = model
        self.models = None if models is None else tuple(models)
        self._host = host
        self._port = port
        self.received: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._ledger = Ledger()  # the server tool blocks handed out (SPEC 24)
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._binding = Binding()  # an append-only Claude's bound thinking (fake_binding)
        self.rate_limit = rate_limit
        self.batches = FakeBatches(self._next_step, self._echoed, batch_after)
        self.rate_limited = 0
        """Requests answered 429 by ``rate_limit``."""
        self._arrivals: collections.deque[float] = collections.deque()

    @classmethod
    def from_script(
        cls,
        script: str | os.PathLike[str] | Mapping[str, Any] | Sequence[Any],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> FakeProviderServer:
        """A server playing a script file (``.json`` or ``.toml``) or its parsed data.

        Raises:
            ConfigurationError: The file does not parse or a step is not understood; the
                message names the step and the key.
        """
        parsed = load_fake_script(script)
        return cls(
            parsed.steps,
            default=parsed.default,
            model=parsed.model,
            models=parsed.models,
            rate_limit=parsed.rate_limit,
            batch_after=parsed.batch_after,
            host=host,
            port=port,
        )

    @property
    def requests(self) -> list[Mapping[str, Any]]:
        """Every request body received, in order."""
        return [request.body for request in self.received]

    @property
    def port(self) -> int:
        """The bound port (after ``start``)."""
        if self._runner is None:
            raise RuntimeError("FakeProviderServer is not started")
        address = self._runner.addresses[0]
        return int(address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: pass it as a client's ``base_url``."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>``: the base URL for ``AnthropicClient``."""
        return f"http://{self._host}:{self.port}"

    def push(self, *steps: Step) -> None:
        """Append steps to the script."""
        self._script.extend(steps)

    async def start(self) -> Self:
        """Bind and serve."""
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/messages", self._handle)
        app.router.add_post("/v1/responses", self._handle)
        for path in _ROUTE_PATHS:  # Azure, Bedrock and Vertex (SPEC 24)
            app.router.add_post(path, self._handle)
        app.router.add_get("/v1/models", self._list_models)
        app.router.add_get("/v1/models/{name}", self._get_model)
        self.batches.routes(app)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        runner = web.AppRunner(app, shutdown_timeout=0.1, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, self._host, self._port).start()
        self._runner = runner
        return self

    async def aclose(self) -> None:
        """Stop serving; hanging requests are released."""
        self._closing.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    close = aclose  # the name tests and the CLI use

    async def __aenter__(self) -> Self:
        return await self.start()

    def _next_step(self, body: Mapping[str, Any]) -> FakeReply | Fault:
        step = self._script.pop(0) if self._script else self.default
        if step is None:
            message = f"fake server script exhausted at request {len(self.received)}"
            return Fault.http(500, wire.openai_error(message, "script_exhausted"))
        return step(body) if callable(step) else step

    def _over_rate(self) -> float | None:
        """Seconds until a slot frees when this arrival is over ``rate_limit`` (else counted)."""
        if self.rate_limit is None:
            return None
        rpm, window = self.rate_limit
        now = asyncio.get_running_loop().time()
        while self._arrivals and self._arrivals[0] <= now - window:
            self._arrivals.popleft()
        if len(self._arrivals) >= rpm:
            return max(0.001, self._arrivals[0] + window - now)
        self._arrivals.append(now)
        return None

    def _echoed(self, body: Mapping[str, Any]) -> str:
        """The model name a reply carries."""
        return self.model if self.models is None else str(body.get("model"))

    def _served(self) -> tuple[str, ...]:
        return (self.model,) if self.models is None else self.models

    def _model_object(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": 0, "owned_by": "agentloop"}

    async def _list_models(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        data = [self._model_object(name) for name in self._served()]
        return web.json_response({"object": "list", "data": data})

    async def _get_model(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        name = request.match_info["name"]
        if name not in self._served():
            return _json(404, _unknown_model(name, anthropic=False), {})
        return web.json_response(self._model_object(name))

    async def _unknown(self, request: web.Request) -> web.StreamResponse:
        served = ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/models")
        status, code = (
            (405, "method_not_allowed") if request.path in served else (404, "unknown_url")
        )
        message = f"Invalid URL ({request.method} {request.path})"
        return _json(status, wire.openai_error(message, code), {})

    def _rejection(self, anthropic: bool, name: object) -> dict[str, Any] | None:
        """The 404 body for a model this server does not serve (None: serve it)."""
        if self.models is None or name in self.models:
            return None
        return _unknown_model(str(name), anthropic=anthropic)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_raw": raw.decode("utf-8", errors="replace")}
        self.received.append(RecordedRequest(request.path, dict(request.headers), body))
        number = next(self._ids)
        headers = {"x-request-id": f"req_fake_{number}"}
        wire_name, in_path, streamed = _route(request.path)
        named = body.get("model") if in_path is None else in_path
        rejection = self._rejection(wire_name == "anthropic", named)
        if rejection is not None:
            return _json(404, rejection, headers)
        wait = self._over_rate()
        if wait is not None:
            self.rate_limited += 1
            limited = Fault.rate_limit(round(wait, 3))
            return _json(429, limited.body or "", {**headers, **limited.headers})
        model = self.model if self.models is None else str(named)
        bound = wire_name == "anthropic" and Binding.applies(model)
        problem = self._binding.check(body) if bound else None
        if problem is not None:
            error = wire.anthropic_error("invalid_request_error", problem)
            return _json(400, error, headers)
        changed = self._ledger.check(wire_name, body)
        if changed is not None:
            return _json(changed[0], changed[1], headers)
        step = self._next_step(body)
        await self._pause(step.delay)
        stream = bool(body.get("stream")) if streamed is None else streamed
        exchange = _Exchange(request, stream, number, headers, model, _FORMATS[wire_name])
        if isinstance(step, FakeReply):
            if bound and step.thinking is not None:
                ident = f"{exchange.form.id_prefix}{number}"
                self._binding.bind(body, step.thinking_signature or f"sig_{ident}")
            self._ledger.issue(wire_name, step, f"{exchange.form.id_prefix}{number}")
            return await self._reply(exchange, step)
        if step.kind in ("status", "redirect"):
            payload = step.body if step.body is not None else wire.openai_error("fault", "fault")
            return _json(step.status, payload, {**headers, **step.headers})
        return await self._misbehave(exchange, step)

    async def _reply(
        self, exchange: _Exchange, reply: FakeReply, *, complete: bool = True
    ) -> web.StreamResponse:
        from aiohttp import web

        number, form = exchange.number, exchange.form
        ident = f"{form.id_prefix}{number}"
        call_ids = [c.id or f"call_fake_{number}_{i}" for i, c in enumerate(reply.tool_calls)]
        if not exchange.stream:
            await self._pause(reply.chunk_delay)
            text = json.dumps(form.body(reply, exchange.model, ident, call_ids))
            if not complete:
                text = text[: len(text) // 2]
            return _json(200, text, exchange.headers)
        chunks: list[bytes] = form.events(reply, exchange.model, ident, call_ids)
        if not complete:
            chunks = chunks[: max(1, len(chunks) // 2)]
        else:
            chunks.append(form.end(reply, exchange.model, ident, call_ids))
        response = web.StreamResponse(
            headers={**exchange.headers, "Content-Type": form.content_type}
        )
        try:
            await response.prepare(exchange.request)
            for chunk in chunks:
                await response.write(chunk)
                await self._pause(reply.chunk_delay)
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away mid-stream: its business, not an error of ours
        return response

    async def _misbehave(self, exchange: _Exchange, fault: Fault) -> web.StreamResponse:
        from aiohttp import web

        if fault.kind == "truncate":
            assert fault.reply is not None
            return await self._reply(exchange, fault.reply, complete=False)
        if fault.kind == "malformed":
            if not exchange.stream:
                return _json(200, '{"choices": [', {})
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            try:
                await response.prepare(exchange.request)
                await response.write(exchange.form.malformed)
                await response.write_eof()
            except ConnectionError:
                pass
            return response
        if fault.kind == "hang":
            await self._hang(exchange.request, fault.seconds)
        transport = exchange.request.transport
        if transport is not None:
            transport.abort()
        # Returning (not raising) keeps aiohttp from logging a traceback: writing this answer to
        # the aborted transport fails with a ConnectionError, which aiohttp ignores quietly.
        return web.Response(status=500)

    async def _hang(self, request: web.Request, seconds: float) -> None:
        """Answer nothing for ``seconds`` (forever by default) or until the client hangs up.

        aiohttp does not cancel a handler whose client went away, so the hang looks at the
        connection every ``_HANG_POLL`` seconds; closing the server releases it at once.
        """
        deadline = asyncio.get_running_loop().time() + seconds
        while not self._closing.is_set():
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            await self._pause(min(left, _HANG_POLL))

    async def _pause(self, seconds: float) -> None:
        if seconds <= 0:
            return
        try:
            await asyncio.wait_for(self._closing.wait(), timeout=seconds)
        except TimeoutError:
            pass


@record
class _Exchange:
    """One request being answered: what every answering step needs to know about it."""

    request: web.Request
    stream: bool
    number: int
    headers: dict[str, str]
    model: str
    form: wire.WireFormat


_WIRES = {
    "/v1/chat/completions": "chat",
    "/v1/messages": "anthropic",
    "/v1/responses": "responses",
    "/openai/v1/chat/completions": "chat",  # Azure's v1 API
}
_ROUTE_PATHS = (
    "/openai/v1/chat/completions",
    "/openai/deployments/{name}/chat/completions",  # Azure's dated API
    "/model/{name}/{action}",  # Bedrock Converse
    "/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{call}",  # Vertex
    "/v1beta/models/{call}",  # the Gemini API
)
_FORMATS = {**wire.FORMATS, "converse": FORMAT, "gemini": GEMINI}


def _route(path: str) -> tuple[str, str | None, bool | None]:
    """The wire a path speaks, the model its path names, and whether it streams (None: body)."""
    if path in _WIRES:
        return _WIRES[path], None, None
    parts = path.split("/")
    if parts[1] == "openai":
        return "chat", parts[3], None
    if parts[1] == "model":
        return "converse", parts[2], parts[3] == "converse-stream"
    model, _, method = parts[-1].partition(":")
    if "anthropic" in parts:
        return "anthropic", model, method == "streamRawPredict"
    return "gemini", model, method == "streamGenerateContent"


def _json(
    status: int, payload: str | Mapping[str, Any], headers: Mapping[str, str]
) -> web.Response:
    from aiohttp import web

    text = payload if isinstance(payload, str) else json.dumps(payload)
    return web.Response(
        status=status, text=text, headers=dict(headers), content_type="application/json"
    )


def _unknown_model(name: str, *, anthropic: bool) -> dict[str, Any]:
    if anthropic:
        return wire.anthropic_error("not_found_error", f"model: {name}")
    message = f"The model '{name}' does not exist or you do not have access to it."
    return wire.openai_error(message, "model_not_found", param="model")
