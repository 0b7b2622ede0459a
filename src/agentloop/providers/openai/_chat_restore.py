"""Replies to a strict schema, read as the original schema means them: the filled nulls dropped.

A model in strict mode must send every property, so for an optional property it means to leave
out it sends ``null`` (the rewrite in ``_chat_strict`` made such properties nullable).
``drop_filled_nulls`` walks the *original* schema beside the value and drops each ``null`` the
rewrite made possible (a property that was optional and did not accept null), so validation sees
the property absent and its default applies, as if strict mode were off. Every other value is
kept as sent, a ``null`` the original schema takes included.

``restore_optional`` applies it to a reply: each tool call against its tool's schema, and the
reply text of native structured output against the output schema (re-encoded only when a null
was dropped). It costs a loop over the reply's parts and, for a flat object without nulls, no
walk at all; the walk runs only where a null could have been filled.

Unions: a value meets the first branch whose properties include all of its keys.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from agentloop.messages import Message, Part, TextPart, ToolCallPart
from agentloop.model import ModelRequest, ModelResponse
from agentloop.providers.openai._chat_strict import Rewriter, StrictSchema, strict_schema

__all__ = ["drop_filled_nulls", "may_restore", "restore", "restore_optional"]

_MAX_VALUE_DEPTH = 64


def _may_hold_null(value: Any) -> bool:
    """Whether a walk could find a null in ``value`` (a plain loop: this runs on every call)."""
    if type(value) is dict:
        for item in value.values():
            if item is None or type(item) is dict or type(item) is list:
                return True
        return False
    return isinstance(value, list)


def restore(strict: StrictSchema, value: Any) -> Any:
    """``value`` as ``strict.original`` means it; ``value`` itself when there is nothing to drop."""
    if strict.rewriter is None or not _may_hold_null(value):
        return value
    return _Restorer(strict.rewriter).walk(strict.original, value, 0)


def drop_filled_nulls(original: Mapping[str, Any], value: Any) -> Any:
    """``value`` without the ``null``s a strict rewrite of ``original`` let the model send.

    A ``null`` is dropped where ``original`` has an optional property that does not take null;
    every other value is kept as sent. Returns ``value`` itself when nothing is dropped.
    """
    return _Restorer(Rewriter(original)).walk(original, value, 0)


class _Restorer:
    """Walks a value beside the original schema it answers (see ``drop_filled_nulls``)."""

    def __init__(self, rewriter: Rewriter) -> None:
        self.rewriter = rewriter

    def resolve(self, node: object) -> Mapping[str, Any] | None:
        for _ in range(8):
            if not isinstance(node, Mapping):
                return None
            ref = node.get("$ref")
            all_of = node.get("allOf")
            if isinstance(ref, str) and ref in self.rewriter.defs:
                node = {**self.rewriter.defs[ref], **{k: v for k, v in node.items() if k != "$ref"}}
            elif ref == "#":
                node = self.rewriter.source
            elif isinstance(all_of, list) and len(all_of) == 1:
                node = {
                    **_mapping_or_empty(all_of[0]),
                    **{k: v for k, v in node.items() if k != "allOf"},
                }
            else:
                return node
        return None

    def walk(self, schema: object, value: Any, depth: int) -> Any:
        node = self.resolve(schema)
        if node is None or depth > _MAX_VALUE_DEPTH:
            return value
        if isinstance(value, dict):
            return self.record(node, value, depth)
        if isinstance(value, list):
            items = next((b.get("items") for b in self.branches(node) if "items" in b), None)
            if items is None:
                return value
            walked = [self.walk(items, v, depth + 1) for v in value]
            return value if all(a is b for a, b in zip(walked, value, strict=True)) else walked
        return value

    def branches(self, node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """``node`` and, for a union, each of its members (resolved)."""
        found = [node]
        for key in ("anyOf", "oneOf"):
            members = node.get(key)
            if isinstance(members, list):
                found.extend(m for m in (self.resolve(b) for b in members) if m is not None)
        return found

    def record(self, node: Mapping[str, Any], value: dict[str, Any], depth: int) -> dict[str, Any]:
        keys = set(value)
        shape = next(
            (
                b
                for b in self.branches(node)
                if isinstance(b.get("properties"), Mapping) and keys <= set(b["properties"])
            ),
            None,
        )
        if shape is None:
            return value
        properties: Mapping[str, Any] = shape["properties"]
        required = shape.get("required")
        was_required = set(required) if isinstance(required, list) else set()
        out: dict[str, Any] = {}
        for key, item in value.items():
            prop = properties[key]
            if item is None and key not in was_required and not self.rewriter.accepts_null(prop):
                continue
            out[key] = self.walk(prop, item, depth + 1)
        changed = len(out) != len(value) or any(out[k] is not value[k] for k in out)
        return out if changed else value


def _mapping_or_empty(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def may_restore(request: ModelRequest) -> bool:
    """Whether ``restore_optional`` may find work in a reply to ``request`` sent strict.

    Only where the strict rewrite of a tool's or the output's schema made a property nullable
    (``StrictSchema.fills``); the client asks once per shape of request, not per reply.
    """
    output = request.output
    if output is not None and strict_schema(output.schema).fills:
        return True
    return any(strict_schema(spec.parameters).fills for spec in request.tools)


def restore_optional(response: ModelResponse, request: ModelRequest) -> ModelResponse:
    """``response`` with the nulls strict mode made the model send for optional properties dropped.

    Tool calls are restored against their tool's original schema, and the reply text (native
    structured output) against the output schema (``StrictSchema.restore``); a reply with
    nothing to restore is returned as is.
    """
    message = response.message
    if not message.tool_calls and (request.output is None or not message.text):
        return response
    parts: list[Part] | None = None
    for index, part in enumerate(message.parts):
        restored = _restored(part, request)
        if restored is not part:
            parts = parts or list(message.parts)
            parts[index] = restored
    if parts is None:
        return response
    return dataclasses.replace(response, message=Message(message.role, tuple(parts)))


def _restored(part: Part, request: ModelRequest) -> Part:
    if isinstance(part, ToolCallPart):
        for spec in request.tools:
            if spec.name == part.name:
                arguments = restore(strict_schema(spec.parameters), part.arguments)
                if arguments is not part.arguments:
                    return ToolCallPart(part.id, part.name, arguments)
                break
        return part
    if isinstance(part, TextPart) and request.output is not None:
        rewritten = strict_schema(request.output.schema)
        if not rewritten.fills:
            return part
        try:
            value = json.loads(part.text)
        except (ValueError, RecursionError):
            return part  # not JSON: the engine's output validation says so to the model
        restored = restore(rewritten, value)
        if restored is not value:
            return TextPart(json.dumps(restored, ensure_ascii=False))
    return part
