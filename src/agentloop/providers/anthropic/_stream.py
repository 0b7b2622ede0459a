"""Decoding an Anthropic Messages API SSE stream, event by event, without I/O.

``AnthropicStreamState`` is the pure accumulator: ``feed`` it events, get ``StreamEvent``s;
``done`` comes only after ``message_stop``. The block rules are ``_reply``'s (the JSON
path's), applied as blocks open, grow and close:

- ``text_delta`` -> ``text_delta`` events; ``thinking_delta`` -> ``thinking_delta`` events (never
  answer text); ``signature_delta`` adds to the open thinking block's signature, which must be
  there when the block closes (else ``ResponseInvalid``); ``input_json_delta`` ->
  ``tool_call_delta`` events, the joined text decoded when the block closes.
- Blocks the API never closed before ``message_stop`` are finished there: a reply cut at the
  output limit (the recorded ``incomplete_partial_json_response``) stops inside a ``tool_use``
  block, which is kept with ``{INVALID_JSON_KEY: <raw>}`` so the engine can answer it with the
  cut-off soft text; an unsigned thinking block left open by a cut is dropped (it cannot be sent
  back; the cut itself is reported through ``stop_reason``).
- Server tools (SPEC 24): a ``server_tool_use`` block's input grows by ``input_json_delta``
  (no ``tool_call_delta``: the provider runs it); a ``*_tool_result`` block comes whole in its
  start event; ``citations_delta`` adds to the open text block's citations. Each closes into
  the part the JSON path makes of the same block.
- ``stop_reason="refusal"`` raises ``ModelRefused`` at ``message_stop`` with the text streamed
  before it; an ``error`` event raises the ``ProviderError`` its type names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloop.errors import FailurePhase, ModelRefused
from agentloop.messages import Message, Part, ProviderPart, TextPart, ToolCallPart, Usage
from agentloop.model import INVALID_JSON_KEY, ModelResponse, StreamEvent
from agentloop.providers._sse import SSEEvent
from agentloop.providers._wire import (
    WireError,
    as_index,
    as_object,
    loads,
    nonempty_str,
    opt_object,
    opt_str,
    wrong,
)
from agentloop.providers.anthropic import _server_tools as server
from agentloop.providers.anthropic._reply import (
    PROVIDER,
    REFUSAL,
    TRUNCATION_REASONS,
    dropped_blocks,
    error_from_body,
    invalid_reply,
    redacted_part,
    skipped,
    thinking_part,
    usage_from,
)

__all__ = ["AnthropicStreamState"]


@dataclass
class _Lane:
    """One open content block of a stream (``text`` is a text, thinking or tool-input buffer)."""

    kind: str
    text: str = ""
    call_id: str = ""
    name: str = ""
    signature: str = ""
    initial: Mapping[str, Any] | None = None
    cites: list[Any] = field(default_factory=list)


@dataclass
class AnthropicStreamState:
    """Pure accumulator of one Messages API SSE stream: ``feed`` events, get ``StreamEvent``s."""

    request_id: str | None = None
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    finished: bool = False
    count: int = 0
    dropped: tuple[Mapping[str, Any], ...] = ()
    """The blocks ``drop_block`` dropped (``input_transformations`` of ``message_start``)."""
    _open: dict[int, _Lane] = field(default_factory=dict)
    _closed: dict[int, Part] = field(default_factory=dict)
    _bad_input: tuple[str, str] | None = None
    """Name and raw input of a tool call whose input is not a JSON object (kept until the stop
    reason says whether the reply was cut)."""

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Apply one SSE event; returns what to yield (``done`` after ``message_stop``)."""
        if self.finished or event.event == "ping":
            return []
        self.count += 1
        try:
            data = as_object(loads(event.data, "stream event") if event.data else {}, "event")
            handler = _HANDLERS.get(opt_str(data.get("type"), "type") or event.event)
            return handler(self, data) if handler is not None else []
        except WireError as exc:
            raise invalid_reply(
                f"malformed stream event ({exc})", event.data, self.request_id
            ) from exc

    def _start(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        message = opt_object(data.get("message"), "message")
        self.model = opt_str(message.get("model"), "message.model") or ""
        self.request_id = self.request_id or opt_str(message.get("id"), "message.id")
        self.usage = usage_from(message.get("usage"), None, "message.usage")
        self.dropped = dropped_blocks(message)
        return []

    def _block_start(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        index = as_index(data.get("index"), "index")
        if index is None:
            raise wrong("index", "a non-negative integer", None)
        block = opt_object(data.get("content_block"), "content_block")
        lane = _Lane(kind=opt_str(block.get("type"), "content_block.type") or "")
        self._open[index] = lane
        if lane.kind == "tool_use":
            lane.call_id = nonempty_str(block.get("id"), "content_block.id")
            lane.name = nonempty_str(block.get("name"), "content_block.name")
            initial = opt_object(block.get("input"), "content_block.input")
            lane.initial = initial or None
            return [StreamEvent("tool_call_delta", index=index, call_id=lane.call_id,
                                name=lane.name)]  # fmt: skip
        if lane.kind == "thinking":
            lane.signature = opt_str(block.get("signature"), "content_block.signature") or ""
            text = opt_str(block.get("thinking"), "content_block.thinking")
            return self._append(index, lane, {"type": "thinking_delta", "thinking": text})
        if lane.kind == "redacted_thinking":
            lane.signature = opt_str(block.get("data"), "content_block.data") or ""
            return []
        if lane.kind == "compaction":  # kept as it came, its deltas added (SPEC 28)
            lane.initial = block
            return []
        if server.is_server_block(lane.kind):
            lane.initial = block
            return []
        lane.cites = list(block.get("citations") or ())
        text = opt_str(block.get("text"), "content_block.text")
        if lane.kind == "text" and text:
            return self._append(index, lane, {"type": "text_delta", "text": text})
        return []

    def _block_delta(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        index = as_index(data.get("index"), "index")
        delta = opt_object(data.get("delta"), "delta")
        lane = self._open.get(index) if index is not None else None
        if lane is None or index is None:
            return []
        return self._append(index, lane, delta)

    def _append(self, index: int, lane: _Lane, delta: Mapping[str, Any]) -> list[StreamEvent]:
        kind = delta.get("type")
        if kind == "text_delta" and lane.kind == "text":
            piece = opt_str(delta.get("text"), "delta.text") or ""
            lane.text += piece
            return [StreamEvent("text_delta", text=piece)] if piece else []
        if kind == "citations_delta" and lane.kind == "text":
            lane.cites.append(delta.get("citation"))
            return []
        if kind == "input_json_delta" and lane.kind == "server_tool_use":
            lane.text += opt_str(delta.get("partial_json"), "delta.partial_json") or ""
            return []
        if kind == "input_json_delta" and lane.kind == "tool_use":
            piece = opt_str(delta.get("partial_json"), "delta.partial_json") or ""
            lane.text += piece
            return [StreamEvent("tool_call_delta", index=index, call_id=lane.call_id,
                                name=lane.name, arguments=piece)]  # fmt: skip
        if kind == "thinking_delta" and lane.kind == "thinking":
            piece = opt_str(delta.get("thinking"), "delta.thinking") or ""
            lane.text += piece
            return [StreamEvent("thinking_delta", text=piece)] if piece else []
        if kind == "signature_delta" and lane.kind == "thinking":
            lane.signature += opt_str(delta.get("signature"), "delta.signature") or ""
        if kind == "compaction_delta" and lane.kind == "compaction":
            lane.text += opt_str(delta.get("content"), "delta.content") or ""
            encrypted = opt_str(delta.get("encrypted_content"), "delta.encrypted_content")
            lane.signature += encrypted or ""
        return []

    def _block_stop(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        index = as_index(data.get("index"), "index")
        lane = self._open.pop(index, None) if index is not None else None
        if lane is not None and index is not None:
            self._close(index, lane, at_end=False)
        return []

    def _close(self, index: int, lane: _Lane, *, at_end: bool) -> None:
        """Keep the part a finished block makes (``at_end``: finished by ``message_stop``)."""
        where = f"content block {index}"
        if lane.kind == "text":
            if lane.cites:
                self._closed[index] = TextPart(lane.text, citations=server.citations(lane.cites))
            elif lane.text:
                self._closed[index] = TextPart(lane.text)
        elif lane.kind == "tool_use":
            self._closed[index] = self._call(lane)
        elif lane.kind == "thinking":
            if not (at_end and not lane.signature and self.stop_reason in TRUNCATION_REASONS):
                self._closed[index] = thinking_part(lane.text, lane.signature, where)
        elif lane.kind == "redacted_thinking":
            self._closed[index] = redacted_part(lane.signature, where)
        elif lane.kind == "compaction":  # its deltas put together (SPEC 28)
            self._closed[index] = _compaction(lane)
        elif lane.initial is not None and server.is_server_block(lane.kind):
            self._closed[index] = server.decode_server_block(_whole(lane))
        else:
            skipped(lane.kind)

    def _call(self, lane: _Lane) -> ToolCallPart:
        """A tool block as a call; input that is not a JSON object is kept raw for now."""
        if not lane.text.strip():
            return ToolCallPart(lane.call_id, lane.name, dict(lane.initial or {}))
        try:
            arguments = loads(lane.text, "tool input")
        except WireError:
            arguments = None
        if isinstance(arguments, dict):
            return ToolCallPart(lane.call_id, lane.name, arguments)
        self._bad_input = self._bad_input or (lane.name, lane.text)
        return ToolCallPart(lane.call_id, lane.name, {INVALID_JSON_KEY: lane.text})

    def _delta(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        delta = opt_object(data.get("delta"), "delta")
        stop_reason = opt_str(delta.get("stop_reason"), "delta.stop_reason")
        self.stop_reason = stop_reason or self.stop_reason
        self.usage = usage_from(data.get("usage"), self.usage)
        return []

    def _stop(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        self.finished = True
        if self.stop_reason == REFUSAL:
            raise ModelRefused(REFUSAL, self._text_so_far())
        for index in sorted(self._open):
            self._close(index, self._open[index], at_end=True)
        self._open.clear()
        if self._bad_input is not None and self.stop_reason not in TRUNCATION_REASONS:
            name, raw = self._bad_input
            raise invalid_reply(
                f"tool input of {name!r} is not a JSON object", raw, self.request_id
            )
        return [StreamEvent("done", response=self.response())]

    def _text_so_far(self) -> str:
        """The answer text streamed so far, closed blocks and open ones, in block order."""
        texts = {i: p.text for i, p in self._closed.items() if isinstance(p, TextPart)}
        texts.update((i, lane.text) for i, lane in self._open.items() if lane.kind == "text")
        return "".join(texts[i] for i in sorted(texts))

    def _error(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        raise error_from_body(
            data.get("error"), phase=FailurePhase.READ, request_id=self.request_id
        )

    def response(self) -> ModelResponse:
        """The response built from the finished blocks, in block order."""
        parts = tuple(self._closed[i] for i in sorted(self._closed))
        return ModelResponse(
            message=Message("assistant", parts),
            usage=self.usage,
            model=self.model,
            stop_reason=self.stop_reason,
            request_id=self.request_id,
            thinking_dropped=self.dropped,
        )


def _whole(lane: _Lane) -> Mapping[str, Any]:
    """A server block as the JSON reply would hold it: its streamed input parsed in place."""
    block = lane.initial or {}
    if lane.kind != "server_tool_use" or not lane.text.strip():
        return block
    try:
        arguments = loads(lane.text, "server tool input")
    except WireError:
        arguments = {}
    return {**block, "input": arguments if isinstance(arguments, dict) else {}}


_HANDLERS = {
    "message_start": AnthropicStreamState._start,
    "content_block_start": AnthropicStreamState._block_start,
    "content_block_delta": AnthropicStreamState._block_delta,
    "content_block_stop": AnthropicStreamState._block_stop,
    "message_delta": AnthropicStreamState._delta,
    "message_stop": AnthropicStreamState._stop,
    "error": AnthropicStreamState._error,
}


def _compaction(lane: _Lane) -> ProviderPart:
    """A server-side compaction block with its deltas put back in (SPEC 28), kept as it came."""
    block = dict(lane.initial or {})
    if lane.text:
        block["content"] = lane.text
    if lane.signature:
        block["encrypted_content"] = lane.signature
    return ProviderPart(PROVIDER, "compaction", block)
