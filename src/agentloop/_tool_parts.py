"""Tools as the model sees them, and a change of them inside a conversation (SPEC 28).

``ToolSpec`` (re-exported by ``agentloop.model``) is a tool as advertised; ``ToolChangePart``
(re-exported by ``agentloop.messages``) is the part of a ``Message("system", ...)`` that records
what an append-only conversation's offered tools gained and lost. They live here, below both
modules, because a message part holds specs and ``model`` imports ``messages``.

Two specs are the same tool when their names and their canonical JSON (keys sorted, compact)
agree: ``spec_key``, cached per spec, is what a comparison reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import InvalidInput

__all__ = ["ToolChangePart", "ToolSpec", "apply_changes", "spec_key"]


@record
class ToolSpec:
    """A tool as advertised to the model: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    defer_loading: bool = field(default=False, kw_only=True)
    """Sent for the provider's own tool search to find (SPEC 22, native): Anthropic and the
    Responses API take it with ``defer_loading: true``; the engine sets it, never a user."""

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (``defer_loading`` only when set)."""
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }
        if self.defer_loading:
            data["defer_loading"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolSpec:
        """Rebuild a spec from ``to_dict`` output."""
        parameters = data.get("parameters")
        if not isinstance(parameters, Mapping):
            raise InvalidInput(f"a tool spec's parameters must be an object, got {parameters!r}")
        deferred = data.get("defer_loading", False) is True
        return cls(
            str(data["name"]),
            str(data.get("description", "")),
            dict(parameters),
            defer_loading=deferred,
        )


_KEYS: dict[int, tuple[ToolSpec, str]] = {}


def spec_key(spec: ToolSpec) -> str:
    """The canonical JSON of ``spec`` (sorted keys, compact): equal for the same tool.

    Cached by identity: a registry builds each spec once, so a comparison of unchanged offers
    costs a dictionary look-up per tool.
    """
    found = _KEYS.get(id(spec))
    if found is not None and found[0] is spec:
        return found[1]
    key = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"), default=str)
    if len(_KEYS) >= 4096:
        _KEYS.clear()
    _KEYS[id(spec)] = (spec, key)
    return key


@record
class ToolChangePart:
    """What the tools of an append-only conversation gained (``added``) and lost (``removed``).

    The part of a ``Message("system", ...)`` entry (SPEC 28): the conversation's base holds
    ``ToolChangePart(added=<its tools>)``; a later entry holds the difference the engine found
    before a model call. A changed definition is a removal and an addition of the same name.
    """

    added: tuple[ToolSpec, ...] = ()
    removed: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.added, tuple):
            object.__setattr__(self, "added", tuple(self.added))
        if not isinstance(self.removed, tuple):
            object.__setattr__(self, "removed", tuple(self.removed))

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return {
            "type": "tool_change",
            "added": [spec.to_dict() for spec in self.added],
            "removed": list(self.removed),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolChangePart:
        """Rebuild a part from ``to_dict`` output."""
        added = tuple(ToolSpec.from_dict(s) for s in data.get("added") or ())
        return cls(added, tuple(str(name) for name in data.get("removed") or ()))


def apply_changes(
    tools: Iterable[ToolSpec], changes: Iterable[ToolChangePart]
) -> tuple[ToolSpec, ...]:
    """``tools`` after ``changes`` in order: removals first, then additions, per change."""
    current = {spec.name: spec for spec in tools}
    for change in changes:
        for name in change.removed:
            current.pop(name, None)
        for spec in change.added:
            current[spec.name] = spec
    return tuple(current.values())
