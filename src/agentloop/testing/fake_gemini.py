"""Gemini's ``generateContent`` wire for the fake server (Gemini API and Gemini on Vertex AI).

Pure functions from a ``FakeReply`` to a ``generateContent`` body and to the SSE chunks of
``streamGenerateContent?alt=sse``: text, a thought (``thought: true``) when the reply has
``thinking``, ``functionCall`` parts (the first signed with ``thoughtSignature``, as Gemini 3
does), and a last chunk carrying ``finishReason`` and ``usageMetadata`` (the end a truncation
fault cuts away). No I/O; ``fake_server`` serves them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentloop.testing.fake_wire import WireFormat, _pieces, _Reply

__all__ = ["FORMAT", "gemini_body", "gemini_chunks"]


def _finish(reply: _Reply) -> str:
    if reply.refusal is not None:
        return "SAFETY"
    return {"length": "MAX_TOKENS"}.get(reply.finish, "STOP")


def _parts(reply: _Reply, ident: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if reply.thinking:
        parts.append({"text": reply.thinking, "thought": True})
    if reply.text:
        parts.append({"text": reply.text})
    for n, call in enumerate(reply.tool_calls):
        arguments = call.arguments if isinstance(call.arguments, Mapping) else {}
        part: dict[str, Any] = {"functionCall": {"name": call.name, "args": dict(arguments)}}
        if n == 0:
            part["thoughtSignature"] = reply.thinking_signature or f"sig_{ident}"
        parts.append(part)
    return parts


def _usage(reply: _Reply) -> dict[str, int]:
    return {
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": reply.output_tokens,
        "totalTokenCount": reply.input_tokens + reply.output_tokens,
    }


def _chunk(ident: str, model: str, parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    candidate.update(extra.pop("candidate", {}))
    return {"candidates": [candidate], "modelVersion": model, "responseId": ident, **extra}


def gemini_body(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> dict[str, Any]:
    """The ``generateContent`` body of ``reply``."""
    finish = {"finishReason": _finish(reply)}
    return _chunk(ident, model, _parts(reply, ident), candidate=finish, usageMetadata=_usage(reply))


def _sse(data: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\r\n\r\n".encode()


def gemini_chunks(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> list[bytes]:
    """The stream's chunks of ``reply`` before the finishing one (texts in pieces)."""
    chunks = []
    for part in _parts(reply, ident):
        if "text" in part:
            chunks += [
                _sse(_chunk(ident, model, [{**part, "text": p}])) for p in _pieces(part["text"])
            ]
        else:
            chunks.append(_sse(_chunk(ident, model, [part])))
    return chunks


def gemini_end(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> bytes:
    """The finishing chunk: an empty text with ``finishReason`` and the usage."""
    finish = {"finishReason": _finish(reply)}
    return _sse(_chunk(ident, model, [{"text": ""}], candidate=finish, usageMetadata=_usage(reply)))


FORMAT = WireFormat("fake-resp-", gemini_body, gemini_chunks, gemini_end, b"data: {\r\n\r\n")
"""The ``generateContent`` wire (Gemini API and Vertex AI's ``publishers/google``)."""
