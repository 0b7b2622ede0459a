"""The Bedrock twin's append-only binding (SPEC 28): Converse's shapes, Anthropic's rule.

Claude Fable/Mythos 5.x and Opus/Sonnet/Haiku 5.5 bind every thinking block to everything
before it on Bedrock too (provider-rules, Anthropic late 2026, rule 1: "API, Bedrock, Google
Cloud, Foundry"). ``Binder`` plays it on Converse bodies, as ``anthropic_prefix.Binder`` does on
the Messages API: a ``reasoningContent`` block the twin served to such a model is bound to a hash
of ``system``, ``toolConfig.tools``, the messages before it and the blocks before it in its turn
(``cachePoint`` blocks left out: they mark, they are not content); sent back after any of it
changed, it is a ``ValidationException`` with Anthropic's text, as Bedrock relays it. Another
model's blocks are not checked (Anthropic drops them, rule 5).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .anthropic_prefix import APPEND_ONLY, PREFIX_MISMATCH

__all__ = ["Binder", "is_append_only"]


def is_append_only(model: str) -> bool:
    """Whether a Bedrock model id (``us.anthropic.claude-opus-5-5-v1:0``) is append-only."""
    at = model.find("claude-")
    return at >= 0 and APPEND_ONLY.fullmatch(model[at:]) is not None


def _bare(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _bare(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bare(v) for v in value if not (isinstance(v, Mapping) and "cachePoint" in v)]
    return value


def prefix_hash(body: Mapping[str, Any], messages: Sequence[Any], before: Sequence[Any]) -> str:
    """The hash a block is bound to: system, tools, the messages and blocks before it."""
    tools = (body.get("toolConfig") or {}).get("tools") or []
    prefix = [_bare(body.get("system") or []), _bare(tools), _bare(list(messages)),
              _bare(list(before))]  # fmt: skip
    return hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()


def _signature(block: Mapping[str, Any]) -> str | None:
    reasoning = block.get("reasoningContent") or {}
    text = reasoning.get("reasoningText") or {}
    found = text.get("signature") or reasoning.get("redactedContent")
    return found if isinstance(found, str) else None


@dataclass
class Binder:
    """Signature -> the model that wrote it and the prefix hash it is bound to."""

    bound: dict[str, tuple[str, str]] = field(default_factory=dict)

    def bind(self, model: str, body: Mapping[str, Any], blocks: Sequence[Any]) -> None:
        """Bind each reasoning block of a reply served to ``model`` for ``body``."""
        if not is_append_only(model):
            return
        messages = body.get("messages") or []
        for j, block in enumerate(blocks):
            key = _signature(block)
            if key:
                self.bound[key] = (model, prefix_hash(body, messages, blocks[:j]))

    def check(self, model: str, body: Mapping[str, Any]) -> str | None:
        """The 400's text for the first block whose prefix changed, else None."""
        if not is_append_only(model):
            return None
        messages = body.get("messages") or []
        for i, message in enumerate(messages):
            content = message.get("content") or []
            if message.get("role") != "assistant":
                continue
            for j, block in enumerate(content):
                key = _signature(block)
                wrote, bound = self.bound.get(key or "", ("", None))
                if bound is None or wrote != model:
                    continue
                if bound != prefix_hash(body, messages[:i], content[:j]):
                    return PREFIX_MISMATCH.format(i=i, j=j)
        return None
