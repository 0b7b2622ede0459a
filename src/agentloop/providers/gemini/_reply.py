"""Gemini reply decoding: ``GenerateContentResponse`` chunks in, a ``ModelResponse`` out.

One pure accumulator serves both forms (a ``generateContent`` reply is one chunk, a stream is
many); no I/O here. Decisions it owns (docs/providers.md, "Current models: Gemini"):

- **Reasoning.** A ``thoughtSignature`` on a ``functionCall`` or text part becomes
  ``ThinkingPart(text="", signature=..., provider="gemini")`` right before that part (a signed
  streamed text chunk starts a new text part, so the signature stays where Gemini put it); a
  signature on an empty text part (how a stream ends) stays a signature-only part. A
  ``thought: true`` part is ``ThinkingPart(text, signature=...)``; consecutive thought chunks
  join until one carries a signature, and stream as ``thinking_delta``.
- **Finish reasons.** ``STOP`` -> ``end_turn`` (``tool_use`` with calls); ``MAX_TOKENS`` ->
  ``max_tokens`` (a truncation: ``Run.truncated``). Gemini sends call arguments as parsed
  objects, never as text, so a call in a cut reply is whole and runs; one the model could not
  finish arrives as ``MALFORMED_FUNCTION_CALL``. Safety-family reasons raise
  ``ModelRefused(<reason>, <text so far>)`` the moment they arrive (mid-stream too), and a
  ``promptFeedback.blockReason`` raises ``ModelRefused(<blockReason>, "")``.
  ``MISSING_THOUGHT_SIGNATURE`` is ``BadRequestError`` (the request was wrong, as the 400 for
  it is: never retried); ``MALFORMED_FUNCTION_CALL``, ``UNEXPECTED_TOOL_CALL``,
  ``TOO_MANY_TOOL_CALLS``, ``OTHER`` and any reason this module does not know are
  ``ResponseInvalid`` (retryable: another sample usually differs), with Gemini's
  ``finishMessage``.
- **Parts it cannot keep** (``inlineData``, ``executableCode``, ... or an unknown kind) are
  ``ResponseInvalid`` naming the part's fields: content is never dropped silently. An empty
  part ``{}`` carries nothing and is skipped.
- **Usage.** ``promptTokenCount`` (cached content included) is ``input_tokens``,
  ``cachedContentTokenCount`` is ``cache_read_tokens``, ``candidatesTokenCount`` plus
  ``thoughtsTokenCount`` is ``output_tokens`` (thinking is billed as output) and
  ``thoughtsTokenCount`` alone is ``reasoning_tokens``. Streams repeat cumulative usage: the
  last one wins.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agentloop.errors import (
    BadRequestError,
    FailurePhase,
    ModelRefused,
    ProviderError,
    ResponseInvalid,
)
from agentloop.messages import (
    Message,
    Part,
    ProviderToolCallPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from agentloop.model import ModelResponse, StreamEvent
from agentloop.providers._classify import embedded_error, invalid_body
from agentloop.providers._sse import SSEEvent
from agentloop.providers._wire import (
    WireError,
    as_count,
    as_list,
    as_object,
    dumps,
    loads,
    nonempty_str,
    opt_object,
    opt_str,
    wrong,
)
from agentloop.providers.gemini import _builtin
from agentloop.providers.gemini._encode import PROVIDER, SYNTHETIC

__all__ = ["REFUSALS", "GeminiStreamState", "parse_reply"]

REFUSALS = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE",
     "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"}
)  # fmt: skip
"""Finish reasons that mean Gemini withheld the reply: ``ModelRefused``, never an answer."""

_COMPLETE = {"STOP": "end_turn", "MAX_TOKENS": "max_tokens"}
_INVALID = {
    "MALFORMED_FUNCTION_CALL": "the model wrote a function call Gemini could not parse",
    "UNEXPECTED_TOOL_CALL": "the model called a tool although none was enabled",
    "TOO_MANY_TOOL_CALLS": "the model called too many tools in a row",
    "OTHER": "Gemini stopped for an unspecified reason",
}
_METADATA = frozenset({"thought", "thoughtSignature", "partMetadata", "videoMetadata"})


def _invalid(message: str, body: str = "", request_id: str | None = None) -> ResponseInvalid:
    return invalid_body(f"gemini: {message}", body, PROVIDER, request_id)


def _usage(value: object, previous: Usage) -> Usage:
    """``promptTokenCount`` includes ``cachedContentTokenCount`` (kept as cache reads)."""
    if value is None:
        return previous
    usage = as_object(value, "usageMetadata")
    thoughts = as_count(usage.get("thoughtsTokenCount"), "usageMetadata.thoughtsTokenCount")
    candidates = as_count(usage.get("candidatesTokenCount"), "usageMetadata.candidatesTokenCount")
    output = candidates + thoughts  # thinking is billed as output
    prompt = usage.get("promptTokenCount")
    if prompt is None:
        return Usage(
            previous.input_tokens,
            output,
            previous.cache_read_tokens,
            reasoning_tokens=thoughts,
        )
    cached = as_count(usage.get("cachedContentTokenCount"), "usageMetadata.cachedContentTokenCount")
    return Usage(
        as_count(prompt, "usageMetadata.promptTokenCount"),
        output,
        cached,
        reasoning_tokens=thoughts,
    )


@dataclass
class GeminiStreamState:
    """Pure accumulator of Gemini response chunks (one for ``generateContent``, many streamed)."""

    request_id: str | None = None
    stem: str = ""
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    finish: str | None = None
    finish_message: str = ""
    parts: list[Part] = field(default_factory=list)
    count: int = 0
    origin: str | None = None
    """The model the request named: its thought signatures are readable by that model only."""
    grounding: Mapping[str, Any] | None = None
    """The candidate's ``groundingMetadata`` (a built-in search, SPEC 24), the last one sent."""

    def feed_chunk(self, data: Any, raw: str = "") -> list[StreamEvent]:
        """Apply one ``GenerateContentResponse`` chunk; returns the events it produces.

        Raises ``ModelRefused`` at a refusal or block, and the finish reason's error at any
        other finish that is not a reply (see the module docstring).
        """
        try:
            chunk = as_object(data, "chunk")
            if "error" in chunk:
                raise _chunk_error(chunk, raw, self.request_id)
            events = self._apply(chunk)
        except WireError as exc:
            raise _invalid(f"malformed chunk ({exc})", raw, self.request_id) from exc
        if self.finish is not None and self.finish not in _COMPLETE:
            raise self._failure(raw)
        return events

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Apply one SSE event (its data is one JSON chunk)."""
        if not event.data.strip():
            return []
        try:
            data = loads(event.data, "chunk")
        except WireError as exc:
            raise _invalid(f"malformed chunk ({exc})", event.data, self.request_id) from exc
        return self.feed_chunk(data, event.data)

    def _apply(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        self.count += 1
        self.request_id = self.request_id or opt_str(chunk.get("responseId"), "responseId")
        self.model = opt_str(chunk.get("modelVersion"), "modelVersion") or self.model
        self.usage = _usage(chunk.get("usageMetadata"), self.usage)
        feedback = opt_object(chunk.get("promptFeedback"), "promptFeedback")
        blocked = opt_str(feedback.get("blockReason"), "promptFeedback.blockReason")
        if blocked:
            raise ModelRefused(blocked, self.text)
        candidates = as_list(chunk.get("candidates"), "candidates")
        if not candidates:
            return []
        candidate = as_object(candidates[0], "candidates[0]")
        content = opt_object(candidate.get("content"), "candidates[0].content")
        parts = as_list(content.get("parts"), "candidates[0].content.parts")
        grounding = candidate.get("groundingMetadata")
        self.grounding = grounding if isinstance(grounding, Mapping) else self.grounding
        events = [e for index, part in enumerate(parts) for e in self._part(part, index)]
        finish = opt_str(candidate.get("finishReason"), "candidates[0].finishReason")
        if finish:
            self.finish = finish
            message = opt_str(candidate.get("finishMessage"), "candidates[0].finishMessage")
            self.finish_message = message or ""
        return events

    @property
    def text(self) -> str:
        """The answer's text so far (reasoning excluded)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    def _failure(self, raw: str) -> ModelRefused | ProviderError:
        """The error for a finish reason that is not a reply."""
        finish = self.finish or ""
        if finish in REFUSALS:
            return ModelRefused(finish, self.text)
        said = f": {self.finish_message:.300}" if self.finish_message else ""
        if finish == "MISSING_THOUGHT_SIGNATURE":
            return BadRequestError(
                f"gemini: the request lacks a thought signature ({finish}){said}",
                provider=PROVIDER,
                request_id=self.request_id,
                phase=FailurePhase.BODY,
                request_sent=True,
            )
        why = _INVALID.get(finish, "unknown finishReason")
        return _invalid(f"{why} ({finish}){said}", raw, self.request_id)

    def _part(self, value: object, position: int) -> list[StreamEvent]:
        path = f"candidates[0].content.parts[{position}]"
        part = as_object(value, path)
        signature = opt_str(part.get("thoughtSignature"), f"{path}.thoughtSignature") or None
        if not _builtin.PART_KEYS.isdisjoint(part):
            self.parts.append(_builtin.decode_part(part, self.parts))
            return []
        if part.get("functionCall") is not None:
            return [self._call(part["functionCall"], signature, path)]
        thought = part.get("thought")
        if thought is not None and not isinstance(thought, bool):
            raise wrong(f"{path}.thought", "a boolean", thought)
        text = opt_str(part.get("text"), f"{path}.text") or ""
        if thought:
            self._add_thought(text, signature)
            return [StreamEvent("thinking_delta", text=text)] if text else []
        if "text" not in part and not part.keys() <= _METADATA:
            kinds = ", ".join(sorted(k for k in part if k not in _METADATA))
            raise WireError(path, f"a part agentloop cannot keep ({kinds:.100})")
        if signature:
            self._sign(signature)
            if text:
                self.parts.append(TextPart(text))  # a new part: the signature is on this one
        elif text:
            self._add_text(text)
        return [StreamEvent("text_delta", text=text)] if text else []

    def _call(self, value: object, signature: str | None, path: str) -> StreamEvent:
        call = as_object(value, f"{path}.functionCall")
        name = nonempty_str(call.get("name"), f"{path}.functionCall.name")
        args = opt_object(call.get("args"), f"{path}.functionCall.args")
        arguments = dumps(args, f"{path}.functionCall.args")
        index = sum(isinstance(p, ToolCallPart) for p in self.parts)
        call_id = opt_str(call.get("id"), f"{path}.functionCall.id")
        call_id = call_id or f"{SYNTHETIC}{self._stem()}_{index}"
        if signature:
            self._sign(signature)
        self.parts.append(ToolCallPart(call_id, name, dict(args)))
        return StreamEvent(
            "tool_call_delta", index=index, call_id=call_id, name=name, arguments=arguments
        )

    def _thinking(self, text: str, signature: str | None) -> ThinkingPart:
        return ThinkingPart(text, signature=signature, provider=PROVIDER, origin=self.origin)

    def _sign(self, signature: str) -> None:
        self.parts.append(self._thinking("", signature))

    def _add_thought(self, text: str, signature: str | None) -> None:
        """Join a thought chunk to the open run of thought text, which a signature closes."""
        last = self.parts[-1] if self.parts else None
        if isinstance(last, ThinkingPart) and last.text and last.signature is None:
            self.parts[-1] = self._thinking(last.text + text, signature)
        elif text or signature:
            self.parts.append(self._thinking(text, signature))

    def _add_text(self, text: str) -> None:
        if self.parts and isinstance(self.parts[-1], TextPart):
            self.parts[-1] = TextPart(self.parts[-1].text + text)
        else:
            self.parts.append(TextPart(text))

    def _built_in(self) -> bool:
        return any(isinstance(p, ProviderToolCallPart) for p in self.parts)

    def _stem(self) -> str:
        if not self.stem:
            self.stem = self.request_id or uuid.uuid4().hex[:16]
        return self.stem

    def response(self) -> ModelResponse:
        """The complete response; raises ``ResponseInvalid`` when it cannot be one."""
        if self.finish is None:
            raise _invalid(f"stream ended without a finishReason after {self.count} chunks")
        stop = _COMPLETE[self.finish]
        if stop == "end_turn" and any(isinstance(p, ToolCallPart) for p in self.parts):
            stop = "tool_use"
        parts, usage = self.parts, self.usage
        if self.grounding is not None:
            parts = _builtin.grounded(parts, self.grounding)
        calls = _builtin.counts(parts) if parts is not self.parts or self._built_in() else {}
        if calls:
            usage = replace(usage, provider_tool_calls=calls)
        return ModelResponse(
            message=Message("assistant", tuple(parts)),
            usage=usage,
            model=self.model,
            stop_reason=stop,
            request_id=self.request_id,
        )


def _chunk_error(data: Mapping[str, Any], raw: str, request_id: str | None) -> ProviderError:
    """An ``{"error": {...}}`` object inside a 200 reply or stream, as the status table says."""
    body = raw or dumps(data, "error")
    error = embedded_error(data.get("error"), body, provider=PROVIDER, request_id=request_id)
    error.phase = FailurePhase.READ
    return error


def parse_reply(
    data: Any, request_id: str | None, text: str, origin: str | None = None
) -> GeminiStreamState:
    """The state after a whole ``generateContent`` reply (a missing finish reason is STOP).

    ``origin``: the model the request named (recorded on its thought signatures).
    """
    state = GeminiStreamState(request_id=request_id, origin=origin)
    state.feed_chunk(data, text)
    if state.finish is None and not state.parts:
        raise _invalid("reply has no candidates", text, request_id)
    state.finish = state.finish or "STOP"
    return state
