"""The Gemini ``generateContent`` adapter: agentloop messages in, ``ModelResponse`` out.

Speaks ``POST {base_url}/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse`` through the shared ``HttpTransport``. The key travels in the
``x-goog-api-key`` header, never in the URL. Wire rules it owns:

- ``request.system`` (and ``system`` messages) -> ``systemInstruction``; roles ``user`` and
  ``model``; a ``tool`` message -> one ``user`` turn of ``functionResponse`` parts
  (``{"result": text}``, or ``{"error": text}`` for a soft error), in the model's call order;
  consecutive same-role turns are merged.
- Call ids: Gemini may omit ``functionCall.id``. A missing id is synthesised as
  ``gemini_<responseId>_<n>`` (or a random stem without a response id): the same id in the
  stream's deltas and in the final response. Results map back by name and order; only ids that
  Gemini itself issued are echoed back. ``thoughtSignature`` values are remembered per client
  by call id and returned with the call, as thinking models require.
- ``ModelSettings``: temperature, top_p, max_tokens, stop, seed -> ``generationConfig``;
  ``tool_choice`` -> ``toolConfig.functionCallingConfig`` (``AUTO``/``ANY``/``NONE``, a tool
  name -> ``ANY`` restricted to it); ``extra_body`` merges into the body.
- Stream completion rule: a stream is complete when a chunk carrying ``finishReason`` (or a
  ``promptFeedback.blockReason``) has arrived AND the connection then ended cleanly; chunks after
  the finish (usage) are still read. EOF without a finish reason is ``ResponseInvalid``.
- Usage: ``promptTokenCount`` (which includes cached content) is ``input_tokens``,
  ``cachedContentTokenCount`` is ``cache_read_tokens`` (Gemini caches implicitly; nothing to send).
- ``finishReason``: STOP -> ``end_turn`` (``tool_use`` when calls were made), MAX_TOKENS ->
  ``max_tokens``, safety-type reasons -> ``refusal``, MALFORMED_FUNCTION_CALL ->
  ``ResponseInvalid`` (retryable); others lower-cased.
- Errors: the status table of ``_http`` (which also reads Google's error bodies: a 400 about an
  invalid API key -> ``AuthError``; a 429 with a ``RetryInfo`` is ``RateLimited`` with its
  ``retryDelay`` as ``retry_after``; a 429 about billing without one -> ``InsufficientCredits``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentloop.errors import FailurePhase, ProviderError, ResponseInvalid
from agentloop.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from agentloop.model import ModelRequest, ModelResponse, ModelSettings, StreamEvent
from agentloop.providers._classify import embedded_error, invalid_body
from agentloop.providers._client import HttpClient, check_client, require_key
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
)

__all__ = ["GeminiClient", "GeminiStreamState", "build_payload", "parse_response"]

_PROVIDER = "gemini"
_SYNTHETIC = "gemini_"
_REFUSALS = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE",
     "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"}
)  # fmt: skip


def _invalid(message: str, body: str = "", request_id: str | None = None) -> ResponseInvalid:
    return invalid_body(f"gemini: {message}", body, _PROVIDER, request_id)


# --- request encoding ------------------------------------------------------------------------


def _encode_part(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"text": part.text} if part.text else None
    if isinstance(part, ThinkingPart):
        return None  # reasoning is not sent back yet (issue 19 adds it)
    if isinstance(part, ToolCallPart):
        call: dict[str, Any] = {"name": part.name, "args": dict(part.arguments)}
        if not part.id.startswith(_SYNTHETIC):
            call["id"] = part.id
        return {"functionCall": call}
    return _encode_result(part)


def _encode_result(part: ToolResultPart) -> dict[str, Any]:
    key = "error" if part.is_error else "result"
    response: dict[str, Any] = {"name": part.name, "response": {key: part.content}}
    if not part.call_id.startswith(_SYNTHETIC):
        response["id"] = part.call_id
    return {"functionResponse": response}


_Encoded = tuple[str, tuple[tuple[str | None, dict[str, Any]], ...]]


def _encode_message(message: Message) -> _Encoded:
    """The role and wire parts of ``message``, each with its call id (None for other parts)."""
    parts: list[tuple[str | None, dict[str, Any]]] = []
    for part in message.parts:
        wire = _encode_part(part)
        if wire is not None:
            parts.append((part.id if isinstance(part, ToolCallPart) else None, wire))
    return "model" if message.role == "assistant" else "user", tuple(parts)


def encode_contents(
    messages: Sequence[Message], signatures: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The ``contents`` array: roles user/model, same-role neighbours merged.

    Each message is encoded once (``Message.encoded``); a call's ``thoughtSignature`` is added
    to a copy of its cached part, since the client learns signatures after the message exists.
    """
    signatures = signatures or {}
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role, encoded = message.encoded(_PROVIDER, _encode_message)
        if not encoded:
            continue
        kept = [_signed(wire, call_id, signatures) for call_id, wire in encoded]
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(kept)
        else:
            out.append({"role": role, "parts": kept})
    return out


def _signed(
    wire: dict[str, Any], call_id: str | None, signatures: Mapping[str, str]
) -> dict[str, Any]:
    signature = signatures.get(call_id) if call_id is not None else None
    return wire if signature is None else {**wire, "thoughtSignature": signature}


def _tool_config(choice: str) -> dict[str, Any]:
    modes = {"auto": "AUTO", "required": "ANY", "any": "ANY", "none": "NONE"}
    if choice in modes:
        return {"functionCallingConfig": {"mode": modes[choice]}}
    return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice]}}


def _generation_config(settings: ModelSettings) -> dict[str, Any]:
    pairs = (
        ("temperature", settings.temperature),
        ("topP", settings.top_p),
        ("maxOutputTokens", settings.max_tokens),
        ("seed", settings.seed),
        ("stopSequences", list(settings.stop) if settings.stop else None),
    )
    return {key: value for key, value in pairs if value is not None}


def build_payload(
    request: ModelRequest, signatures: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``generateContent`` request body for ``request``."""
    payload: dict[str, Any] = {"contents": encode_contents(tuple(request.messages), signatures)}
    texts = [request.system] if request.system else []
    texts.extend(m.text for m in request.messages if m.role == "system" and m.text)
    if texts:
        payload["systemInstruction"] = {"parts": [{"text": "\n\n".join(texts)}]}
    if request.tools:
        declarations = [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in request.tools
        ]
        payload["tools"] = [{"functionDeclarations": declarations}]
    if request.settings.tool_choice is not None:
        payload["toolConfig"] = _tool_config(request.settings.tool_choice)
    config = _generation_config(request.settings)
    if request.output is not None:  # native structured output (RunConfig.output_mode="native")
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = dict(request.output.schema)
    if config:
        payload["generationConfig"] = config
    if request.settings.extra_body:
        payload.update(request.settings.extra_body)
    return payload


# --- response decoding -----------------------------------------------------------------------


def _usage(value: object, previous: Usage) -> Usage:
    """``promptTokenCount`` includes ``cachedContentTokenCount`` (kept as cache reads)."""
    if value is None:
        return previous
    usage = as_object(value, "usageMetadata")
    prompt = usage.get("promptTokenCount")
    output = as_count(
        usage.get("candidatesTokenCount"), "usageMetadata.candidatesTokenCount"
    ) + as_count(
        usage.get("thoughtsTokenCount"), "usageMetadata.thoughtsTokenCount"
    )  # thinking is billed as output
    if prompt is None:
        return Usage(previous.input_tokens, output, previous.cache_read_tokens)
    cached = as_count(usage.get("cachedContentTokenCount"), "usageMetadata.cachedContentTokenCount")
    return Usage(as_count(prompt, "usageMetadata.promptTokenCount"), output, cached)


def _stop_reason(finish: str, has_calls: bool) -> str:
    if finish == "STOP":
        return "tool_use" if has_calls else "end_turn"
    if finish == "MAX_TOKENS":
        return "max_tokens"
    if finish in _REFUSALS:
        return "refusal"
    return finish.lower()


@dataclass
class GeminiStreamState:
    """Pure accumulator of Gemini response chunks (one for ``generateContent``, many streamed)."""

    request_id: str | None = None
    stem: str = ""
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    finish: str | None = None
    parts: list[Part] = field(default_factory=list)
    signatures: dict[str, str] = field(default_factory=dict)
    count: int = 0

    def feed_chunk(self, data: Any, raw: str = "") -> list[StreamEvent]:
        """Apply one ``GenerateContentResponse`` chunk; returns the events it produces."""
        try:
            chunk = as_object(data, "chunk")
            if "error" in chunk:
                raise _chunk_error(chunk, raw, self.request_id)
            return self._apply(chunk)
        except WireError as exc:
            raise _invalid(f"malformed chunk ({exc})", raw, self.request_id) from exc

    def _apply(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        self.count += 1
        self.request_id = self.request_id or opt_str(chunk.get("responseId"), "responseId")
        self.model = opt_str(chunk.get("modelVersion"), "modelVersion") or self.model
        self.usage = _usage(chunk.get("usageMetadata"), self.usage)
        feedback = opt_object(chunk.get("promptFeedback"), "promptFeedback")
        self.finish = opt_str(feedback.get("blockReason"), "promptFeedback.blockReason") or (
            self.finish
        )
        candidates = as_list(chunk.get("candidates"), "candidates")
        if not candidates:
            return []
        candidate = as_object(candidates[0], "candidates[0]")
        finish = opt_str(candidate.get("finishReason"), "candidates[0].finishReason")
        self.finish = finish or self.finish
        content = opt_object(candidate.get("content"), "candidates[0].content")
        parts = as_list(content.get("parts"), "candidates[0].content.parts")
        return [e for index, part in enumerate(parts) for e in self._part(part, index)]

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Apply one SSE event (its data is one JSON chunk)."""
        if not event.data.strip():
            return []
        try:
            data = loads(event.data, "chunk")
        except WireError as exc:
            raise _invalid(f"malformed chunk ({exc})", event.data, self.request_id) from exc
        return self.feed_chunk(data, event.data)

    def _part(self, value: object, position: int) -> list[StreamEvent]:
        path = f"candidates[0].content.parts[{position}]"
        part = as_object(value, path)
        if part.get("thought"):
            return []
        text = opt_str(part.get("text"), f"{path}.text")
        if text:
            self._add_text(text)
            return [StreamEvent("text_delta", text=text)]
        if part.get("functionCall") is None:
            return []
        call = as_object(part["functionCall"], f"{path}.functionCall")
        name = nonempty_str(call.get("name"), f"{path}.functionCall.name")
        args = opt_object(call.get("args"), f"{path}.functionCall.args")
        arguments = dumps(args, f"{path}.functionCall.args")
        index = sum(isinstance(p, ToolCallPart) for p in self.parts)
        call_id = opt_str(call.get("id"), f"{path}.functionCall.id")
        call_id = call_id or f"{_SYNTHETIC}{self._stem()}_{index}"
        signature = opt_str(part.get("thoughtSignature"), f"{path}.thoughtSignature")
        if signature:
            self.signatures[call_id] = signature
        self.parts.append(ToolCallPart(call_id, name, dict(args)))
        return [StreamEvent("tool_call_delta", index=index, call_id=call_id, name=name,
                            arguments=arguments)]  # fmt: skip

    def _add_text(self, text: str) -> None:
        if self.parts and isinstance(self.parts[-1], TextPart):
            self.parts[-1] = TextPart(self.parts[-1].text + text)
        else:
            self.parts.append(TextPart(text))

    def _stem(self) -> str:
        if not self.stem:
            self.stem = self.request_id or uuid.uuid4().hex[:16]
        return self.stem

    def response(self) -> ModelResponse:
        """The complete response; raises ``ResponseInvalid`` when it cannot be one."""
        if self.finish is None:
            raise _invalid(f"stream ended without a finishReason after {self.count} chunks")
        if self.finish in ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"):
            raise _invalid(f"the model produced an invalid tool call ({self.finish})")
        has_calls = any(isinstance(p, ToolCallPart) for p in self.parts)
        return ModelResponse(
            message=Message("assistant", tuple(self.parts)),
            usage=self.usage,
            model=self.model,
            stop_reason=_stop_reason(self.finish, has_calls),
            request_id=self.request_id,
        )


def _chunk_error(data: Mapping[str, Any], raw: str, request_id: str | None) -> ProviderError:
    """An ``{"error": {...}}`` object inside a 200 reply or stream, as the status table says."""
    body = raw or dumps(data, "error")
    error = embedded_error(data.get("error"), body, provider=_PROVIDER, request_id=request_id)
    error.phase = FailurePhase.READ
    return error


def _parse(data: Any, request_id: str | None, text: str) -> GeminiStreamState:
    state = GeminiStreamState(request_id=request_id)
    state.feed_chunk(data, text)
    if state.finish is None and not state.parts:
        raise _invalid("reply has no candidates", text, request_id)
    state.finish = state.finish or "STOP"
    return state


def parse_response(data: Any, *, request_id: str | None = None, text: str = "") -> ModelResponse:
    """A ``ModelResponse`` from a non-streaming ``generateContent`` reply."""
    return _parse(data, request_id, text).response()


class GeminiClient(HttpClient):
    """A ``ModelClient`` for the Gemini API (``generateContent``).

    Args:
        model: Default model, e.g. ``gemini-2.5-flash`` (a ``models/`` prefix is accepted).
        api_key: Sent as ``x-goog-api-key``; never in the URL, errors, logs or ``repr``.
        base_url: API root including the version.
        timeout: Read/idle-gap timeout in seconds.
        connect_timeout: Connect timeout in seconds.
        headers: Extra headers.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str = "https://generativelanguage.googleapis.com/v1beta",
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        name = model.removeprefix("models/") if isinstance(model, str) else model
        check_client(name, base_url, timeout, connect_timeout)
        api_key = require_key(api_key, "GEMINI_API_KEY", _PROVIDER)
        self.base_url = base_url.rstrip("/")
        self._signatures: dict[str, str] = {}
        self._configure(
            name,
            _PROVIDER,
            headers={**(headers or {}), "x-goog-api-key": api_key},
            key=api_key,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )

    def __repr__(self) -> str:
        return f"GeminiClient(model={self._model!r}, base_url={self.base_url!r})"

    def _url(self, request: ModelRequest, method: str) -> str:
        model = (request.model or self._model).removeprefix("models/")
        return f"{self.base_url}/models/{model}:{method}"

    def _remember(self, state: GeminiStreamState) -> None:
        if len(self._signatures) > 10_000:
            self._signatures.clear()
        self._signatures.update(state.signatures)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one request and parse the reply."""
        payload = build_payload(request, self._signatures)
        reply = await self._transport.post_json(self._url(request, "generateContent"), payload)
        with self._redacting():
            state = _parse(reply.data, reply.request_id, reply.text)
            response = state.response()
        self._remember(state)
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one request; ``done`` follows the finish chunk and a clean end of stream."""
        payload = build_payload(request, self._signatures)
        url = self._url(request, "streamGenerateContent") + "?alt=sse"
        with self._redacting():
            async with self._transport.stream_sse(url, payload) as sse:
                state = GeminiStreamState(request_id=sse.request_id)
                async for event in sse:
                    for out in state.feed(event):
                        yield out
        response = state.response()
        self._remember(state)
        yield StreamEvent("done", response=response)
