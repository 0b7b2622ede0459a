"""The Anthropic twin's late-2026 conversation rules: bound thinking and mid-conversation system.

provider-rules.md, "Anthropic, late 2026":

1. **Prefix check** on an append-only model (Fable/Mythos 5.1 and 5.2, Opus/Sonnet/Haiku 5.5
   and later names): every thinking block the twin serves is bound to a hash of everything
   before it (``system``, ``tools``, the request's messages and the reply's blocks before it,
   ``cache_control`` left out, as the API ignores breakpoints). A later request that sends the
   block back after any of that changed, or that left out or moved a block before it, is the
   documented 400 (``PREFIX_MISMATCH``), unless the request asks for
   ``block_binding.prefix_mismatch_behavior: "drop_block"`` with its beta header: then the
   block is dropped and listed in the reply's ``input_transformations`` (rule 3). A block
   another model wrote is dropped silently (rule 5): never an error.
8. **Server-side compaction**: ``context_management`` with a ``compact_20260112`` edit needs
   its beta header and a trigger of at least 50,000 tokens; a reply may open with a
   ``compaction`` block (``compaction()``), which later requests send back in place.
6. **Mid-conversation system messages**: a ``{"role": "system"}`` message inside ``messages``
   only on the models that take them (Fable/Mythos 5 and 5.1, Opus 4.8/5/5.5, Sonnet/Haiku 5.5;
   not Sonnet 5, not undocumented 5.2), and only just before an assistant turn or at the end;
   ``tool_addition``/``tool_removal`` blocks only with the tool-changes beta, by value only with
   the inline-tools beta, by name only for a tool in ``tools``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PREFIX_MISMATCH = (
    "messages.{i}.content.{j}: Invalid `signature` in `thinking` block. The block is bound to a"
    " different conversation. Remove the block, or set"
    ' `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
)
SYSTEM_ROLE = "messages.{i}.role: Input should be 'user' or 'assistant'"
SYSTEM_PLACE = "messages.{i}: role 'system' must precede an 'assistant' message or end the messages"
TOOL_CHANGES_BETA = "mid-conversation-tool-changes-2026-07-01"
INLINE_TOOLS_BETA = "inline-tools-2026-09-15"
BINDING_BETA = "thinking-binding-controls-2026-08-01"
NEEDS_BETA = "messages.{i}.content.{j}: `{kind}` blocks require the `anthropic-beta: {beta}` header"
UNKNOWN_TOOL = "messages.{i}.content.{j}: tool `{name}` is not defined in `tools`"
BINDING_NEEDS_BETA = f"thinking.block_binding requires the `anthropic-beta: {BINDING_BETA}` header"

APPEND_ONLY = re.compile(
    r"claude-((fable|mythos)-5-[1-9]\d*|(opus|sonnet|haiku)-5-[1-9]\d*|[a-z]+-([6-9]|\d{2,}))(\D.*)?"
)
MID_SYSTEM = re.compile(
    r"claude-((fable|mythos)-5(-1)?|opus-4-[89]|opus-5(-5)?|(sonnet|haiku)-5-5)(-\d{8})?"
)


def _bare(value: Any) -> Any:
    """``value`` without ``cache_control`` anywhere (breakpoints are not content)."""
    if isinstance(value, Mapping):
        return {k: _bare(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_bare(v) for v in value]
    return value


def _system_blocks(body: Mapping[str, Any]) -> Any:
    system = body.get("system")
    if isinstance(system, str):
        return [{"type": "text", "text": system}]
    return _bare(system or [])


def prefix_hash(body: Mapping[str, Any], messages: Sequence[Any], before: Sequence[Any]) -> str:
    """The hash a thinking block is bound to: system, tools, messages, and blocks before it."""
    prefix = [_system_blocks(body), _bare(body.get("tools") or []), _bare(list(messages)),
              _bare(list(before))]  # fmt: skip
    return hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()


@dataclass
class Binder:
    """Signature -> the prefix hash it was served under; what was dropped by ``drop_block``."""

    bound: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Signature -> the model that wrote the block and the prefix hash it is bound to."""

    def bind(self, body: Mapping[str, Any], blocks: Sequence[Mapping[str, Any]]) -> None:
        """Bind each thinking block of a reply served for ``body``."""
        if not APPEND_ONLY.fullmatch(str(body.get("model"))):
            return
        messages = body.get("messages") or []
        for j, block in enumerate(blocks):
            key = block.get("signature") or block.get("data")
            if block.get("type") in ("thinking", "redacted_thinking") and key:
                self.bound[key] = (str(body.get("model")), prefix_hash(body, messages, blocks[:j]))

    def check(self, body: Mapping[str, Any], betas: set[str]) -> tuple[str | None, list[Any]]:
        """The 400 for the first block whose prefix changed, or the blocks ``drop_block`` drops."""
        if not APPEND_ONLY.fullmatch(str(body.get("model"))):
            return None, []
        thinking = body.get("thinking") or {}
        binding = thinking.get("block_binding") if isinstance(thinking, Mapping) else None
        if binding is not None and BINDING_BETA not in betas:
            return BINDING_NEEDS_BETA, []
        drop = isinstance(binding, Mapping) and binding.get("prefix_mismatch_behavior") == (
            "drop_block"
        )
        messages = body.get("messages") or []
        dropped: list[Any] = []
        for i, message in enumerate(messages):
            content = message.get("content")
            if message.get("role") != "assistant" or not isinstance(content, list):
                continue
            for j, block in enumerate(content):
                key = block.get("signature") or block.get("data")
                if block.get("type") not in ("thinking", "redacted_thinking") or not key:
                    continue
                model, bound = self.bound.get(key, ("", None))
                if bound is None or model != body.get("model"):  # rule 5: dropped silently
                    continue
                if bound == prefix_hash(body, messages[:i], content[:j]):
                    continue
                if not drop:
                    return PREFIX_MISMATCH.format(i=i, j=j), []
                dropped.append({"type": "thinking_block_dropped", "message": i, "block": j})
        return None, dropped


COMPACTION_BETA = "compact-2026-01-12"
COMPACTION_NEEDS_BETA = (
    f"context_management: compaction requires the `anthropic-beta: {COMPACTION_BETA}` header"
)
SMALL_TRIGGER = (
    "context_management.edits.0.trigger.value: Input should be greater than or equal to 50000"
)


def compaction(summary: str) -> dict[str, Any]:
    """A ``compaction`` block (rule 8), as a reply that compacted the conversation opens with."""
    return {"type": "compaction", "content": summary}


def conversation_rules(body: Mapping[str, Any], betas: set[str]) -> str | None:
    """Rules 6 and 8: system messages and tool changes; server-side compaction's request."""
    management = body.get("context_management")
    if management is not None:
        if COMPACTION_BETA not in betas:
            return COMPACTION_NEEDS_BETA
        for edit in management.get("edits") or []:
            if edit.get("type") == "compact_20260112" and edit["trigger"]["value"] < 50_000:
                return SMALL_TRIGGER
    return system_messages(body, betas)


def system_messages(body: Mapping[str, Any], betas: set[str]) -> str | None:
    """Rule 6: where a ``system`` message may stand, and what its tool blocks need."""
    messages = body.get("messages") or []
    model = str(body.get("model"))
    names = {t.get("name") for t in body.get("tools") or []}
    for i, message in enumerate(messages):
        if message.get("role") != "system":
            continue
        if not MID_SYSTEM.fullmatch(model):
            return SYSTEM_ROLE.format(i=i)
        if i + 1 < len(messages) and messages[i + 1].get("role") != "assistant":
            return SYSTEM_PLACE.format(i=i)
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            problem = _tool_block(i, j, block, betas, names)
            if problem:
                return problem
    return None


def _tool_block(
    i: int, j: int, block: Mapping[str, Any], betas: set[str], names: set[Any]
) -> str | None:
    kind = block.get("type")
    if kind not in ("tool_addition", "tool_removal"):
        return None
    if TOOL_CHANGES_BETA not in betas:
        return NEEDS_BETA.format(i=i, j=j, kind=kind, beta=TOOL_CHANGES_BETA)
    if kind == "tool_addition" and "tool" in block:
        if INLINE_TOOLS_BETA not in betas:
            return NEEDS_BETA.format(i=i, j=j, kind=kind, beta=INLINE_TOOLS_BETA)
        return None
    if kind == "tool_addition" and block.get("name") not in names:
        return UNKNOWN_TOOL.format(i=i, j=j, name=block.get("name"))
    return None


def betas_of(headers: Mapping[str, str]) -> set[str]:
    """The ``anthropic-beta`` values a request sent."""
    raw = headers.get("anthropic-beta", "")
    return {b.strip() for b in raw.split(",") if b.strip()}
