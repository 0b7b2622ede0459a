"""HttpTransport against real local servers: every failure phase, limits, redaction."""

from __future__ import annotations

import asyncio
import email.utils
import json
import pickle
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from agentloop.errors import (
    AuthError,
    BadRequestError,
    ConfigurationError,
    ContextLengthExceeded,
    FailurePhase,
    InsufficientCredits,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    ProviderUnreachable,
    RateLimited,
    ResponseInvalid,
    UnexpectedRedirect,
)
from agentloop.providers._http import (
    HttpTransport,
    classify_exception,
    should_retry_hint,
)

from .conftest import closed_port, read_request, serve_app, serve_raw

KEY = "sk-test-SECRETKEY-0123456789"


@pytest.fixture
async def transport() -> AsyncIterator[HttpTransport]:
    t = HttpTransport(
        provider="openai",
        timeout=0.3,
        connect_timeout=0.3,
        headers={"Authorization": f"Bearer {KEY}"},
    )
    yield t
    await t.aclose()


def json_app(status: int, body: object, headers: dict[str, str] | None = None) -> web.Application:
    async def handler(request: web.Request) -> web.Response:
        text = body if isinstance(body, str) else json.dumps(body)
        return web.Response(status=status, text=text, headers=headers)

    app = web.Application()
    app.router.add_post("/v1/x", handler)
    return app


async def failure(transport: HttpTransport, url: str) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await transport.post_json(url, {"q": 1})
    return info.value


def assert_shape(err: ProviderError, cls: type, phase: FailurePhase, sent: bool | None) -> None:
    assert type(err) is cls, repr(err)
    assert err.phase is phase
    assert err.request_sent is sent
    assert err.provider == "openai"


async def test_json_round_trip_and_request_id(transport: HttpTransport) -> None:
    seen: list[dict[str, object]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(await request.json())
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        return web.json_response({"ok": True}, headers={"request-id": "req_1"})

    app = web.Application()
    app.router.add_post("/v1/x", handler)
    async with serve_app(app) as base:
        reply = await transport.post_json(f"{base}/v1/x", {"q": 1})
        again = await transport.post_json(f"{base}/v1/x", b'{"q": 2}')
    assert reply.data == {"ok": True} and reply.request_id == "req_1" and reply.status == 200
    assert again.data == {"ok": True}
    assert seen == [{"q": 1}, {"q": 2}]


STATUS_CASES = [
    (400, {"error": {"message": "bad", "type": "invalid_request_error"}}, BadRequestError),
    (
        400,
        {"error": {"message": "too long", "code": "context_length_exceeded"}},
        ContextLengthExceeded,
    ),
    (
        400,
        {"type": "error", "error": {"message": "prompt is too long: 9 > 8"}},
        ContextLengthExceeded,
    ),
    (401, {"error": {"message": "Incorrect API key"}}, AuthError),
    (403, "forbidden", AuthError),
    (402, {"error": {"code": 402, "message": "Insufficient credits"}}, InsufficientCredits),
    (404, {"error": {"message": "model not found"}}, ModelNotFound),
    (408, "timeout", ProviderTimeout),
    (413, "too large", ContextLengthExceeded),
    (422, "unprocessable", BadRequestError),
    (429, {"error": {"message": "slow down", "type": "requests"}}, RateLimited),
    (429, {"error": {"message": "quota", "type": "insufficient_quota"}}, InsufficientCredits),
    (429, {"error": {"code": "credit_balance_exhausted"}}, InsufficientCredits),
    (500, "boom", ProviderUnavailable),
    (502, "", ProviderUnavailable),
    (503, {"error": {"message": "overloaded"}}, ProviderUnavailable),
    (529, {"type": "error", "error": {"type": "overloaded_error"}}, ProviderUnavailable),
]


@pytest.mark.parametrize(("status", "body", "cls"), STATUS_CASES)
async def test_status_table(transport: HttpTransport, status: int, body: object, cls: type) -> None:
    headers = {"x-request-id": "rid-9"}
    async with serve_app(json_app(status, body, headers)) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert_shape(err, cls, FailurePhase.STATUS, True)
    assert err.status_code == status and err.request_id == "rid-9"
    assert err.body is not None


async def test_error_body_is_capped_at_8_kib(transport: HttpTransport) -> None:
    async with serve_app(json_app(500, "x" * 100_000)) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert err.body is not None and len(err.body) == 8 * 1024


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
async def test_retry_after_delta_forms(
    transport: HttpTransport, headers: dict[str, str], expected: float | None
) -> None:
    async with serve_app(json_app(429, {"error": {"message": "x"}}, headers)) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert err.retry_after == expected


async def test_retry_after_http_date(transport: HttpTransport) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    async with serve_app(json_app(503, "busy", {"Retry-After": when})) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert err.retry_after is not None and 25 <= err.retry_after <= 31


@pytest.mark.parametrize(("value", "hint"), [("false", False), ("true", True), (None, None)])
async def test_x_should_retry_is_exposed(
    transport: HttpTransport, value: str | None, hint: bool | None
) -> None:
    headers = {"x-should-retry": value} if value else {}
    async with serve_app(json_app(500, "x", headers)) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert should_retry_hint(err) is hint


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_redirects_are_never_followed(transport: HttpTransport, status: int) -> None:
    hits: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        hits.append(request.path)
        loc = "https://evil.example.com:8443/steal?key=abc" if request.path == "/v1/x" else "/"
        return web.Response(status=status, headers={"Location": loc})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    async with serve_app(app) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert_shape(err, UnexpectedRedirect, FailurePhase.REDIRECT, True)
    assert err.redirect_host == "evil.example.com"
    assert "steal" not in str(err) and hits == ["/v1/x"]
    assert not err.is_recoverable()


async def test_relative_redirect_names_the_origin_host(transport: HttpTransport) -> None:
    async with serve_app(json_app(302, "", {"Location": "/elsewhere"})) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert err.redirect_host == "127.0.0.1"


async def test_connection_refused(transport: HttpTransport) -> None:
    err = await failure(transport, f"http://127.0.0.1:{closed_port()}/v1/x")
    assert_shape(err, ProviderUnavailable, FailurePhase.CONNECT, False)
    assert err.is_recoverable()


async def test_dns_failure_is_unreachable(transport: HttpTransport) -> None:
    err = await failure(transport, "http://agentloop-test.invalid/v1/x")
    assert_shape(err, ProviderUnreachable, FailurePhase.CONNECT, False)
    assert not err.is_recoverable() and "DNS" in str(err)


async def test_connect_timeout_on_a_full_backlog(transport: HttpTransport) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):  # fill the accept queue so further SYNs are dropped
            filler = socket.socket()
            filler.setblocking(False)
            try:
                filler.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fillers.append(filler)
        await asyncio.sleep(0.05)
        err = await failure(transport, f"http://127.0.0.1:{port}/v1/x")
    finally:
        for sock in [*fillers, listener]:
            sock.close()
    assert_shape(err, ProviderTimeout, FailurePhase.CONNECT, False)


def test_classify_connect_timeout_pure() -> None:
    err = classify_exception(aiohttp.ConnectionTimeoutError("t"), stage="connect", provider="p")
    assert isinstance(err, ProviderTimeout) and err.phase is FailurePhase.CONNECT
    assert err.request_sent is False


async def test_read_timeout_when_server_stalls(transport: HttpTransport) -> None:
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(10)

    async with serve_raw(stall) as base:
        started = time.monotonic()
        err = await failure(transport, f"{base}/v1/x")
    assert_shape(err, ProviderTimeout, FailurePhase.READ, True)
    assert time.monotonic() - started < 2


async def test_reset_before_response_is_send_phase_unknown(transport: HttpTransport) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.transport.abort()

    async with serve_raw(hang_up) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert_shape(err, ProviderUnavailable, FailurePhase.SEND, None)


async def test_reset_mid_body_is_read_phase(transport: HttpTransport) -> None:
    async def partial(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"a":')
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.transport.abort()

    async with serve_raw(partial) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert_shape(err, ProviderUnavailable, FailurePhase.READ, True)


async def test_tls_verification_failure(server_ssl: ssl.SSLContext) -> None:
    t = HttpTransport(provider="openai", timeout=1, connect_timeout=1)
    try:
        async with serve_app(json_app(200, {"ok": 1}), ssl_context=server_ssl) as base:
            err = await failure(t, f"{base}/v1/x")
    finally:
        await t.aclose()
    assert_shape(err, ProviderUnreachable, FailurePhase.TLS, False)


async def test_tls_success_with_custom_ca(
    server_ssl: ssl.SSLContext, client_ssl: ssl.SSLContext
) -> None:
    t = HttpTransport(provider="openai", timeout=1, connect_timeout=1, ssl_context=client_ssl)
    try:
        async with serve_app(json_app(200, {"ok": 1}), ssl_context=server_ssl) as base:
            reply = await t.post_json(f"{base}/v1/x", {})
    finally:
        await t.aclose()
    assert reply.data == {"ok": 1}


@pytest.mark.parametrize(
    "status_line", [b"403 Forbidden", b"407 Proxy Authentication Required"], ids=["403", "407"]
)
async def test_proxy_that_refuses_connect(
    server_ssl: ssl.SSLContext, client_ssl: ssl.SSLContext, status_line: bytes
) -> None:
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 " + status_line + b"\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    async with serve_raw(refuse) as proxy:
        t = HttpTransport(provider="openai", proxy=proxy, ssl_context=client_ssl, timeout=1)
        try:
            err = await failure(t, "https://localhost:9/v1/x")
        finally:
            await t.aclose()
    assert_shape(err, ProviderUnreachable, FailurePhase.PROXY, False)


async def test_proxy_connection_refused() -> None:
    proxy = f"http://user:proxypass1@127.0.0.1:{closed_port()}"
    t = HttpTransport(provider="openai", proxy=proxy, timeout=1, connect_timeout=1)
    try:
        err = await failure(t, "http://localhost:9/v1/x")
    finally:
        await t.aclose()
    assert_shape(err, ProviderUnreachable, FailurePhase.PROXY, False)
    assert "proxypass1" not in str(err)


async def test_body_limit_by_content_length() -> None:
    t = HttpTransport(provider="openai", max_body=1000)
    try:
        async with serve_app(json_app(200, "x" * 5000)) as base:
            err = await failure(t, f"{base}/v1/x")
    finally:
        await t.aclose()
    assert_shape(err, ResponseInvalid, FailurePhase.BODY, True)


async def test_body_limit_while_reading_chunked() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(10):
            await response.write(b"x" * 500)
        return response

    app = web.Application()
    app.router.add_post("/v1/x", handler)
    t = HttpTransport(provider="openai", max_body=1000)
    try:
        async with serve_app(app) as base:
            err = await failure(t, f"{base}/v1/x")
    finally:
        await t.aclose()
    assert_shape(err, ResponseInvalid, FailurePhase.BODY, True)
    assert "too large" in str(err)


async def test_malformed_json_keeps_the_raw_body(transport: HttpTransport) -> None:
    async with serve_app(json_app(200, '{"choices": [', {"x-request-id": "r2"})) as base:
        err = await failure(transport, f"{base}/v1/x")
    assert_shape(err, ResponseInvalid, FailurePhase.BODY, True)
    assert err.body == '{"choices": [' and err.request_id == "r2"


async def test_invalid_url_is_a_configuration_error(transport: HttpTransport) -> None:
    with pytest.raises(ConfigurationError):
        await transport.post_json("not a url", {})


def sse_app(*chunks: bytes, delay: float = 0.0) -> web.Application:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "x-request-id": "sse-1"}
        )
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
            if delay:
                await asyncio.sleep(delay)
        return response

    app = web.Application()
    app.router.add_post("/v1/x", handler)
    return app


async def test_sse_stream_events(transport: HttpTransport) -> None:
    app = sse_app(b"event: a\ndata: 1\n\n", b"data: 2\r\n", b"\r\n", b"data: [DONE]\n\n")
    async with serve_app(app) as base, transport.stream_sse(f"{base}/v1/x", {}) as stream:
        assert stream.request_id == "sse-1" and stream.status == 200
        events = [(e.event, e.data) async for e in stream]
    assert events == [("a", "1"), ("message", "2"), ("message", "[DONE]")]


async def test_sse_slow_but_steady_stream_does_not_time_out(transport: HttpTransport) -> None:
    app = sse_app(*[b"data: x\n\n"] * 5, delay=0.15)  # 0.75 s total, gaps under 0.3 s
    async with serve_app(app) as base, transport.stream_sse(f"{base}/v1/x", {}) as stream:
        events = [e async for e in stream]
    assert len(events) == 5


async def test_sse_status_error_on_entry(transport: HttpTransport) -> None:
    async with serve_app(json_app(401, {"error": {"message": "no"}})) as base:
        with pytest.raises(AuthError):
            async with transport.stream_sse(f"{base}/v1/x", {}):
                pass


async def test_sse_line_limit_through_the_stream() -> None:
    t = HttpTransport(provider="openai", max_line=100)
    try:
        async with serve_app(sse_app(b"data: " + b"y" * 500 + b"\n\n")) as base:
            with pytest.raises(ResponseInvalid) as info:
                async with t.stream_sse(f"{base}/v1/x", {}) as stream:
                    async for _ in stream:
                        pass
    finally:
        await t.aclose()
    assert info.value.provider == "openai" and info.value.request_id == "sse-1"


async def test_sse_idle_gap_timeout(transport: HttpTransport) -> None:
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n")
        await writer.drain()
        await asyncio.sleep(10)

    async with serve_raw(stall) as base:
        with pytest.raises(ProviderTimeout) as info:
            async with transport.stream_sse(f"{base}/v1/x", {}) as stream:
                async for _ in stream:
                    pass
    assert_shape(info.value, ProviderTimeout, FailurePhase.READ, True)


async def test_sse_reset_mid_stream(transport: HttpTransport) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n"
        )
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.transport.abort()

    received: list[str] = []
    async with serve_raw(cut) as base:
        with pytest.raises(ProviderUnavailable) as info:
            async with transport.stream_sse(f"{base}/v1/x", {}) as stream:
                async for event in stream:
                    received.append(event.data)
    assert_shape(info.value, ProviderUnavailable, FailurePhase.READ, True)
    assert received == ["1"]


async def test_iterating_without_entering_is_a_programming_error(
    transport: HttpTransport,
) -> None:
    with pytest.raises(RuntimeError):
        await transport.stream_sse("http://127.0.0.1:1/", {}).__anext__()


async def test_the_key_never_leaks(transport: HttpTransport) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}. Bearer {KEY}"}}
    async with serve_app(json_app(401, echo)) as base:
        err = await failure(transport, f"{base}/v1/x?key={KEY}")
    texts = [str(err), repr(err), err.body or "", str(err.attributes()), str(err.attempt_log)]
    restored = pickle.loads(pickle.dumps(err))
    texts += [str(restored), repr(restored), restored.body or ""]
    for text in texts:
        assert KEY not in text and "SECRETKEY" not in text
    assert "[REDACTED]" in str(err)


async def test_the_key_never_leaks_from_transport_errors() -> None:
    secret = "custom-secret-value-42"
    t = HttpTransport(provider="openai", headers={"x-api-key": secret}, connect_timeout=0.3)
    try:
        err = await failure(t, f"http://127.0.0.1:{closed_port()}/v1/x?key={secret}")
    finally:
        await t.aclose()
    assert secret not in str(err) and secret not in repr(err)
    assert secret not in repr(t)


def test_import_agentloop_does_not_import_aiohttp() -> None:
    code = "import sys, agentloop, agentloop.providers._http; print('aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
