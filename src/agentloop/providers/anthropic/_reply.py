"""Decoding a non-streaming Anthropic Messages API reply, and what the stream decoder shares.

``parse_response`` reads one JSON body; ``_stream.AnthropicStreamState`` reads a stream
with the same block rules, kept here so both paths decide alike:

- ``text`` -> ``TextPart``; ``tool_use`` -> ``ToolCallPart``.
- ``thinking`` -> ``ThinkingPart(text, signature=..., provider="anthropic")``. A thinking block
  without a signature is ``ResponseInvalid``: the API refuses it back on the next request
  (provider-rules Anthropic 1), so taking it would only move the failure to a later turn, after a
  tool has run.
- ``redacted_thinking`` -> ``ThinkingPart("", signature=<data>, redacted=True,
  provider="anthropic")``; without ``data`` it is ``ResponseInvalid`` for the same reason.
- Server tools' ``server_tool_use`` and ``*_tool_result`` blocks -> ``ProviderToolCallPart`` /
  ``ProviderToolResultPart`` keeping the block raw, a text block's ``citations`` -> ``Citation``s
  (``_server_tools``, SPEC 24). Any other block type (``compaction``, ``fallback``, and
  whatever the API adds later) is skipped, and logged at DEBUG on the
  ``agentloop`` logger: such blocks arrive only for features a request opted into (a beta header,
  ``extra_body``), agentloop has no part for them, and the API takes the transcript back without
  them; failing would make every reply of such a feature unusable.
- ``stop_reason="refusal"`` raises ``ModelRefused("refusal", <the text before it>)`` ("" when the
  model said nothing): a refusal is never an answer (SPEC 16).
- A reply cut at the output limit (``stop_reason`` in ``TRUNCATION_REASONS``: ``max_tokens``,
  ``model_context_window_exceeded``) keeps a tool call whose input is not a JSON object as
  ``ToolCallPart(id, name, {INVALID_JSON_KEY: <raw>})``; the engine answers it with the cut-off
  soft text and never runs it. Outside a cut, such a call is ``ResponseInvalid``.

An error payload (a body of ``type: error`` or an ``error`` event) becomes the ``ProviderError``
its type names (``_classify.class_for_error_type``); a wrong shape is ``ResponseInvalid``.
``anthropic.py`` re-exports the public names.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agentloop.errors import FailurePhase, ModelRefused, ProviderError, ResponseInvalid
from agentloop.messages import (
    Message,
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from agentloop.model import INVALID_JSON_KEY, ModelResponse
from agentloop.providers._classify import class_for_error_type, invalid_body
from agentloop.providers._wire import (
    WireError,
    as_count,
    as_object,
    dumps,
    nonempty_str,
    opt_str,
    wrong,
)
from agentloop.providers.anthropic import _server_tools as server
from agentloop.run import TRUNCATION_REASONS

__all__ = [
    "PROVIDER",
    "REFUSAL",
    "TRUNCATION_REASONS",
    "error_from_body",
    "invalid_reply",
    "parse_response",
    "redacted_part",
    "skipped",
    "thinking_part",
    "usage_from",
]

PROVIDER = "anthropic"
REFUSAL = "refusal"
"""The ``stop_reason`` of a refused reply (raised as ``ModelRefused``)."""

_log = logging.getLogger("agentloop")


def invalid_reply(message: str, body: str = "", request_id: str | None = None) -> ResponseInvalid:
    """The ``ResponseInvalid`` of a reply this adapter cannot use."""
    return invalid_body(f"anthropic: {message}", body, PROVIDER, request_id)


def thinking_part(text: str, signature: str | None, where: str) -> ThinkingPart:
    """A ``thinking`` block as a part; without a signature it cannot go back: ``WireError``."""
    if not signature:
        raise WireError(
            where,
            "a thinking block without a signature cannot be sent back (the API requires it)",
        )
    return ThinkingPart(text, signature=signature, provider=PROVIDER)


def redacted_part(data: str | None, where: str) -> ThinkingPart:
    """A ``redacted_thinking`` block as a part; without ``data`` it is ``WireError``."""
    if not data:
        raise WireError(
            where, "a redacted_thinking block without data cannot be sent back (the API needs it)"
        )
    return ThinkingPart("", signature=data, redacted=True, provider=PROVIDER)


def skipped(kind: str) -> None:
    """A block type agentloop has no part for (see the module docstring) is dropped, visibly."""
    _log.debug("anthropic: skipped a %r content block (agentloop has no part for it)", kind)


_INPUT_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def usage_from(value: object, previous: Usage | None = None, path: str = "usage") -> Usage:
    """Usage from a ``usage`` object; fields it omits keep ``previous``'s counts.

    The three prompt fields travel together: when any is present, the absent ones count 0.
    Anthropic does not report reasoning tokens apart from ``output_tokens`` (thinking is billed
    as output), so ``reasoning_tokens`` stays 0.
    """
    base = previous or Usage()
    if value is None:
        return base
    usage = as_object(value, path)
    output = usage.get("output_tokens")
    outputs = base.output_tokens if output is None else as_count(output, f"{path}.output_tokens")
    prompt = [usage.get(name) for name in _INPUT_FIELDS]
    used = usage.get("server_tool_use")
    calls = base.provider_tool_calls if used is None else server.tool_calls_used(used)
    if all(v is None for v in prompt):
        return Usage(
            base.input_tokens,
            outputs,
            base.cache_read_tokens,
            base.cache_write_tokens,
            provider_tool_calls=calls,
        )
    fresh, write, read = (
        as_count(v, f"{path}.{n}") for v, n in zip(prompt, _INPUT_FIELDS, strict=True)
    )
    return Usage(
        fresh + write + read,
        outputs,
        cache_read_tokens=read,
        cache_write_tokens=write,
        provider_tool_calls=calls,
    )


def _tool_call(block: Mapping[str, Any], path: str, cut: bool) -> ToolCallPart:
    call_id = nonempty_str(block.get("id"), f"{path}.id")
    name = nonempty_str(block.get("name"), f"{path}.name")
    raw = block.get("input")
    if isinstance(raw, dict):
        return ToolCallPart(call_id, name, dict(raw))
    if not cut:
        raise wrong(f"{path}.input", "an object", raw)
    text = raw if isinstance(raw, str) else dumps(raw, f"{path}.input")
    return ToolCallPart(call_id, name, {INVALID_JSON_KEY: text})


def _decode_block(value: object, path: str, cut: bool) -> Part | None:
    block = as_object(value, path)
    kind = block.get("type")
    if kind == "text":
        text = opt_str(block.get("text"), f"{path}.text")
        cited = block.get("citations")
        if cited:
            return TextPart(text or "", citations=server.citations(cited))
        return TextPart(text) if text else None
    if kind == "tool_use":
        return _tool_call(block, path, cut)
    if kind == "thinking":
        text = opt_str(block.get("thinking"), f"{path}.thinking") or ""
        signature = opt_str(block.get("signature"), f"{path}.signature")
        return thinking_part(text, signature, f"{path}.signature")
    if kind == "redacted_thinking":
        return redacted_part(opt_str(block.get("data"), f"{path}.data"), f"{path}.data")
    if kind == "compaction":  # server-side compaction (SPEC 28): kept, sent back as it came
        return ProviderPart(PROVIDER, "compaction", dict(block))
    if server.is_server_block(kind):
        return server.decode_server_block(block)
    skipped(str(kind))
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
        provider=PROVIDER,
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
    stop_reason = opt_str(body.get("stop_reason"), "stop_reason") or None
    cut = stop_reason in TRUNCATION_REASONS
    blocks = (_decode_block(block, f"content[{i}]", cut) for i, block in enumerate(content))
    return ModelResponse(
        message=Message("assistant", tuple(part for part in blocks if part is not None)),
        usage=usage_from(body.get("usage")),
        model=opt_str(body.get("model"), "model") or "",
        stop_reason=stop_reason,
        request_id=request_id or opt_str(body.get("id"), "id"),
        thinking_dropped=dropped_blocks(body),
    )


def dropped_blocks(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """The reply's ``input_transformations`` (the blocks ``drop_block`` dropped), if any."""
    found = body.get("input_transformations")
    if not isinstance(found, list):
        return ()
    return tuple(item for item in found if isinstance(item, Mapping))


def parse_response(data: Any, *, request_id: str | None = None, text: str = "") -> ModelResponse:
    """A ``ModelResponse`` from a non-streaming Messages API reply.

    Raises:
        ModelRefused: The reply's ``stop_reason`` is ``refusal``.
        ProviderError: The body is an error payload (the class its type names).
        ResponseInvalid: The body is not a usable message.
    """
    if isinstance(data, Mapping) and data.get("type") == "error":
        raise error_from_body(data.get("error"), phase=FailurePhase.BODY, request_id=request_id)
    try:
        response = _message(data, request_id)
    except WireError as exc:
        raise invalid_reply(f"the reply is not a message ({exc})", text, request_id) from exc
    if response.stop_reason == REFUSAL:
        raise ModelRefused(REFUSAL, response.text)
    return response
