"""How an append-only conversation's system entries travel to Anthropic (SPEC 28).

The engine records a change of instructions or tools as a ``Message("system", ...)`` entry at the
end of the transcript (``agentloop.engine.appendonly``); ``ModelRequest.system``/``tools`` keep
the conversation's base. Two wire forms (provider-rules, Anthropic late 2026, rule 6):

- **In place**, where the model's profile has ``mid_conversation_system``: each entry is a
  ``{"role": "system"}`` message, its text a ``text`` block and a tool change its
  ``tool_removal`` (by name) and ``tool_addition`` blocks (by name when the same definition is
  in the base ``tools``, else by value, the ``inline-tools`` beta). The API wants such a message
  to precede an assistant turn or end the array, so entries wait for the next assistant turn
  (an entry a user message follows moves there), identically on every request.
- **Folded**, where it lacks the flag: the texts join the top-level ``system`` after the base,
  in order, tool changes apply to ``tools``, and on an ``append_only`` model the thinking of
  every message before the last entry is left out (its prefix changed: the documented remedy).

**Server-side compaction** (rule 8) drops every block before a ``compaction`` block, entries
sent in place included, while the top-level ``system`` and ``tools`` stay. So after each message
holding one, ``InEffect`` states again what the entries before it had in effect (the last
instruction text, the net tool change against the base) as the next entry: the model goes on
reading the instructions and tools the engine believes in effect. It is computed from the
transcript alone, so every later request sends it identically.

``betas_of`` reads the ``anthropic-beta`` values a payload needs from the payload itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentloop._tool_parts import apply_changes, spec_key
from agentloop.messages import Message, ProviderPart, TextPart, ThinkingPart, ToolChangePart
from agentloop.model import ToolSpec

__all__ = [
    "INLINE_TOOLS_BETA",
    "TOOL_CHANGES_BETA",
    "InEffect",
    "betas_of",
    "compaction_edits",
    "entry_blocks",
    "folded_tools",
    "last_entry",
    "tool_json",
]

TOOL_CHANGES_BETA = "mid-conversation-tool-changes-2026-07-01"
INLINE_TOOLS_BETA = "inline-tools-2026-09-15"
THINKING_BINDING_BETA = "thinking-binding-controls-2026-08-01"
COMPACTION_BETA = "compact-2026-01-12"


NATIVE_KEY = "x-anthropic-tool"
"""A tool whose parameters carry this key is one of Anthropic's own (``agentloop.memory``'s
``memory_20250818``): sent as its ``type`` and ``name`` only, with its beta header."""


def tool_json(spec: ToolSpec) -> dict[str, Any]:
    """A tool's Anthropic wire form (name, description, input schema; a native tool's type)."""
    native = spec.parameters.get(NATIVE_KEY)
    if isinstance(native, Mapping):
        return {"type": native["type"], "name": native["name"]}
    data: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "input_schema": dict(spec.parameters),
    }
    if spec.defer_loading:  # found by the tool search tool (SPEC 22)
        data["defer_loading"] = True
    return data


def entry_blocks(message: Message, base: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The content blocks of one system entry sent in place (empty text left out)."""
    blocks: list[dict[str, Any]] = []
    in_base: dict[str, str] | None = None
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolChangePart):
            if in_base is None:
                in_base = {spec.name: spec_key(spec) for spec in base}
            blocks.extend({"type": "tool_removal", "name": name} for name in part.removed)
            for spec in part.added:
                if in_base.get(spec.name) == spec_key(spec):
                    blocks.append({"type": "tool_addition", "name": spec.name})
                else:
                    blocks.append({"type": "tool_addition", "tool": tool_json(spec)})
    return blocks


class InEffect:
    """What the in-place entries so far have in effect, stated again after a compaction."""

    __slots__ = ("base", "changes", "text")

    def __init__(self, base: Sequence[ToolSpec]) -> None:
        self.base = base
        self.text: str | None = None
        self.changes: list[ToolChangePart] = []

    def see(self, entry: Message) -> None:
        """Count one entry sent in place (its text replaces the last; tool changes add up)."""
        if any(type(p) is TextPart for p in entry.parts):
            self.text = entry.text
        self.changes.extend(p for p in entry.parts if type(p) is ToolChangePart)

    def after(self, message: Message) -> list[dict[str, Any]]:
        """The blocks to state after ``message``: none unless it holds a ``compaction`` block."""
        if not any(type(p) is ProviderPart and p.kind == "compaction" for p in message.parts):
            return []
        now = apply_changes(self.base, self.changes) if self.changes else self.base
        was = {spec.name: spec_key(spec) for spec in self.base}
        keys = {spec.name: spec_key(spec) for spec in now}
        removed = tuple(name for name, key in was.items() if keys.get(name) != key)
        added = tuple(spec for spec in now if was.get(spec.name) != keys[spec.name])
        parts: list[TextPart | ToolChangePart] = [TextPart(self.text)] if self.text else []
        if added or removed:
            parts.append(ToolChangePart(added=added, removed=removed))
        return entry_blocks(Message("system", tuple(parts)), self.base) if parts else []


def last_entry(messages: Sequence[Message]) -> int:
    """The index of the last system message after the first other one (-1: none)."""
    first = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
    for index in range(len(messages) - 1, first - 1, -1):
        if messages[index].role == "system":
            return index
    return -1


def folded_tools(tools: Sequence[ToolSpec], messages: Sequence[Message]) -> Sequence[ToolSpec]:
    """``tools`` with every system entry's tool change applied (``tools`` itself without any)."""
    changes = [
        p for m in messages if m.role == "system" for p in m.parts if isinstance(p, ToolChangePart)
    ]
    return apply_changes(tools, changes) if changes else tools


def thinking_dropped(encode: Callable[[Message], Any]) -> Callable[[Message], Any]:
    """``encode`` of a message without its thinking (a folded entry changed its prefix)."""

    def without(message: Message) -> Any:
        parts = tuple(p for p in message.parts if not isinstance(p, ThinkingPart))
        return encode(Message(message.role, parts, phase=message.phase))

    return without


def compaction_edits(trigger: int) -> dict[str, Any]:
    """``context_management`` for server-side compaction past ``trigger`` input tokens."""
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": trigger}}
    return {"edits": [edit]}


def betas_of(payload: dict[str, Any]) -> list[str]:
    """The ``anthropic-beta`` values ``payload`` needs (its entries, binding, compaction)."""
    betas: list[str] = []
    kinds = {
        "tool" if "tool" in block else block["type"]
        for message in payload.get("messages") or ()
        if message["role"] == "system"
        for block in message["content"]
        if block["type"] in ("tool_addition", "tool_removal")
    }
    if kinds:
        betas.append(TOOL_CHANGES_BETA)
    if "tool" in kinds:
        betas.append(INLINE_TOOLS_BETA)
    thinking = payload.get("thinking")
    if isinstance(thinking, dict) and "block_binding" in thinking:
        betas.append(THINKING_BINDING_BETA)
    if "context_management" in payload:
        betas.append(COMPACTION_BETA)
    return betas
