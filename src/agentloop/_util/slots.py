"""A faster ``__init__`` for a frozen, slotted dataclass built on a hot path.

A frozen dataclass's generated ``__init__`` goes through ``object.__setattr__`` once per field
(about 1.3 us for five fields); setting the slot descriptors directly does the same in about
0.4 us. ``fast_init`` replaces the generated one with that; everything else (fields, ``repr``,
``==``, ``replace``, ``FrozenInstanceError`` on assignment) stays the dataclass's own.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_init"]

_T = TypeVar("_T")


def fast_init(made: type[_T]) -> type[_T]:
    """``made`` (a frozen, slotted dataclass, no ``__post_init__``) with the fast ``__init__``."""
    if hasattr(made, "__post_init__"):
        raise TypeError(f"{made.__qualname__}: fast_init does not run __post_init__")
    fields = [f for f in dataclasses.fields(made) if f.init]  # type: ignore[arg-type]
    scope: dict[str, Any] = {f"_set_{f.name}": getattr(made, f.name).__set__ for f in fields}
    params: list[str] = []
    keywords: list[str] = []
    for f in fields:
        text = f.name
        if f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{made.__qualname__}.{f.name}: fast_init takes no default_factory")
        if f.default is not dataclasses.MISSING:
            scope[f"_default_{f.name}"] = f.default
            text += f"=_default_{f.name}"
        (keywords if f.kw_only else params).append(text)
    signature = ", ".join(["self", *params, *(["*", *keywords] if keywords else [])])
    body = "; ".join(f"_set_{f.name}(self, {f.name})" for f in fields) or "pass"
    exec(f"def __init__({signature}):\n    {body}", scope)
    init = scope["__init__"]
    init.__qualname__ = f"{made.__qualname__}.__init__"
    made.__init__ = init  # type: ignore[method-assign]
    return made
