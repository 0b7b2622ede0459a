"""The wire formats the fake server speaks: OpenAI Chat Completions and Anthropic Messages.

Pure functions from a ``FakeReply`` to bytes or JSON-ready dicts (no I/O), so the server module
holds only the serving: a body for a non-streamed answer, the SSE chunks of a streamed one
(without the terminator, so a truncation fault can cut them), and the error bodies of each
provider family.

The lowest of the fake server's modules: it reads a reply through the ``_Reply`` protocol, so it
imports none of its siblings (``fake_steps`` imports it for the error bodies).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

OPENAI_DONE = b"data: [DONE]\n\n"


class _ToolCall(Protocol):
    """What the wire reads of a ``FakeToolCall``."""

    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> Mapping[str, Any] | str: ...
    def raw_arguments(self) -> str: ...


class _Reply(Protocol):
    """What the wire reads of a ``FakeReply``."""

    @property
    def text(self) -> str: ...
    @property
    def tool_calls(self) -> Sequence[_ToolCall]: ...
    @property
    def finish(self) -> str: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...


def openai_error(
    message: str, code: str | None, kind: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """An OpenAI error object: ``{"error": {"message", "type", "code", "param"}}``.

    ``kind`` (the ``type``) defaults to OpenAI's for ``code``: ``insufficient_quota`` for that
    code, ``invalid_request_error`` for any other.
    """
    if kind is None:
        kind = "insufficient_quota" if code == "insufficient_quota" else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "code": code, "param": param}}


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """An Anthropic error object: ``{"type": "error", "error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_stop_event() -> bytes:
    """The ``message_stop`` event that ends an Anthropic stream."""
    return sse("message_stop", {"type": "message_stop"})


def _chunk(ident: str, model: str, choices: list[dict[str, Any]], **extra: Any) -> bytes:
    data = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _delta(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
    return [{"index": 0, "delta": delta, "finish_reason": finish}]


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_chunks(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> list[bytes]:
    """The SSE chunks of ``reply`` (without the final ``[DONE]``)."""
    chunks = [_chunk(ident, model, _delta({"role": "assistant", "content": ""}))]
    chunks += [_chunk(ident, model, _delta({"content": p})) for p in _pieces(reply.text)]
    for index, (call, call_id) in enumerate(zip(reply.tool_calls, call_ids, strict=True)):
        head = {"index": index, "id": call_id, "type": "function"}
        head["function"] = {"name": call.name, "arguments": ""}
        chunks.append(_chunk(ident, model, _delta({"tool_calls": [head]})))
        for piece in _pieces(call.raw_arguments()):
            part = {"index": index, "function": {"arguments": piece}}
            chunks.append(_chunk(ident, model, _delta({"tool_calls": [part]})))
    chunks.append(_chunk(ident, model, _delta({}, reply.finish)))
    usage = {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }
    chunks.append(_chunk(ident, model, [], usage=usage))
    return chunks


def completion_body(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> dict[str, Any]:
    """The non-streaming Chat Completions body of ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.raw_arguments()},
            }
            for call, call_id in zip(reply.tool_calls, call_ids, strict=True)
        ]
    return {
        "id": ident,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish}],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def sse(event: str, data: Mapping[str, Any]) -> bytes:
    """One SSE event with a JSON ``data`` line."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _anthropic_stop(reply: _Reply) -> str:
    mapping = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
    return mapping.get(reply.finish, reply.finish)


def anthropic_body(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> dict[str, Any]:
    """The non-streaming Anthropic Messages body of ``reply``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for call, call_id in zip(reply.tool_calls, call_ids, strict=True):
        arguments = call.arguments if isinstance(call.arguments, Mapping) else {}
        content.append(
            {"type": "tool_use", "id": call_id, "name": call.name, "input": dict(arguments)}
        )
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _anthropic_stop(reply),
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


def anthropic_events(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> list[bytes]:
    """The Anthropic Messages SSE events of ``reply`` (without the final ``message_stop``)."""
    start: dict[str, Any] = {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": 0},
    }
    events = [sse("message_start", {"type": "message_start", "message": start})]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if reply.text:
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(reply.text)]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for call, call_id in zip(reply.tool_calls, call_ids, strict=True):
        head = {"type": "tool_use", "id": call_id, "name": call.name, "input": {}}
        parts = [
            {"type": "input_json_delta", "partial_json": p} for p in _pieces(call.raw_arguments())
        ]
        blocks.append((head, parts))
    for index, (head, deltas) in enumerate(blocks):
        events.append(
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": head},
            )
        )
        events += [
            sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": _anthropic_stop(reply), "stop_sequence": None}
    usage = {"output_tokens": reply.output_tokens}
    events.append(sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    return events
