"""The fake server's append-only Claude: thinking bound to everything before it (SPEC 28).

When ``FakeProviderServer`` answers ``/v1/messages`` for a model whose profile says
``append_only`` (``claude-fable-5-1``, ``claude-opus-5-5``...), each thinking block it serves is
bound to a hash of its prefix: the request's ``system``, ``tools`` and ``messages`` (breakpoints
left out, as the API ignores them). A later request that sends the block back after any of that
changed is answered as Anthropic answers it (provider-rules, Anthropic late 2026, rule 2): HTTP
400 ``invalid_request_error``, ``PREFIX_MISMATCH``. Every feature built on the engine can so be
tested against the rule without a network.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PREFIX_MISMATCH", "Binding"]

PREFIX_MISMATCH = (
    "messages.{i}.content.{j}: Invalid `signature` in `thinking` block. The block is bound to a"
    " different conversation. Remove the block, or set"
    ' `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
)
"""The 400's message, as Anthropic documents it (``{i}``, ``{j}``: the block's place)."""


def _bare(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _bare(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_bare(v) for v in value]
    return value


def _prefix(body: Mapping[str, Any], messages: Sequence[Any]) -> str:
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    prefix = [_bare(system or []), _bare(body.get("tools") or []), _bare(list(messages))]
    return hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()


class Binding:
    """Which prefix each served signature is bound to; checks the requests that send one back."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}

    @staticmethod
    def applies(model: str) -> bool:
        """Whether ``model`` binds thinking to its prefix (its profile's ``append_only``)."""
        from agentloop.providers.profiles import profile_for  # importing testing loads none

        return profile_for("anthropic", model).append_only

    def bind(self, body: Mapping[str, Any], signature: str) -> None:
        """The reply to ``body`` opens with a thinking block signed ``signature``."""
        self.bound[signature] = _prefix(body, body.get("messages") or [])

    def check(self, body: Mapping[str, Any]) -> str | None:
        """The 400's message for the first block whose prefix changed (None: all hold)."""
        messages = body.get("messages") or []
        for i, message in enumerate(messages):
            content = message.get("content") if isinstance(message, Mapping) else None
            if message.get("role") != "assistant" or not isinstance(content, list):
                continue
            for j, block in enumerate(content):
                bound = self.bound.get(str(block.get("signature")))
                if block.get("type") != "thinking" or bound is None:
                    continue
                if j or bound != _prefix(body, messages[:i]):
                    return PREFIX_MISMATCH.format(i=i, j=j)
        return None
