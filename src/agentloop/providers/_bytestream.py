"""A reply read as raw bytes, for wires that are not SSE (AWS event streams, SPEC 24).

``HttpTransport.stream_sse`` decodes SSE; Bedrock's ``ConverseStream`` answers with binary
``application/vnd.amazon.eventstream`` frames that botocore's decoder reads. ``ByteStream`` sends
the request through the same transport (so the status table, limits, redirects and redaction
are the ones every adapter gets) and yields the body's chunks as they arrive; a failure while
reading is classified as ``_http`` classifies it (phase ``read``, ``request_sent`` True).

``EventStream`` decodes that body into AWS event-stream messages (botocore's
``EventStreamBuffer``) and ``event_stream`` opens one: the one place such a stream is asked of an
active cassette (``_tape.TAPE``), which records or replays it message by message. With no
cassette the cost is one ``ContextVar.get``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import ProviderError
from agentloop.providers._classify import read_request_id
from agentloop.providers._http import HttpTransport
from agentloop.providers._http_errors import foreign_errors as _foreign_errors
from agentloop.providers._http_errors import lower_headers as _lower_headers
from agentloop.providers._tape import TAPE

__all__ = ["ByteStream", "EventMessage", "EventStream", "event_stream"]


class ByteStream:
    """``async with ByteStream(...) as body: async for chunk in body``; status checked on entry."""

    def __init__(
        self,
        transport: HttpTransport,
        url: str,
        payload: bytes,
        headers: Mapping[str, str],
        accept: str,
    ) -> None:
        self._transport = transport
        self._request: tuple[str, bytes, Mapping[str, str], str] = (url, payload, headers, accept)
        self._response: Any = None  # an aiohttp.ClientResponse (only _http names aiohttp)
        self._eof = False
        self.headers: Mapping[str, str] = {}
        self.request_id: str | None = None
        self.status: int | None = None

    async def __aenter__(self) -> ByteStream:
        url, payload, headers, accept = self._request
        self._response = await self._transport._open(url, payload, headers, accept)
        self.status = self._response.status
        self.headers = _lower_headers(self._response)
        self.request_id = read_request_id(self.headers, self._transport.secrets)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._response is not None:
            if exc_info[1] is None and self._eof:
                self._response.release()  # the body is complete: the connection is reusable
            else:
                self._response.close()

    def __aiter__(self) -> ByteStream:
        return self

    async def __anext__(self) -> bytes:
        if self._response is None:
            raise RuntimeError("ByteStream must be entered with 'async with' before iterating")
        if self._eof:
            raise StopAsyncIteration
        try:
            chunk: bytes = await self._response.content.readany()
        except _foreign_errors() as exc:
            error: Any = self._transport._translate(exc, "read")
            if isinstance(error, ProviderError):
                error.request_id = self.request_id
            raise error from exc
        if not chunk:
            self._eof = True
            raise StopAsyncIteration
        return chunk


@record
class EventMessage:
    """One decoded AWS event-stream message: its headers (``:event-type``...) and payload."""

    headers: Mapping[str, Any]
    payload: bytes


class EventStream:
    """``async with`` it, then ``async for`` its ``EventMessage``s; status checked on entry.

    A malformed frame raises botocore's ``ParserError`` from ``__anext__`` (the adapter names
    it); a body that ends inside a frame simply ends (the adapter sees no final event).
    """

    def __init__(
        self,
        transport: HttpTransport,
        url: str,
        payload: bytes,
        headers: Mapping[str, str],
        accept: str,
    ) -> None:
        self._transport = transport
        self._body = ByteStream(transport, url, payload, headers, accept)
        self._frames: Any = None  # botocore's EventStreamBuffer, made on entry
        self._pending: list[EventMessage] = []
        self.headers: Mapping[str, str] = {}
        self.request_id: str | None = None
        self.status: int | None = None

    async def __aenter__(self) -> EventStream:
        from botocore.eventstream import EventStreamBuffer

        await self._body.__aenter__()
        self._frames = EventStreamBuffer()
        self.status, self.headers = self._body.status, self._body.headers
        self.request_id = self._body.request_id
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._body.__aexit__(*exc_info)

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> EventMessage:
        while not self._pending:
            chunk = await self._body.__anext__()  # StopAsyncIteration at the body's end
            self._frames.add_data(chunk)
            decoded = [EventMessage(dict(m.headers), bytes(m.payload)) for m in self._frames]
            self._pending.extend(reversed(decoded))
        return self._pending.pop()


def event_stream(
    transport: HttpTransport,
    url: str,
    payload: bytes,
    headers: Mapping[str, str],
    accept: str,
) -> EventStream:
    """POST ``payload`` and decode the reply's AWS event-stream messages (a cassette's, if any)."""
    tape = TAPE.get()
    if tape is not None:  # agentloop.cassettes: replay, or send and record
        return tape.stream_events(transport, url, payload, headers, accept)  # type: ignore[no-any-return]
    return EventStream(transport, url, payload, headers, accept)
