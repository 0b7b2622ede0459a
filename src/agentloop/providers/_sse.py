"""A pure Server-Sent Events decoder: bytes in, events out, no I/O.

Every streaming provider (OpenAI-compatible, Anthropic, Gemini) speaks SSE; they share this one
decoder so line endings, comments and split chunks are handled once and unit-tested without
sockets (the transport in ``_http.py`` drives it).

API (stable; other provider modules depend on it)::

    decoder = SSEDecoder(max_line=MAX_SSE_LINE)
    for event in decoder.feed(chunk):   # any split of the byte stream gives the same events
        event.event, event.data, event.id, event.retry
    for event in decoder.close():       # at end of stream: flushes a final unterminated event
        ...

- Lines end with CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of the next
  are one line ending).
- ``data`` fields of one event are joined with a newline; a line starting with ``:`` is a comment;
  one space after the colon is stripped; a line without a colon is a field with an empty value.
- An event is dispatched at a blank line when any of its fields was seen (so ``event: ping``
  without data still arrives, as the Anthropic and OpenAI SDK decoders do); ``event`` defaults
  to ``"message"``. ``id`` is the last event id seen (it persists across events, as in the
  WHATWG spec); ``retry`` is set only on the event that carried a valid integer ``retry`` field
  (at most 18 digits; a longer one is ignored like any invalid value).
- A line longer than ``max_line`` bytes (1 MiB by default) raises ``ResponseInvalid``
  (``phase="body"``, ``request_sent=True``): the decoder never buffers without bound.
- Bytes are decoded as UTF-8 per line; invalid sequences are replaced, never raised.
"""

from __future__ import annotations

import re

from agentloop._util.slots import record
from agentloop.errors import FailurePhase, ResponseInvalid

__all__ = ["MAX_SSE_LINE", "SSEDecoder", "SSEEvent"]

MAX_SSE_LINE = 1024 * 1024
"""The longest SSE line accepted, in bytes (1 MiB)."""

_EOL = re.compile(rb"\r\n|\r|\n")


@record(frozen=False)
class SSEEvent:
    """One dispatched SSE event.

    Not frozen: a frozen record costs a call per field to build, and a stream makes one per
    chunk; nothing keeps or changes it past the adapter's read.
    """

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Incremental SSE decoder; feed it bytes in any chunking."""

    def __init__(self, *, max_line: int = MAX_SSE_LINE) -> None:
        self._max_line = max_line
        self._buffer = bytearray()
        self._skip_lf = False
        self._event: str | None = None
        self._data: list[str] = []
        self._seen = False
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode ``chunk`` and return the events it completed (possibly none)."""
        if not chunk:
            return []
        buffer = self._buffer
        buffer += chunk
        start = 0
        if self._skip_lf:
            self._skip_lf = False
            if buffer[:1] == b"\n":
                start = 1
        events: list[SSEEvent] = []
        if buffer.find(b"\r", start) == -1:  # the common case: LF only, no regex per line
            start = self._feed_lf(start, events)
        else:
            start = self._feed_any(start, events)
        del buffer[:start]
        self._check_length(len(buffer))
        return events

    def _feed_lf(self, start: int, events: list[SSEEvent]) -> int:
        """Process the complete lines of a buffer with no CR; returns where the rest begins."""
        end = self._buffer.rfind(b"\n")
        if end < start:
            return start
        checked = end - start <= self._max_line  # then no line in it can be too long
        data = self._data
        for raw in bytes(self._buffer[start:end]).split(b"\n"):
            if not checked:
                self._check_length(len(raw))
            if raw[:6] == b"data: ":  # the common line, as _line takes it, without its call
                data.append(raw[6:].decode("utf-8", errors="replace"))
                self._seen = True
                continue
            event = self._line(raw)
            if event is not None:
                events.append(event)
        return end + 1

    def _feed_any(self, start: int, events: list[SSEEvent]) -> int:
        """Process the complete lines ending in CRLF, CR or LF; returns where the rest begins."""
        buffer = self._buffer
        while (match := _EOL.search(buffer, start)) is not None:
            self._check_length(match.start() - start)
            event = self._line(bytes(buffer[start : match.start()]))
            if event is not None:
                events.append(event)
            start = match.end()
            if match.group() == b"\r" and start == len(buffer):
                self._skip_lf = True
        return start

    def close(self) -> list[SSEEvent]:
        """End of stream: process an unterminated last line and flush a pending event."""
        events: list[SSEEvent] = []
        if self._buffer:
            event = self._line(bytes(self._buffer))
            self._buffer.clear()
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        return events

    def _check_length(self, length: int) -> None:
        if length > self._max_line:
            raise ResponseInvalid(
                f"SSE line exceeds the {self._max_line}-byte limit",
                phase=FailurePhase.BODY,
                request_sent=True,
            )

    def _line(self, raw: bytes) -> SSEEvent | None:
        """Process one line (without its terminator); a blank line dispatches."""
        if not raw:
            return self._dispatch()
        if raw.startswith(b"data: "):  # the common field, as _field("data", ...) would take it
            self._data.append(raw[6:].decode("utf-8", errors="replace"))
            self._seen = True
            return None
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        self._field(name, value)
        return None

    def _field(self, name: str, value: str) -> None:
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" in value:
                return
            self._last_id = value
        elif name == "retry":
            if not (value.isascii() and value.isdigit()) or len(value) > 18:
                return  # too long for int() (4300 digits) and for any sane delay
            self._retry = int(value)
        else:
            return
        self._seen = True

    def _dispatch(self) -> SSEEvent | None:
        if not self._seen:
            return None
        data = self._data
        text = data[0] if len(data) == 1 else "\n".join(data)
        event = SSEEvent(self._event or "message", text, self._last_id, self._retry)  # positional
        data.clear()  # the list is never handed out: kept for the next event
        self._event = None
        self._retry = None
        self._seen = False
        return event
