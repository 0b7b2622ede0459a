"""The one hook a cassette hangs on the HTTP layer: a context variable ``_http`` reads per request.

``agentloop.cassettes.use_cassette`` sets ``TAPE`` for the block (the task that entered it and
the tasks it creates, as asyncio copies the context); ``HttpTransport.post_json`` and
``stream_sse``, ``_http_calls.call`` (a transport's other calls: the batch APIs' uploads, status
reads and downloads) and ``_bytestream.event_stream`` (AWS event streams: Bedrock's
``ConverseStream``), hand the request to it instead of sending it themselves. With no cassette
active the cost is one ``ContextVar.get`` per request, and nothing of the cassettes is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Protocol

__all__ = ["TAPE", "Tape"]


class Tape(Protocol):
    """What ``HttpTransport`` asks of an active cassette.

    Typed loosely: ``_http`` imports this module, so this one cannot name its classes without
    an import circle. ``transport`` is the ``HttpTransport``; the answers are an
    ``HttpResponse``, an ``SSEStream`` and a ``_bytestream.EventStream``.
    """

    async def post_json(
        self,
        transport: Any,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
    ) -> Any:
        """Answer (replay) or send and keep (record) one JSON request."""
        ...

    def stream_sse(
        self,
        transport: Any,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
    ) -> Any:
        """An SSE stream that replays recorded events, or records the real one's."""
        ...

    async def call(
        self,
        transport: Any,
        method: str,
        url: str,
        payload: Mapping[str, Any] | None,
        form: Any,
        limit: int | None,
    ) -> Any:
        """Answer (replay) or send and keep (record) another API call (``_http_calls``)."""
        ...

    def stream_events(
        self,
        transport: Any,
        url: str,
        payload: bytes,
        headers: Mapping[str, str],
        accept: str,
    ) -> Any:
        """An AWS event stream that replays recorded messages, or records the real one's."""
        ...


TAPE: ContextVar[Tape | None] = ContextVar("agentloop_cassette", default=None)
