"""How deep a JSON value nests, measured and cut without recursion.

A tool call's arguments come from a model, a test double or a client of someone's own: a
thousand levels would take every recursive encoder downstream (token counts, the store, a
provider replaying the transcript) past Python's frame limit. ``agentloop.messages`` cuts them
where they enter (``MAX_ARGUMENT_DEPTH``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["cut_deep", "too_deep"]

_CONTAINERS = (Mapping, list, tuple)


def too_deep(arguments: Mapping[str, Any], limit: int) -> bool:
    """True when a container sits deeper than ``limit`` (iterative: no recursion).

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
        if depth > limit:
            return True
        on_path.add(id(value))
        stack.append((value, 0))
        items = value.values() if isinstance(value, Mapping) else value
        stack.extend((v, depth + 1) for v in items if isinstance(v, _CONTAINERS))
    return False


def cut_deep(arguments: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """A copy down to ``limit``, each container one level deeper kept empty."""
    top: dict[str, Any] = {}
    stack: list[tuple[Any, Any, int]] = [(arguments, top, 1)]
    while stack:
        source, target, depth = stack.pop()
        items = source.items() if isinstance(source, Mapping) else enumerate(source)
        for key, value in items:
            if isinstance(value, _CONTAINERS):
                copy: Any = {} if isinstance(value, Mapping) else [None] * len(value)
                if depth < limit:
                    stack.append((value, copy, depth + 1))
                elif not isinstance(value, Mapping):
                    copy = []
                value = copy
            target[key] = value
    return top
