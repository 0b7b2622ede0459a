"""The Anthropic twin's server tools (SPEC 24, provider-rules "Anthropic Messages: server tools").

Replies: ``server_tool_use(name, input)``, ``web_search_result(call_id, results)`` (each result
with an opaque ``encrypted_content`` the twin makes up), ``search_error(call_id, code)``,
``code_result(call_id, stdout)`` and ``cited_text(text, url, title)`` (a text block with a
``web_search_result_location`` citation and its ``encrypted_index``). A reply whose
``stop_reason`` is ``pause_turn`` is a paused turn.

Rules enforced, each with the API's error shape (400 ``invalid_request_error``):

- A server tool block sent back must be one the twin served, byte for byte (``cache_control``
  aside): an altered ``encrypted_content``/``encrypted_index`` or input is refused.
- A citation sent back on a text block is one the twin served (its ``encrypted_index``).
- The server blocks of one served reply go back together, in their order, in one assistant
  message: a ``server_tool_use`` whose result vanished is refused (the API's wording for it).

The API keeps no state, so a ``pause_turn`` continuation is the test's to check (the next
request ends with that assistant content): the twin only records the paused content.
- A server tool's declaration: a known versioned ``type`` with its fixed ``name``,
  ``allowed_domains`` and ``blocked_domains`` not together, ``web_fetch``/``code_execution``
  only with their beta header.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .anthropic_tool_search import SEARCH_TOOL_TYPES

TOOL_TYPES = {
    "web_search_20250305": ("web_search", None),
    "web_fetch_20250910": ("web_fetch", "web-fetch-2025-09-10"),
    "code_execution_20250825": ("code_execution", "code-execution-2025-08-25"),
    **SEARCH_TOOL_TYPES,  # the tool search tool (its own rules: anthropic_tool_search)
}
VANISHED = (
    "messages.{i}.content.{j}: `server_tool_use` block with id `{id}` was found without a "
    "corresponding `{name}_tool_result` block"
)  # approximated from the API's tool_use/tool_result wording
ALTERED = "messages.{i}.content.{j}: Invalid `encrypted_content` in `{kind}` block"
BAD_CITATION = "messages.{i}.content.{j}.citations.{k}: Invalid `encrypted_index`"  # approximated
UNKNOWN_ID = "messages.{i}.content.{j}: unexpected `tool_use_id` found in `{kind}` blocks: {id}"
BOTH_FILTERS = "tools.{k}: cannot specify both allowed_domains and blocked_domains"
BAD_NAME = "tools.{k}.name: Input should be '{name}'"
# approximated:
NO_BETA = "tools.{k}: The tool type '{type}' requires the beta header anthropic-beta: {beta}"


def server_tool_use(name: str, arguments: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """A ``server_tool_use`` block (the provider's own call)."""
    return {"type": "server_tool_use", "id": call_id, "name": name, "input": dict(arguments)}


def _secret(*parts: str) -> str:
    return "Eq" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:40]


def web_search_result(call_id: str, results: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """A ``web_search_tool_result`` of ``(url, title)`` pairs, each with encrypted content."""
    content = [
        {"type": "web_search_result", "url": url, "title": title, "page_age": "2 days ago",
         "encrypted_content": _secret(call_id, url)}
        for url, title in results
    ]  # fmt: skip
    return {"type": "web_search_tool_result", "tool_use_id": call_id, "content": content}


def search_error(call_id: str, code: str) -> dict[str, Any]:
    """A ``web_search_tool_result`` that failed (``max_uses_exceeded``...)."""
    error = {"type": "web_search_tool_result_error", "error_code": code}
    return {"type": "web_search_tool_result", "tool_use_id": call_id, "content": error}


def code_result(call_id: str, stdout: str) -> dict[str, Any]:
    """A ``bash_code_execution_tool_result`` that printed ``stdout``."""
    content = {"type": "bash_code_execution_result", "stdout": stdout, "stderr": "",
               "return_code": 0, "content": []}  # fmt: skip
    return {"type": "bash_code_execution_tool_result", "tool_use_id": call_id, "content": content}


def cited_text(value: str, url: str, title: str) -> dict[str, Any]:
    """A text block citing ``url`` (a ``web_search_result_location``)."""
    citation = {"type": "web_search_result_location", "url": url, "title": title,
                "cited_text": value[:40], "encrypted_index": _secret("index", url)}  # fmt: skip
    return {"type": "text", "text": value, "citations": [citation]}


def is_server(block: Mapping[str, Any]) -> bool:
    """A server tool block (a call or a result)."""
    kind = str(block.get("type"))
    return kind == "server_tool_use" or (kind.endswith("_tool_result") and kind != "tool_result")


def _key(block: Mapping[str, Any]) -> str:
    return f"{block.get('type')}:{block.get('id') or block.get('tool_use_id')}"


def _bare(block: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


@dataclass
class ServerBlocks:
    """What the twin served: every server block by key, and each reply's blocks in order."""

    served: dict[str, dict[str, Any]] = field(default_factory=dict)
    citations: list[dict[str, Any]] = field(default_factory=list)
    replies: list[list[str]] = field(default_factory=list)
    paused: list[dict[str, Any]] | None = None
    """The content of the last reply when it was a ``pause_turn``."""

    def issue(self, blocks: Sequence[Mapping[str, Any]], stop_reason: str) -> None:
        keys = [_key(b) for b in blocks if is_server(b)]
        for block in blocks:
            if is_server(block):
                self.served[_key(block)] = dict(block)
            self.citations += [dict(c) for c in block.get("citations") or ()]
        if keys:
            self.replies.append(keys)
        self.paused = [dict(b) for b in blocks] if stop_reason == "pause_turn" else None

    def violation(self, body: Mapping[str, Any], betas: str) -> str | None:
        """The API's message for the first server-tool rule ``body`` breaks, or None."""
        return _declarations(body, betas) or self._blocks(body)

    def _blocks(self, body: Mapping[str, Any]) -> str | None:
        for i, message in enumerate(body.get("messages") or []):
            content = message.get("content")
            if message.get("role") != "assistant" or not isinstance(content, list):
                continue
            found = self._message(i, content)
            if found:
                return found
        return None

    def _message(self, i: int, content: list[Mapping[str, Any]]) -> str | None:
        keys = []
        for j, block in enumerate(content):
            for k, citation in enumerate(block.get("citations") or ()):
                if citation not in self.citations:
                    return BAD_CITATION.format(i=i, j=j, k=k)
            if not is_server(block):
                continue
            served = self.served.get(_key(block))
            kind = str(block.get("type"))
            if served is None:
                return UNKNOWN_ID.format(i=i, j=j, kind=kind, id=_key(block).split(":")[1])
            if _bare(block) != served:
                return ALTERED.format(i=i, j=j, kind=kind)
            keys.append(_key(block))
        for reply in self.replies:
            mine = [k for k in keys if k in reply]
            if mine and mine != reply:
                return _vanished(i, content, reply, mine)
        return None


def _vanished(i: int, content: list[Mapping[str, Any]], reply: list[str], sent: list[str]) -> str:
    missing = next(k for k in reply if k not in sent)
    call_id = missing.split(":", 1)[1]
    for j, block in enumerate(content):
        if block.get("type") == "server_tool_use" and block.get("id") == call_id:
            return VANISHED.format(i=i, j=j, id=call_id, name=block.get("name"))
    return VANISHED.format(i=i, j=0, id=call_id, name="web_search")


def _declarations(body: Mapping[str, Any], betas: str) -> str | None:
    for k, tool in _server_tools(body):
        name, beta = TOOL_TYPES[tool["type"]]
        if tool.get("name") != name:
            return BAD_NAME.format(k=k, name=name)
        if tool.get("allowed_domains") and tool.get("blocked_domains"):
            return BOTH_FILTERS.format(k=k)
        if beta is not None and beta not in betas:
            return NO_BETA.format(k=k, type=tool["type"], beta=beta)
    return None


def _server_tools(body: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for k, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, Mapping) and tool.get("type") in TOOL_TYPES:
            yield k, tool
