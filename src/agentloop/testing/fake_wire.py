"""The wire formats the fake server speaks: OpenAI Chat Completions and Responses, Anthropic.

Pure functions from a ``FakeReply`` to bytes or JSON-ready dicts (no I/O), so the server module
holds only the serving: a body for a non-streamed answer, the SSE chunks of a streamed one
(without the terminal event, so a truncation fault can cut them), the terminal event, and the
error bodies of each provider family. ``FORMATS`` names the three for the server.

The lowest of the fake server's modules: it reads a reply through the ``_Reply`` protocol, so it
imports none of its siblings (``fake_steps`` imports it for the error bodies).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from agentloop._util.slots import record
from agentloop.testing.fake_tool_search import anthropic_search_blocks, responses_search_items

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
    @property
    def thinking(self) -> str | None: ...
    @property
    def thinking_signature(self) -> str | None: ...
    @property
    def refusal(self) -> str | None: ...
    @property
    def web_search(self) -> Sequence[str]: ...
    @property
    def tool_search(self) -> Mapping[str, Any] | None: ...


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
    thinking = _pieces(reply.thinking or "")
    chunks += [_chunk(ident, model, _delta({"reasoning_content": p})) for p in thinking]
    chunks += [_chunk(ident, model, _delta({"content": p})) for p in _pieces(reply.text)]
    refusal = _pieces(reply.refusal or "")
    chunks += [_chunk(ident, model, _delta({"refusal": p})) for p in refusal]
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
    if reply.thinking is not None:
        message["reasoning_content"] = reply.thinking
    if reply.refusal is not None:
        message["refusal"] = reply.refusal
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
    if reply.refusal is not None:
        return "refusal"
    mapping = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
    return mapping.get(reply.finish, reply.finish)


def _signature(reply: _Reply, ident: str) -> str:
    return reply.thinking_signature or f"sig_{ident}"


def _anthropic_texts(reply: _Reply) -> list[str]:
    """The text blocks: the reply's text, then a refusal's words."""
    return [t for t in (reply.text, reply.refusal) if t]


def _search_url(query: str) -> str:
    return "https://example.com/search?q=" + "+".join(query.split())


def anthropic_searches(reply: _Reply, ident: str) -> list[dict[str, Any]]:
    """The server tool blocks of ``reply.web_search``: a call and its result per query (SPEC 24)."""
    blocks: list[dict[str, Any]] = []
    for i, query in enumerate(reply.web_search):
        call_id = f"srvtoolu_{ident}_{i}"
        found = {"type": "web_search_result", "url": _search_url(query), "title": query,
                 "page_age": None, "encrypted_content": f"enc_{ident}_{i}"}  # fmt: skip
        blocks.append({"type": "server_tool_use", "id": call_id, "name": "web_search",
                       "input": {"query": query}})  # fmt: skip
        blocks.append({"type": "web_search_tool_result", "tool_use_id": call_id,
                       "content": [found]})  # fmt: skip
    return anthropic_search_blocks(reply.tool_search, ident) + blocks


def _anthropic_usage(reply: _Reply, inputs: int) -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": inputs, "output_tokens": reply.output_tokens}
    if reply.web_search:
        usage["server_tool_use"] = {"web_search_requests": len(reply.web_search)}
    return usage


def responses_searches(reply: _Reply, ident: str) -> list[dict[str, Any]]:
    """A ``web_search_call`` item per query of ``reply.web_search`` (SPEC 24)."""
    return responses_search_items(reply.tool_search, ident) + [
        {"type": "web_search_call", "id": f"ws_{ident}_{i}", "status": "completed",
         "action": {"type": "search", "query": query}}
        for i, query in enumerate(reply.web_search)
    ]  # fmt: skip


def anthropic_body(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> dict[str, Any]:
    """The non-streaming Anthropic Messages body of ``reply``."""
    content: list[dict[str, Any]] = []
    if reply.thinking is not None:
        thinking = {"type": "thinking", "thinking": reply.thinking}
        content.append({**thinking, "signature": _signature(reply, ident)})
    content += anthropic_searches(reply, ident)
    content += [{"type": "text", "text": text} for text in _anthropic_texts(reply)]
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
        "usage": _anthropic_usage(reply, reply.input_tokens),
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
    if reply.thinking is not None:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(reply.thinking)]
        deltas.append({"type": "signature_delta", "signature": _signature(reply, ident)})
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
    for block in anthropic_searches(reply, ident):
        if block["type"] == "server_tool_use":
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw)]
            blocks.append(({**block, "input": {}}, deltas))
        else:
            blocks.append((block, []))
    for text in _anthropic_texts(reply):
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(text)]
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
    usage = {k: v for k, v in _anthropic_usage(reply, 0).items() if k != "input_tokens"}
    events.append(sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    return events


def _responses_items(reply: _Reply, ident: str, call_ids: list[str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.thinking is not None:
        summary = [{"type": "summary_text", "text": reply.thinking}] if reply.thinking else []
        items.append(
            {
                "type": "reasoning",
                "id": f"rs_{ident}",
                "summary": summary,
                "encrypted_content": reply.thinking_signature or f"enc_{ident}",
            }
        )
    items += responses_searches(reply, ident)
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "output_text", "text": reply.text, "annotations": []})
    if reply.refusal is not None:
        content.append({"type": "refusal", "refusal": reply.refusal})
    if content:
        message = {"type": "message", "id": f"msg_{ident}", "role": "assistant"}
        items.append({**message, "status": "completed", "content": content})
    for index, (call, call_id) in enumerate(zip(reply.tool_calls, call_ids, strict=True)):
        function = {"type": "function_call", "id": f"fc_{ident}_{index}", "call_id": call_id}
        arguments = {"name": call.name, "arguments": call.raw_arguments()}
        items.append({**function, **arguments, "status": "completed"})
    return items


_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def responses_body(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> dict[str, Any]:
    """The non-streaming Responses API body of ``reply`` (``length`` -> incomplete)."""
    reason = _INCOMPLETE.get(reply.finish)
    return {
        "id": ident,
        "object": "response",
        "created_at": 0,
        "status": "incomplete" if reason else "completed",
        "model": model,
        "output": _responses_items(reply, ident, call_ids),
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "store": False,
        "usage": {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _responses_deltas(item: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    """The delta events of one output item (its text, summary or arguments in pieces)."""
    base = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "reasoning":
        return [
            {
                "type": "response.reasoning_summary_text.delta",
                **base,
                "summary_index": s,
                "delta": p,
            }
            for s, part in enumerate(item["summary"])
            for p in _pieces(part["text"])
        ]
    if kind == "function_call":
        return [
            {"type": "response.function_call_arguments.delta", **base, "delta": p}
            for p in _pieces(item["arguments"])
        ]
    if kind in ("web_search_call", "tool_search_call", "tool_search_output"):
        return []
    return [
        {"type": f"response.{part['type']}.delta", **base, "content_index": c, "delta": p}
        for c, part in enumerate(item["content"])
        for p in _pieces(part.get("text") or part.get("refusal") or "")
    ]


_OPENED: Mapping[str, Mapping[str, Any]] = {
    "reasoning": {"summary": []},
    "message": {"content": []},
    "function_call": {},
    "web_search_call": {},
    "tool_search_call": {},
    "tool_search_output": {},
}


def responses_events(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> list[bytes]:
    """The Responses API SSE events of ``reply`` (without the terminal ``response.*`` event)."""
    body = responses_body(reply, model, ident, call_ids)
    head = {**body, "status": "in_progress", "output": [], "usage": None}
    head["incomplete_details"] = None
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": head},
        {"type": "response.in_progress", "response": head},
    ]
    for index, item in enumerate(body["output"]):
        opened = {**item, **_OPENED[item["type"]], "status": "in_progress"}
        events.append({"type": "response.output_item.added", "output_index": index, "item": opened})
        events += _responses_deltas(item, index)
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return [sse(e["type"], {**e, "sequence_number": n}) for n, e in enumerate(events)]


def responses_end(reply: _Reply, model: str, ident: str, call_ids: list[str]) -> bytes:
    """The terminal event: ``response.completed`` (``response.incomplete`` when cut)."""
    body = responses_body(reply, model, ident, call_ids)
    kind = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    return sse(kind, {"type": kind, "response": body, "sequence_number": 999_999})


Builder = Callable[[Any, str, str, list[str]], Any]


@record
class WireFormat:
    """One API the server speaks: its body, its stream (cut-able) and the stream's end."""

    id_prefix: str
    body: Builder
    events: Builder
    end: Builder
    malformed: bytes
    content_type: str = "text/event-stream"


FORMATS: Mapping[str, WireFormat] = {
    "chat": WireFormat(
        "chatcmpl-fake",
        completion_body,
        stream_chunks,
        lambda *_: OPENAI_DONE,
        b'data: {"choices": [\n\n' + OPENAI_DONE,
    ),
    "anthropic": WireFormat(
        "msg_fake",
        anthropic_body,
        anthropic_events,
        lambda *_: anthropic_stop_event(),
        b'event: message_start\ndata: {"type": \n\n',
    ),
    "responses": WireFormat(
        "resp_fake",
        responses_body,
        responses_events,
        responses_end,
        b'event: response.created\ndata: {"type": \n\n',
    ),
}
"""The wire formats by name (``chat``, ``anthropic``, ``responses``)."""
