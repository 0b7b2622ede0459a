"""Bedrock's Converse wire for the fake server and the twins: bodies and AWS event streams.

``ConverseStream`` answers in the AWS event-stream encoding (``application/vnd.amazon.
eventstream``): binary frames of a prelude (total and headers lengths, CRC32), typed headers
(``:message-type``, ``:event-type``, ``:content-type``), a JSON payload and a CRC32 of the whole
frame. ``frame`` writes one exactly as AWS does, so botocore's decoder (which checks both CRCs)
reads it as it reads Bedrock's; ``exception_frame`` writes a mid-stream AWS exception
(``throttlingException``...). Pure functions, no I/O; ``fake_server`` serves them.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from typing import Any

from agentloop.testing.fake_wire import WireFormat, _pieces, _Reply

__all__ = [
    "FORMAT",
    "converse_body",
    "converse_events",
    "exception_frame",
    "frame",
    "stop_reason",
]

_STRING = 7
"""The header value type of a string (the only one these frames use)."""


def frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One AWS event-stream frame: prelude, prelude CRC, string headers, payload, frame CRC."""
    encoded = b"".join(
        struct.pack("!B", len(name.encode()))
        + name.encode()
        + struct.pack("!BH", _STRING, len(value.encode()))
        + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    head = prelude + struct.pack("!I", zlib.crc32(prelude) & 0xFFFFFFFF)
    body = head + encoded + payload
    return body + struct.pack("!I", zlib.crc32(body) & 0xFFFFFFFF)


def event_frame(event: str, data: Mapping[str, Any]) -> bytes:
    """An ``:message-type: event`` frame (``messageStart``, ``contentBlockDelta``...)."""
    payload = {**data, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGH"[: 4 + len(event) % 20]}
    headers = {
        ":event-type": event,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return frame(headers, json.dumps(payload, separators=(",", ":")).encode())


def exception_frame(kind: str, message: str) -> bytes:
    """A mid-stream AWS exception (``kind``: ``throttlingException``, ...)."""
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps({"message": message}).encode())


def stop_reason(reply: _Reply) -> str:
    """The Converse ``stopReason`` of ``reply``."""
    if reply.refusal is not None:
        return "content_filtered"
    mapping = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
    return mapping.get(reply.finish, reply.finish)


def _usage(reply: _Reply) -> dict[str, int]:
    total = reply.input_tokens + reply.output_tokens
    return {
        "inputTokens": reply.input_tokens,
        "outputTokens": reply.output_tokens,
        "totalTokens": total,
    }


def _content(reply: _Reply, ident: str, call_ids: list[str]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if reply.thinking is not None:
        signature = reply.thinking_signature or f"sig_{ident}"
        text = {"text": reply.thinking, "signature": signature}
        content.append({"reasoningContent": {"reasoningText": text}})
    content += [{"text": t} for t in (reply.text, reply.refusal) if t]
    for call, call_id in zip(reply.tool_calls, call_ids, strict=True):
        arguments = call.arguments if isinstance(call.arguments, Mapping) else {}
        use = {"toolUseId": call_id, "name": call.name, "input": dict(arguments)}
        content.append({"toolUse": use})
    return content


def converse_body(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> dict[str, Any]:
    """The ``Converse`` body of ``reply``."""
    message = {"role": "assistant", "content": _content(reply, ident, call_ids)}
    return {
        "output": {"message": message},
        "stopReason": stop_reason(reply),
        "usage": _usage(reply),
        "metrics": {"latencyMs": 1},
    }


def _block_frames(index: int, block: Mapping[str, Any], raw: str) -> list[bytes]:
    frames: list[bytes] = []
    where = {"contentBlockIndex": index}
    deltas: list[dict[str, Any]]
    if "toolUse" in block:
        use = block["toolUse"]
        start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
        frames.append(event_frame("contentBlockStart", {**where, "start": start}))
        deltas = [{"toolUse": {"input": p}} for p in _pieces(raw)]
    elif "reasoningContent" in block:
        text = block["reasoningContent"]["reasoningText"]
        deltas = [{"reasoningContent": {"text": p}} for p in _pieces(text["text"])]
        deltas.append({"reasoningContent": {"signature": text["signature"]}})
    else:
        deltas = [{"text": p} for p in _pieces(block["text"])]
    frames += [event_frame("contentBlockDelta", {**where, "delta": d}) for d in deltas]
    frames.append(event_frame("contentBlockStop", where))
    return frames


def converse_events(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> list[bytes]:
    """The ``ConverseStream`` frames of ``reply``, without the final ``metadata``."""
    frames = [event_frame("messageStart", {"role": "assistant"})]
    raws = iter(call.raw_arguments() for call in reply.tool_calls)
    for index, block in enumerate(_content(reply, ident, call_ids)):
        raw = next(raws) if "toolUse" in block else ""
        frames += _block_frames(index, block, raw)
    frames.append(event_frame("messageStop", {"stopReason": stop_reason(reply)}))
    return frames


def converse_end(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> bytes:
    """The last frame of a stream: ``metadata`` with the usage."""
    return event_frame("metadata", {"usage": _usage(reply), "metrics": {"latencyMs": 1}})


FORMAT = WireFormat(
    "converse_fake",
    converse_body,
    converse_events,
    converse_end,
    frame({":message-type": "event", ":event-type": "messageStart"}, b'{"role": '),
    content_type="application/vnd.amazon.eventstream",
)
"""The Converse wire (the fake server's ``/model/{id}/converse`` and ``converse-stream``)."""
