"""What the fake server's provider ran itself, and the rule that it comes back unchanged (SPEC 24).

A reply with ``web_search`` queries hands the client server-tool blocks (Anthropic
``server_tool_use`` and ``web_search_tool_result``, a Responses ``web_search_call``). The
providers reject a later turn whose blocks changed or vanished, so the server does too, with
their error shapes: Anthropic a 400 ``invalid_request_error`` naming the block, the Responses
API a 404 for an item it cannot find (``store: false`` keeps nothing on its side).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agentloop.testing import fake_wire as wire
from agentloop.testing.fake_tool_search import check_tool_search, result_type

__all__ = ["Ledger"]

_ALTERED = "messages.{i}.content.{j}: Invalid `encrypted_content` in `{kind}` block"
_VANISHED = (
    "messages.{i}.content.{j}: `server_tool_use` block with id `{id}` was found without a "
    "corresponding `{name}_tool_result` block"
)
_NOT_FOUND = (
    "Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try "
    "again with `store` set to true, or remove this item from your input."
)


def _server(block: Mapping[str, Any]) -> bool:
    kind = str(block.get("type"))
    return kind == "server_tool_use" or (kind.endswith("_tool_result") and kind != "tool_result")


def _key(block: Mapping[str, Any]) -> str:
    return f"{block.get('type')}:{block.get('id') or block.get('tool_use_id')}"


def _bare(block: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _assistant_blocks(body: Mapping[str, Any]) -> Iterator[tuple[int, list[Mapping[str, Any]]]]:
    for i, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, Mapping) else None
        if message.get("role") == "assistant" and isinstance(content, list):
            yield i, [b for b in content if isinstance(b, Mapping)]


class Ledger:
    """The server blocks and items served, by key; ``check`` a later request against them."""

    def __init__(self) -> None:
        self.served: dict[str, dict[str, Any]] = {}

    def issue(self, wire_name: str, reply: Any, ident: str) -> None:
        """Remember what ``reply`` hands out under ``ident``."""
        if not reply.web_search and not reply.tool_search:
            return
        if wire_name == "anthropic":
            for block in wire.anthropic_searches(reply, ident):
                self.served[_key(block)] = block
        elif wire_name == "responses":
            for item in wire.responses_searches(reply, ident):
                self.served[f"item:{item['id']}"] = item

    def check(self, wire_name: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The provider's error for a changed or lost block (status and body), else None."""
        if wire_name == "anthropic":  # native tool search's rules hold for every request
            rule = check_tool_search(body)
            if rule is not None:
                return 400, wire.anthropic_error("invalid_request_error", rule)
        if not self.served:
            return None
        if wire_name == "anthropic":
            problem = self._anthropic(body)
            if problem is not None:
                return 400, wire.anthropic_error("invalid_request_error", problem)
        elif wire_name == "responses":
            for item in body.get("input") or ():
                kind = str(item.get("type")) if isinstance(item, Mapping) else ""
                if kind.endswith("_call") and kind != "function_call":
                    if self.served.get(f"item:{item.get('id')}") != dict(item):
                        message = _NOT_FOUND.format(id=item.get("id"))
                        return 404, wire.openai_error(message, None)
        return None

    def _anthropic(self, body: Mapping[str, Any]) -> str | None:
        for i, blocks in _assistant_blocks(body):
            keys = set()
            for j, block in enumerate(blocks):
                if not _server(block):
                    continue
                if self.served.get(_key(block)) != _bare(block):
                    return _ALTERED.format(i=i, j=j, kind=block.get("type"))
                keys.add(_key(block))
            for j, block in enumerate(blocks):
                if block.get("type") == "server_tool_use":
                    name = block.get("name")
                    if f"{result_type(name)}:{block.get('id')}" not in keys:
                        return _VANISHED.format(i=i, j=j, id=block.get("id"), name=name)
        return None
