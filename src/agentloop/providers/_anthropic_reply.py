"""Decoding Anthropic Messages API replies: one JSON body, or an SSE stream event by event.

``parse_response`` reads a non-streaming reply; ``AnthropicStreamState`` is the pure accumulator
of a stream (``feed`` events, get ``StreamEvent``s; ``done`` only after ``message_stop``). An
error payload (a body of ``type: error`` or an ``error`` event) becomes the ``ProviderError`` its
type names (``_classify.class_for_error_type``); a wrong shape is ``ResponseInvalid``. Only closed
content blocks survive into the final response; ``anthropic.py`` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloop.errors import FailurePhase, ProviderError, ResponseInvalid
from agentloop.messages import Message, Part, TextPart, ToolCallPart, Usage
from agentloop.model import ModelResponse, StreamEvent
from agentloop.providers._classify import class_for_error_type, invalid_body
from agentloop.providers._sse import SSEEvent
from agentloop.providers._wire import (
    WireError,
    as_count,
    as_index,
    as_object,
    loads,
    nonempty_str,
    opt_object,
    opt_str,
    wrong,
)

__all__ = ["AnthropicStreamState", "error_from_body", "invalid_reply", "parse_response"]

_PROVIDER = "anthropic"


def invalid_reply(message: str, body: str = "", request_id: str | None = None) -> ResponseInvalid:
    return invalid_body(f"anthropic: {message}", body, _PROVIDER, request_id)


_INPUT_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _usage(value: object, previous: Usage | None = None, path: str = "usage") -> Usage:
    """Usage from a ``usage`` object; fields it omits keep ``previous``'s counts.

    The three prompt fields travel together: when any is present, the absent ones count 0.
    """
    base = previous or Usage()
    if value is None:
        return base
    usage = as_object(value, path)
    output = usage.get("output_tokens")
    outputs = base.output_tokens if output is None else as_count(output, f"{path}.output_tokens")
    prompt = [usage.get(name) for name in _INPUT_FIELDS]
    if all(v is None for v in prompt):
        return Usage(base.input_tokens, outputs, base.cache_read_tokens, base.cache_write_tokens)
    fresh, write, read = (
        as_count(v, f"{path}.{n}") for v, n in zip(prompt, _INPUT_FIELDS, strict=True)
    )
    return Usage(fresh + write + read, outputs, cache_read_tokens=read, cache_write_tokens=write)


def _decode_block(value: object, path: str) -> Part | None:
    block = as_object(value, path)
    kind = block.get("type")
    if kind == "text":
        text = opt_str(block.get("text"), f"{path}.text")
        return TextPart(text) if text else None
    if kind == "tool_use":
        return ToolCallPart(
            nonempty_str(block.get("id"), f"{path}.id"),
            nonempty_str(block.get("name"), f"{path}.name"),
            dict(as_object(block.get("input"), f"{path}.input")),
        )
    return None


def error_from_body(error: Any, *, phase: FailurePhase, request_id: str | None) -> ProviderError:
    """The ``ProviderError`` for an Anthropic ``{"type": "error", "error": {...}}`` payload.

    Any shape is accepted (a field of the wrong type counts as absent): an error event is
    classified as an error even when it is malformed.
    """
    detail = error if isinstance(error, Mapping) else {}
    kind = detail.get("type")
    kind = kind if isinstance(kind, str) and kind else "api_error"
    message = detail.get("message")
    message = message if isinstance(message, str) and message else kind
    return class_for_error_type(kind, message)(
        f"anthropic {kind}: {message}",
        provider=_PROVIDER,
        request_id=request_id,
        phase=phase,
        request_sent=True,
    )


def _message(data: object, request_id: str | None) -> ModelResponse:
    """The typed read of a Messages API reply; a wrong shape raises ``WireError``."""
    body = as_object(data, "body")
    content = body.get("content")
    if not isinstance(content, list):
        raise wrong("content", "an array", content)
    blocks = (_decode_block(block, f"content[{i}]") for i, block in enumerate(content))
    return ModelResponse(
        message=Message("assistant", tuple(part for part in blocks if part is not None)),
        usage=_usage(body.get("usage")),
        model=opt_str(body.get("model"), "model") or "",
        stop_reason=opt_str(body.get("stop_reason"), "stop_reason") or None,
        request_id=request_id or opt_str(body.get("id"), "id"),
    )


def parse_response(data: Any, *, request_id: str | None = None, text: str = "") -> ModelResponse:
    """A ``ModelResponse`` from a non-streaming Messages API reply (``ResponseInvalid`` else)."""
    if isinstance(data, Mapping) and data.get("type") == "error":
        raise error_from_body(data.get("error"), phase=FailurePhase.BODY, request_id=request_id)
    try:
        return _message(data, request_id)
    except WireError as exc:
        raise invalid_reply(f"the reply is not a message ({exc})", text, request_id) from exc


@dataclass
class _Lane:
    """One open content block of a stream."""

    kind: str
    text: str = ""
    call_id: str = ""
    name: str = ""
    initial: Mapping[str, Any] | None = None


@dataclass
class AnthropicStreamState:
    """Pure accumulator of one Messages API SSE stream: ``feed`` events, get ``StreamEvent``s."""

    request_id: str | None = None
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    finished: bool = False
    count: int = 0
    _open: dict[int, _Lane] = field(default_factory=dict)
    _closed: dict[int, Part] = field(default_factory=dict)

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
        self.usage = _usage(message.get("usage"), None, "message.usage")
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
        if kind == "input_json_delta" and lane.kind == "tool_use":
            piece = opt_str(delta.get("partial_json"), "delta.partial_json") or ""
            lane.text += piece
            return [StreamEvent("tool_call_delta", index=index, call_id=lane.call_id,
                                name=lane.name, arguments=piece)]  # fmt: skip
        return []

    def _block_stop(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        index = as_index(data.get("index"), "index")
        lane = self._open.pop(index, None) if index is not None else None
        if lane is None or index is None:
            return []
        if lane.kind == "text" and lane.text:
            self._closed[index] = TextPart(lane.text)
        elif lane.kind == "tool_use":
            self._closed[index] = ToolCallPart(lane.call_id, lane.name, self._arguments(lane))
        return []

    def _arguments(self, lane: _Lane) -> dict[str, Any]:
        if not lane.text.strip():
            return dict(lane.initial or {})
        try:
            return dict(as_object(loads(lane.text, "tool input"), "tool input"))
        except WireError as exc:  # kept apart to keep the joined text as the body
            raise invalid_reply(f"tool input of {lane.name!r} is not a JSON object ({exc})",
                           lane.text, self.request_id) from exc  # fmt: skip

    def _delta(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        delta = opt_object(data.get("delta"), "delta")
        stop_reason = opt_str(delta.get("stop_reason"), "delta.stop_reason")
        self.stop_reason = stop_reason or self.stop_reason
        self.usage = _usage(data.get("usage"), self.usage)
        return []

    def _stop(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        self.finished = True
        return [StreamEvent("done", response=self.response())]

    def _error(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        raise error_from_body(
            data.get("error"), phase=FailurePhase.READ, request_id=self.request_id
        )

    def response(self) -> ModelResponse:
        """The response built from the closed blocks, in block order."""
        parts = tuple(self._closed[i] for i in sorted(self._closed))
        return ModelResponse(
            message=Message("assistant", parts),
            usage=self.usage,
            model=self.model,
            stop_reason=self.stop_reason,
            request_id=self.request_id,
        )


_HANDLERS = {
    "message_start": AnthropicStreamState._start,
    "content_block_start": AnthropicStreamState._block_start,
    "content_block_delta": AnthropicStreamState._block_delta,
    "content_block_stop": AnthropicStreamState._block_stop,
    "message_delta": AnthropicStreamState._delta,
    "message_stop": AnthropicStreamState._stop,
    "error": AnthropicStreamState._error,
}
