"""How deep tool-call arguments may nest, and the cut that keeps them there (``ToolCallPart``).

Iterative on purpose: a hostile tree a thousand levels deep must not cost a recursion per level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_ARGUMENT_DEPTH"]

MAX_ARGUMENT_DEPTH = 64
"""Tool-call arguments nested deeper than this are invalid: the model reads a soft error."""

_CONTAINERS = (Mapping, list, tuple)


def _too_deep(arguments: Mapping[str, Any]) -> bool:
    """True when a container sits deeper than ``MAX_ARGUMENT_DEPTH`` (iterative: no recursion).

    A cycle (only Python code makes one; JSON cannot) is not depth: it is left as it is, for
    the encoders to name.
    """
    if not any(isinstance(v, _CONTAINERS) for v in arguments.values()):
        return False
    on_path: set[int] = set()
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    while stack:
        value, depth = stack.pop()
        if depth == 0:  # every child of ``value`` is done: it leaves the path
            on_path.discard(id(value))
            continue
        if id(value) in on_path:
            return False
        if depth > MAX_ARGUMENT_DEPTH:
            return True
        on_path.add(id(value))
        stack.append((value, 0))
        items = value.values() if isinstance(value, Mapping) else value
        stack.extend((v, depth + 1) for v in items if isinstance(v, _CONTAINERS))
    return False


def _cut(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A copy down to ``MAX_ARGUMENT_DEPTH``, each container one level deeper kept empty."""
    top: dict[str, Any] = {}
    stack: list[tuple[Any, Any, int]] = [(arguments, top, 1)]
    while stack:
        source, target, depth = stack.pop()
        items = source.items() if isinstance(source, Mapping) else enumerate(source)
        for key, value in items:
            if isinstance(value, _CONTAINERS):
                copy: Any = {} if isinstance(value, Mapping) else [None] * len(value)
                if depth < MAX_ARGUMENT_DEPTH:
                    stack.append((value, copy, depth + 1))
                elif not isinstance(value, Mapping):
                    copy = []
                value = copy
            target[key] = value
    return top
