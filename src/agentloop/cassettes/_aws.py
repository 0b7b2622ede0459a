"""A cassette's AWS event streams: Bedrock's ``ConverseStream`` kept one decoded message per item.

``providers._bytestream.event_stream`` asks the active cassette for the stream; these are its
two answers. Recording passes the real stream's messages through and keeps each as
``{headers, payload}`` (the payload parsed JSON, or ``payload_text`` when it is not JSON; known
secrets replaced), under the exchange's ``events:``. Replaying opens no socket and hands back
the same messages in the same order, so the adapter decodes the same events in the same pieces.
A stream refused at its status is kept as the refusal (status and body) and replays as the same
hard error, as a refused JSON request does.
The request (path and body) is stored as every other one: no header, so no SigV4 signature,
credential scope or session token, ever.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.cassettes._format import kept_headers, scrub_known
from agentloop.errors import ProviderError
from agentloop.providers._bytestream import EventMessage, EventStream
from agentloop.providers._classify import read_request_id

if TYPE_CHECKING:
    from agentloop.cassettes import Cassette

__all__ = ["RecordingEvents", "ReplayEvents", "message_item"]


def message_item(message: EventMessage, secrets: tuple[str, ...]) -> dict[str, Any]:
    """One message as the cassette keeps it: its headers and its (parsed) payload."""
    headers = {
        str(k): v if isinstance(v, str | int | float | bool) else str(v)
        for k, v in message.headers.items()
    }
    text = scrub_known(message.payload.decode("utf-8", errors="replace"), secrets)
    try:
        return {"headers": headers, "payload": json.loads(text)}
    except ValueError:
        return {"headers": headers, "payload_text": text}


def _message(item: Mapping[str, Any]) -> EventMessage:
    headers = dict(item.get("headers") or {})
    if "payload" in item:
        payload = json.dumps(item["payload"], ensure_ascii=False, separators=(",", ":"))
    else:
        payload = str(item.get("payload_text", ""))
    return EventMessage(headers, payload.encode())


class RecordingEvents(EventStream):
    """The real event stream, each message kept as it passes (saved with the exchange on exit)."""

    def __init__(self, cassette: Cassette, request: dict[str, Any], *args: Any) -> None:
        super().__init__(*args)
        self._cassette = cassette
        self._request = request
        self._items: list[dict[str, Any]] = []

    async def __aenter__(self) -> EventStream:
        secrets = self._cassette._secrets(self._transport)
        try:
            await super().__aenter__()
        except ProviderError as error:  # refused at its status: kept, replayed as this error
            from agentloop.cassettes import _keep_refusal

            _keep_refusal(self._cassette, self._request, error, secrets)
            raise
        kept = {
            "status": self.status,
            "headers": kept_headers(self.headers, secrets),
            "events": self._items,
        }
        self._cassette._keep(self._request, kept)
        return self

    async def __anext__(self) -> EventMessage:
        message = await super().__anext__()
        self._items.append(message_item(message, self._cassette._secrets(self._transport)))
        return message


class ReplayEvents(EventStream):
    """A recorded event stream, replayed message by message; no socket is opened."""

    def __init__(self, cassette: Cassette, request: dict[str, Any], *args: Any) -> None:
        super().__init__(*args)
        self._cassette = cassette
        self._request = request
        self._queue: list[EventMessage] = []

    async def __aenter__(self) -> EventStream:
        response = self._cassette._take(self._request)["response"]
        self.status = int(response.get("status", 200))
        self.headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        if self.status >= 400:
            from agentloop.cassettes import _raise_refusal

            body = response.get("body")
            text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            _raise_refusal(self.status, self.headers, text, self._transport, self._body._request[0])
        self.request_id = read_request_id(self.headers, self._transport.secrets)
        self._queue = [_message(item) for item in reversed(response.get("events") or [])]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def __anext__(self) -> EventMessage:
        if not self._queue:
            raise StopAsyncIteration
        return self._queue.pop()
