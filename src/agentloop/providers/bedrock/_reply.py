"""Converse replies, whole or streamed, into a ``ModelResponse`` (and AWS's errors into ours).

A ``Converse`` body is ``{"output": {"message": {"role", "content": [...]}}, "stopReason",
"usage": {"inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens"}}``.
``ConverseStream`` sends the same reply as AWS event-stream frames (``messageStart``,
``contentBlockStart`` / ``Delta`` / ``Stop``, ``messageStop``, ``metadata``), decoded by botocore's
``EventStreamBuffer`` in ``client``; ``ConverseStreamState`` rebuilds the message from them.

- ``reasoningContent`` is a ``ThinkingPart(provider="bedrock")`` with its ``signature`` (or, for
  ``redactedContent``, the data as signature and ``redacted=True``), in its place.
- ``guardrail_intervened`` and ``content_filtered`` (and a Claude ``refusal``) raise
  ``ModelRefused`` with that word; ``max_tokens`` and ``model_context_window_exceeded`` are
  truncations: a streamed ``toolUse`` whose input JSON was cut keeps ``{INVALID_JSON_KEY: raw}``
  so the engine answers it, never runs it.
- ``Usage.input_tokens`` includes cache reads and writes (the prompt's real size).
- An exception frame (``:message-type: exception``, ``:exception-type: throttlingException``...)
  is the class ``_aws_errors`` names, phase ``read``, ``request_sent`` True, with the request id.
  A stream is complete only after ``messageStop``; one that ends before is ``ResponseInvalid``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentloop.errors import FailurePhase, ModelRefused, ProviderError, ProviderUnavailable
from agentloop.messages import Message, Part, TextPart, ThinkingPart, ToolCallPart, Usage
from agentloop.model import INVALID_JSON_KEY, ModelResponse, StreamEvent
from agentloop.providers._aws_errors import class_for_aws_type
from agentloop.providers._classify import invalid_body
from agentloop.providers._wire import (
    WireError,
    as_count,
    as_index,
    as_list,
    as_object,
    nonempty_str,
    opt_object,
    opt_str,
)
from agentloop.run import TRUNCATION_REASONS

__all__ = ["REFUSALS", "ConverseStreamState", "exception_error", "invalid_reply", "parse_converse"]

PROVIDER = "bedrock"
REFUSALS = frozenset({"guardrail_intervened", "content_filtered", "refusal"})
"""Converse stop reasons that are no answer (``ModelRefused`` with the word)."""


def invalid_reply(message: str, body: str = "", request_id: str | None = None) -> ProviderError:
    """The ``ResponseInvalid`` of a reply this adapter cannot use."""
    return invalid_body(f"bedrock: {message}", body, PROVIDER, request_id)


def usage_from(data: object) -> Usage:
    """Converse ``usage``: cache reads and writes counted in ``input_tokens``."""
    usage = opt_object(data, "usage")
    read = as_count(usage.get("cacheReadInputTokens"), "usage.cacheReadInputTokens")
    write = as_count(usage.get("cacheWriteInputTokens"), "usage.cacheWriteInputTokens")
    return Usage(
        input_tokens=as_count(usage.get("inputTokens"), "usage.inputTokens") + read + write,
        output_tokens=as_count(usage.get("outputTokens"), "usage.outputTokens"),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def _reasoning(data: Mapping[str, Any], where: str) -> ThinkingPart:
    redacted = opt_str(data.get("redactedContent"), f"{where}.redactedContent")
    if redacted:
        return ThinkingPart("", signature=redacted, redacted=True, provider=PROVIDER)
    text = opt_object(data.get("reasoningText"), f"{where}.reasoningText")
    return ThinkingPart(
        opt_str(text.get("text"), f"{where}.reasoningText.text") or "",
        signature=opt_str(text.get("signature"), f"{where}.reasoningText.signature"),
        provider=PROVIDER,
    )


def _block(block: object, where: str) -> Part | None:
    data = as_object(block, where)
    if "text" in data:
        text = opt_str(data["text"], f"{where}.text") or ""
        return TextPart(text) if text else None
    if "toolUse" in data:
        use = as_object(data["toolUse"], f"{where}.toolUse")
        arguments = opt_object(use.get("input"), f"{where}.toolUse.input")
        return ToolCallPart(
            nonempty_str(use.get("toolUseId"), f"{where}.toolUse.toolUseId"),
            nonempty_str(use.get("name"), f"{where}.toolUse.name"),
            dict(arguments),
        )
    if "reasoningContent" in data:
        return _reasoning(as_object(data["reasoningContent"], where), f"{where}.reasoningContent")
    return None  # a block kind this adapter does not read (citations, guard content)


def _finish(
    message: Message, stop: str | None, usage: Usage, request_id: str | None, model: str
) -> ModelResponse:
    """The response, or ``ModelRefused`` when the stop reason is a refusal."""
    if stop in REFUSALS:
        raise ModelRefused(stop or "refusal", message.text)
    return ModelResponse(
        message=message, usage=usage, model=model, stop_reason=stop, request_id=request_id
    )


def parse_converse(data: Any, request_id: str | None, text: str, model: str) -> ModelResponse:
    """A ``ModelResponse`` from a ``Converse`` body; ``ModelRefused`` for a refusal."""
    try:
        body = as_object(data, "body")
        output = as_object(body.get("output"), "output")
        wire = as_object(output.get("message"), "output.message")
        content = as_list(wire.get("content"), "output.message.content")
        parts = [_block(b, f"output.message.content[{i}]") for i, b in enumerate(content)]
        message = Message("assistant", tuple(p for p in parts if p is not None))
        stop = opt_str(body.get("stopReason"), "stopReason")
        usage = usage_from(body.get("usage"))
    except WireError as exc:
        raise invalid_reply(
            f"the reply is not a Converse message ({exc})", text, request_id
        ) from exc
    return _finish(message, stop, usage, request_id, model)


def exception_error(kind: str, payload: bytes, request_id: str | None) -> ProviderError:
    """The error of a ``ConverseStream`` exception frame (``throttlingException``...)."""
    try:
        message = json.loads(payload).get("message")
    except (ValueError, AttributeError):
        message = None
    text = message if isinstance(message, str) and message else kind
    cls = class_for_aws_type(kind) or ProviderUnavailable
    return cls(
        f"bedrock {kind} mid-stream: {text}",
        provider=PROVIDER,
        request_id=request_id,
        phase=FailurePhase.READ,
        request_sent=True,
    )


class _Lane:
    """One content block being streamed: text, a tool call's input JSON, or reasoning."""

    def __init__(self, kind: str, call_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.text = ""
        self.signature: str | None = None
        self.redacted: str | None = None

    def part(self, cut: bool) -> Part | None:
        if self.kind == "tool":
            return ToolCallPart(self.call_id, self.name, self._arguments(cut))
        if self.kind == "reasoning":
            if self.redacted:
                return ThinkingPart("", signature=self.redacted, redacted=True, provider=PROVIDER)
            return ThinkingPart(self.text, signature=self.signature, provider=PROVIDER)
        return TextPart(self.text) if self.text else None

    def _arguments(self, cut: bool) -> dict[str, Any]:
        if not self.text.strip():
            return {}
        try:
            value = json.loads(self.text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        if cut:
            return {INVALID_JSON_KEY: self.text}
        raise WireError("contentBlockDelta.delta.toolUse.input", "not a JSON object")


class ConverseStreamState:
    """The decoded frames of one ``ConverseStream`` reply, rebuilt into a response."""

    def __init__(self, *, request_id: str | None, model: str) -> None:
        self.request_id = request_id
        self.model = model
        self.lanes: dict[int, _Lane] = {}
        self.stop: str | None = None
        self.usage = Usage()
        self.finished = False
        self.count = 0

    def feed(self, event: str, payload: Mapping[str, Any]) -> list[StreamEvent]:
        """The stream events of one decoded frame (``event`` is its ``:event-type``)."""
        self.count += 1
        if event == "contentBlockStart":
            return self._start(payload)
        if event == "contentBlockDelta":
            return self._delta(payload)
        if event == "messageStop":
            self.stop = opt_str(payload.get("stopReason"), "messageStop.stopReason")
            self.finished = True
        elif event == "metadata":
            self.usage = usage_from(payload.get("usage"))
        return []

    def _lane(self, payload: Mapping[str, Any], kind: str) -> tuple[int, _Lane]:
        index = as_index(payload.get("contentBlockIndex"), "contentBlockIndex") or 0
        lane = self.lanes.get(index)
        if lane is None:
            lane = self.lanes[index] = _Lane(kind)
        return index, lane

    def _start(self, payload: Mapping[str, Any]) -> list[StreamEvent]:
        start = opt_object(payload.get("start"), "contentBlockStart.start")
        use = opt_object(start.get("toolUse"), "contentBlockStart.start.toolUse")
        if not use:
            return []
        index, lane = self._lane(payload, "tool")
        lane.kind = "tool"
        lane.call_id = nonempty_str(use.get("toolUseId"), "start.toolUse.toolUseId")
        lane.name = nonempty_str(use.get("name"), "start.toolUse.name")
        return [StreamEvent("tool_call_delta", index=index, call_id=lane.call_id, name=lane.name)]

    def _delta(self, payload: Mapping[str, Any]) -> list[StreamEvent]:
        delta = as_object(payload.get("delta"), "contentBlockDelta.delta")
        if "text" in delta:
            _, lane = self._lane(payload, "text")
            piece = opt_str(delta["text"], "delta.text") or ""
            lane.text += piece
            return [StreamEvent("text_delta", text=piece)] if piece else []
        if "toolUse" in delta:
            index, lane = self._lane(payload, "tool")
            use = opt_object(delta["toolUse"], "delta.toolUse")
            fragment = opt_str(use.get("input"), "delta.toolUse.input") or ""
            lane.text += fragment
            return [StreamEvent("tool_call_delta", index=index, call_id=lane.call_id,
                                arguments=fragment)]  # fmt: skip
        if "reasoningContent" in delta:
            return self._reasoning(payload, as_object(delta["reasoningContent"], "delta"))
        return []

    def _reasoning(self, payload: Mapping[str, Any], data: Mapping[str, Any]) -> list[StreamEvent]:
        _, lane = self._lane(payload, "reasoning")
        lane.kind = "reasoning"
        piece = opt_str(data.get("text"), "reasoningContent.text") or ""
        lane.text += piece
        lane.signature = opt_str(data.get("signature"), "signature") or lane.signature
        lane.redacted = opt_str(data.get("redactedContent"), "redactedContent") or lane.redacted
        return [StreamEvent("thinking_delta", text=piece)] if piece else []

    def response(self) -> ModelResponse:
        """The whole reply (after ``messageStop``); ``ModelRefused`` for a refusal."""
        if not self.finished:
            raise invalid_reply(
                f"stream ended without messageStop after {self.count} events (truncated?)",
                request_id=self.request_id,
            )
        cut = self.stop in TRUNCATION_REASONS
        parts = (self.lanes[i].part(cut) for i in sorted(self.lanes))
        message = Message("assistant", tuple(p for p in parts if p is not None))
        return _finish(message, self.stop, self.usage, self.request_id, self.model)
