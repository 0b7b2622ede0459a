"""``SSEStream``: an open Server-Sent Events reply of ``HttpTransport.stream_sse``, read as events.

Apart from ``_http`` for room; the transport's own pieces (``_sending``, ``_refuse``,
``_translate``) send the request and map its failures, so they exist once. Entering writes
``HttpTransport._open``'s lines out and each event reads the body itself: while a stream waits
for its reply or its next bytes, no coroutine of ours sits between the adapter and aiohttp.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from agentloop.errors import ProviderError, ResponseInvalid
from agentloop.providers._classify import read_request_id
from agentloop.providers._http_errors import foreign_errors, lower_headers
from agentloop.providers._sse import SSEDecoder, SSEEvent

if TYPE_CHECKING:
    import aiohttp

    from agentloop.errors import AgentLoopError

__all__ = ["SSEStream"]


class _Transport(Protocol):
    """What a stream uses of its ``HttpTransport`` (which imports this module)."""

    provider: str
    max_line: int

    @property
    def secrets(self) -> tuple[str, ...]: ...

    def _sending(
        self,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
        accept: str,
    ) -> Awaitable[aiohttp.ClientResponse]: ...

    async def _refuse(self, response: aiohttp.ClientResponse, url: str) -> NoReturn: ...

    def _translate(self, exc: BaseException, stage: str) -> AgentLoopError: ...


class SSEStream:
    """An open SSE response: ``async with`` it, then ``async for`` its ``SSEEvent``s.

    Entering sends the request and checks the status (raising the classified error); leaving
    releases the connection. ``request_id`` and ``headers`` are set once entered.
    """

    def __init__(
        self,
        transport: _Transport,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
    ) -> None:
        self._transport = transport
        self._url = url
        self._payload = payload
        self._extra = headers
        self._response: aiohttp.ClientResponse | None = None
        self._eof = False
        self.headers: Mapping[str, str] = {}
        self.request_id: str | None = None
        self.status: int | None = None

    async def __aenter__(self) -> SSEStream:
        transport, url = self._transport, self._url
        try:  # ``HttpTransport._open``'s lines, without its coroutine
            response = await transport._sending(
                url, self._payload, self._extra, "text/event-stream"
            )
        except foreign_errors() as exc:
            raise transport._translate(exc, "send") from exc
        if not 200 <= response.status < 300:
            await transport._refuse(response, url)
        self._response = response
        self._decoder = SSEDecoder(max_line=transport.max_line)  # made once the reply has come
        self._pending: list[SSEEvent] = []
        self.status = response.status
        self.headers = lower_headers(response)
        self.request_id = read_request_id(self.headers, transport.secrets)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._response is not None:
            if exc_info[1] is None and (self._eof or self._response.content.is_eof()):
                self._response.release()  # the body is complete: the connection is reusable
            else:
                self._response.close()

    def __aiter__(self) -> SSEStream:
        return self

    async def __anext__(self) -> SSEEvent:
        if self._response is None:
            raise RuntimeError("SSEStream must be entered with 'async with' before iterating")
        while not self._pending:
            if self._eof:
                raise StopAsyncIteration
            try:
                chunk = await self._response.content.readany()
            except foreign_errors() as exc:
                error = self._transport._translate(exc, "read")
                if isinstance(error, ProviderError):
                    error.request_id = self.request_id
                raise error from exc
            try:
                events = self._decoder.feed(chunk) if chunk else self._decoder.close()
            except ResponseInvalid as error:
                error.provider = self._transport.provider
                error.request_id = self.request_id
                raise
            self._eof = not chunk
            self._pending.extend(reversed(events))
        return self._pending.pop()
