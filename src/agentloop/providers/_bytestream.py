"""A reply read as raw bytes, for wires that are not SSE (AWS event streams, SPEC 24).

``HttpTransport.stream_sse`` decodes SSE; Bedrock's ``ConverseStream`` answers with binary
``application/vnd.amazon.eventstream`` frames that botocore's decoder reads. ``ByteStream`` sends
the request through the same transport (so the status table, limits, redirects and redaction
are the ones every adapter gets) and yields the body's chunks as they arrive; a failure while
reading is classified as ``_http`` classifies it (phase ``read``, ``request_sent`` True).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloop.errors import ProviderError
from agentloop.providers._classify import read_request_id
from agentloop.providers._http import HttpTransport, _foreign_errors, _lower_headers

__all__ = ["ByteStream"]


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

    async def __aenter__(self) -> ByteStream:
        url, payload, headers, accept = self._request
        self._response = await self._transport._open(url, payload, headers, accept)
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
