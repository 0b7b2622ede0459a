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
and headers (``Fault.status``, and shorthands for 429 + Retry-After, 401, 402, 400
context_length_exceeded, 500, 503, 529), a 3xx redirect, a connection reset before the response,
a hang (read timeout), a truncated stream (no ``[DONE]``), a malformed JSON body, slow chunks.

The same script also answers ``POST /v1/messages`` in the Anthropic Messages format (JSON, or
SSE ending with ``message_stop``; a truncated stream stops before it), so
``AnthropicClient(base_url=server.root_url)`` works too. Status faults send an OpenAI-shaped
error body unless given one (agentloop classifies both shapes).

aiohttp is imported lazily (``import agentloop`` stays light). This module is re-exported from
``agentloop.testing``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["FakeProviderServer", "FakeReply", "FakeToolCall", "Fault", "RecordedRequest", "Step"]

FaultKind: TypeAlias = Literal["status", "redirect", "reset", "hang", "truncate", "malformed"]


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    """A tool call the fake model makes (``id`` is generated when None)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def raw_arguments(self) -> str:
        """The argument text on the wire (a str is sent verbatim, e.g. invalid JSON)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments))


@dataclass(frozen=True, slots=True)
class FakeReply:
    """A successful answer: text and/or tool calls, usage, optional pacing between chunks."""

    text: str = ""
    tool_calls: Sequence[FakeToolCall] = ()
    finish_reason: str | None = None
    input_tokens: int = 10
    output_tokens: int = 5
    chunk_delay: float = 0.0

    @property
    def finish(self) -> str:
        """The ``finish_reason`` sent: explicit, else ``tool_calls`` or ``stop``."""
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


@dataclass(frozen=True, slots=True)
class Fault:
    """A failure injected into one request; build it with the class methods."""

    kind: FaultKind
    status: int = 500
    body: str | Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    reply: FakeReply | None = None
    seconds: float = 30.0

    @classmethod
    def http(
        cls,
        status: int,
        body: str | Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Fault:
        """Answer with ``status``, ``body`` (default: an OpenAI error object) and ``headers``."""
        return cls("status", status=status, body=body, headers=dict(headers or {}))

    @classmethod
    def rate_limit(cls, retry_after: float | None = 1.0) -> Fault:
        """429 with ``Retry-After`` (seconds) when given."""
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        return cls.http(429, _error("Rate limit reached", "rate_limit_exceeded"), headers)

    @classmethod
    def auth(cls) -> Fault:
        """401 invalid key."""
        return cls.http(401, _error("Incorrect API key provided", "invalid_api_key"))

    @classmethod
    def insufficient_credits(cls) -> Fault:
        """OpenRouter's 402."""
        return cls.http(402, {"error": {"code": 402, "message": "Insufficient credits"}})

    @classmethod
    def quota(cls) -> Fault:
        """OpenAI's quota 429 (``insufficient_quota``), which is not a rate limit."""
        return cls.http(429, _error("You exceeded your current quota", "insufficient_quota"))

    @classmethod
    def context_overflow(cls) -> Fault:
        """400 ``context_length_exceeded``."""
        message = "This model's maximum context length is 8192 tokens."
        return cls.http(400, _error(message, "context_length_exceeded"))

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        """A 5xx (500, 503, 529...)."""
        return cls.http(status, _error("The server had an error", "server_error"))

    @classmethod
    def redirect(cls, location: str = "https://elsewhere.example/v1", status: int = 302) -> Fault:
        """A 3xx to ``location``."""
        return cls("redirect", status=status, headers={"Location": location})

    @classmethod
    def reset(cls) -> Fault:
        """Read the request, then drop the connection without answering."""
        return cls("reset")

    @classmethod
    def hang(cls, seconds: float = 30.0) -> Fault:
        """Read the request and answer nothing for ``seconds`` (a read timeout)."""
        return cls("hang", seconds=seconds)

    @classmethod
    def truncate(cls, reply: FakeReply | None = None) -> Fault:
        """Stream part of ``reply`` and end cleanly without ``[DONE]`` (JSON: cut the body)."""
        return cls("truncate", reply=reply or FakeReply("partial answer"))

    @classmethod
    def malformed(cls) -> Fault:
        """200 with a body (or stream chunk) that is not valid JSON."""
        return cls("malformed")


Step: TypeAlias = FakeReply | Fault | Callable[[Mapping[str, Any]], "FakeReply | Fault"]


def _error(message: str, code: str) -> dict[str, Any]:
    kind = "insufficient_quota" if code == "insufficient_quota" else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received."""

    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]


def _chunk(ident: str, model: str, choices: list[dict[str, Any]], **extra: Any) -> bytes:
    data = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _delta(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
    return [{"index": 0, "delta": delta, "finish_reason": finish}]


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_chunks(reply: FakeReply, model: str, ident: str, call_ids: list[str]) -> list[bytes]:
    """The SSE chunks of ``reply`` (without the final ``[DONE]``)."""
    chunks = [_chunk(ident, model, _delta({"role": "assistant", "content": ""}))]
    chunks += [_chunk(ident, model, _delta({"content": p})) for p in _pieces(reply.text)]
    for index, (call, call_id) in enumerate(zip(reply.tool_calls, call_ids, strict=True)):
        head = {"index": index, "id": call_id, "type": "function"}
        head["function"] = {"name": call.name, "arguments": ""}
        chunks.append(_chunk(ident, model, _delta({"tool_calls": [head]})))
        for piece in _pieces(call.raw_arguments()):
            part = {"index": index, "function": {"arguments": piece}}
            chunks.append(_chunk(ident, model, _delta({"tool_calls": [part]})))
    chunks.append(_chunk(ident, model, _delta({}, reply.finish)))
    usage = {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }
    chunks.append(_chunk(ident, model, [], usage=usage))
    return chunks


def completion_body(
    reply: FakeReply, model: str, ident: str, call_ids: list[str]
) -> dict[str, Any]:
    """The non-streaming Chat Completions body of ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.raw_arguments()},
            }
            for call, call_id in zip(reply.tool_calls, call_ids, strict=True)
        ]
    return {
        "id": ident,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish}],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _anthropic_stop(reply: FakeReply) -> str:
    mapping = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
    return mapping.get(reply.finish, reply.finish)


def anthropic_body(reply: FakeReply, model: str, ident: str, call_ids: list[str]) -> dict[str, Any]:
    """The non-streaming Anthropic Messages body of ``reply``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for call, call_id in zip(reply.tool_calls, call_ids, strict=True):
        arguments = call.arguments if isinstance(call.arguments, Mapping) else {}
        content.append(
            {"type": "tool_use", "id": call_id, "name": call.name, "input": dict(arguments)}
        )
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _anthropic_stop(reply),
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


def anthropic_events(reply: FakeReply, model: str, ident: str, call_ids: list[str]) -> list[bytes]:
    """The Anthropic Messages SSE events of ``reply`` (without the final ``message_stop``)."""
    start = anthropic_body(FakeReply(input_tokens=reply.input_tokens), model, ident, [])
    start["usage"]["output_tokens"] = 0
    start["stop_reason"] = None
    events = [_sse("message_start", {"type": "message_start", "message": start})]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if reply.text:
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(reply.text)]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for call, call_id in zip(reply.tool_calls, call_ids, strict=True):
        head = {"type": "tool_use", "id": call_id, "name": call.name, "input": {}}
        parts = [
            {"type": "input_json_delta", "partial_json": p} for p in _pieces(call.raw_arguments())
        ]
        blocks.append((head, parts))
    for index, (head, deltas) in enumerate(blocks):
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": head},
            )
        )
        events += [
            _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": _anthropic_stop(reply), "stop_sequence": None}
    usage = {"output_tokens": reply.output_tokens}
    events.append(_sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    return events


class FakeProviderServer:
    """An OpenAI-compatible server on 127.0.0.1 that answers from a script of replies and faults."""

    def __init__(
        self,
        script: Sequence[Step] = (),
        *,
        default: Step | None = None,
        model: str = "fake-model",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """Prepare the server (``start()`` or ``async with`` binds the port).

        Args:
            script: One step per request, in order.
            default: Answers once the script is exhausted; None = a 500 saying so.
            model: The model name echoed in replies.
            host: Interface to bind (keep 127.0.0.1 in tests).
            port: Port to bind; 0 picks a free one.
        """
        self._script: list[Step] = list(script)
        self.default = default
        self.model = model
        self._host = host
        self._port = port
        self.received: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()

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

    async def start(self) -> FakeProviderServer:
        """Bind and serve."""
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        app.router.add_post("/v1/messages", self._handle)
        runner = web.AppRunner(app, shutdown_timeout=0.1, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, self._host, self._port).start()
        self._runner = runner
        return self

    async def close(self) -> None:
        """Stop serving; hanging requests are released."""
        self._closing.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> FakeProviderServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _next_step(self, body: Mapping[str, Any]) -> FakeReply | Fault:
        step = self._script.pop(0) if self._script else self.default
        if step is None:
            message = f"fake server script exhausted at request {len(self.received)}"
            return Fault.http(500, _error(message, "script_exhausted"))
        return step(body) if callable(step) else step

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_raw": raw.decode("utf-8", errors="replace")}
        self.received.append(RecordedRequest(request.path, dict(request.headers), body))
        step = self._next_step(body)
        number = next(self._ids)
        headers = {"x-request-id": f"req_fake_{number}"}
        if isinstance(step, FakeReply):
            return await self._reply(request, step, bool(body.get("stream")), number, headers)
        if step.kind in ("status", "redirect"):
            payload = step.body if step.body is not None else _error("fault", "fault")
            text = payload if isinstance(payload, str) else json.dumps(payload)
            return web.Response(
                status=step.status,
                text=text,
                headers={**headers, **step.headers},
                content_type="application/json",
            )
        return await self._misbehave(request, step, bool(body.get("stream")), number, headers)

    async def _reply(
        self,
        request: web.Request,
        reply: FakeReply,
        stream: bool,
        number: int,
        headers: dict[str, str],
        *,
        complete: bool = True,
    ) -> web.StreamResponse:
        from aiohttp import web

        anthropic = request.path.endswith("/messages")
        ident = f"msg_fake{number}" if anthropic else f"chatcmpl-fake{number}"
        call_ids = [c.id or f"call_fake_{number}_{i}" for i, c in enumerate(reply.tool_calls)]
        if not stream:
            await self._pause(reply.chunk_delay)
            build = anthropic_body if anthropic else completion_body
            text = json.dumps(build(reply, self.model, ident, call_ids))
            if not complete:
                text = text[: len(text) // 2]
            return web.Response(text=text, content_type="application/json", headers=headers)
        response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream"})
        await response.prepare(request)
        events = anthropic_events if anthropic else stream_chunks
        chunks = events(reply, self.model, ident, call_ids)
        if not complete:
            chunks = chunks[: max(1, len(chunks) // 2)]
        elif anthropic:
            chunks.append(_sse("message_stop", {"type": "message_stop"}))
        else:
            chunks.append(b"data: [DONE]\n\n")
        for chunk in chunks:
            await response.write(chunk)
            await self._pause(reply.chunk_delay)
        await response.write_eof()
        return response

    async def _misbehave(
        self,
        request: web.Request,
        fault: Fault,
        stream: bool,
        number: int,
        headers: dict[str, str],
    ) -> web.StreamResponse:
        from aiohttp import web

        if fault.kind == "truncate":
            assert fault.reply is not None
            return await self._reply(request, fault.reply, stream, number, headers, complete=False)
        if fault.kind == "malformed":
            if stream:
                response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
                await response.prepare(request)
                await response.write(b'data: {"choices": [\n\ndata: [DONE]\n\n')
                await response.write_eof()
                return response
            return web.Response(text='{"choices": [', content_type="application/json")
        if fault.kind == "hang":
            await self._pause(fault.seconds)
        transport = request.transport
        if transport is not None:
            transport.abort()
        raise ConnectionResetError("fake server dropped the connection")

    async def _pause(self, seconds: float) -> None:
        if seconds <= 0:
            return
        try:
            await asyncio.wait_for(self._closing.wait(), timeout=seconds)
        except TimeoutError:
            pass
