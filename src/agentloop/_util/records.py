"""Reading plain-data records that trust nothing (``Run.from_dict``, the store's rows).

Each helper checks one field's kind and, on a mismatch, raises ``InvalidInput`` naming the
field by its path (``turns[2].usage.input_tokens: expected a non-negative integer, got a
string``), never a bare ``KeyError``/``TypeError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentloop._util.numbers import is_finite
from agentloop.errors import InvalidInput

__all__ = ["KINDS", "REQUIRED", "as_object", "at_path", "bad_kind", "checked_field", "each_of"]

REQUIRED: Any = object()


KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (lambda v: type(v) is int, "an integer"),
    "count": (lambda v: type(v) is int and v >= 0, "a non-negative integer"),
    "number": (is_finite, "a finite number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "list": (lambda v: isinstance(v, list | tuple), "an array"),
    "object": (lambda v: isinstance(v, Mapping), "an object"),
}

JSON_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
               int: "an integer", float: "a number"}  # fmt: skip


def at_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def bad_kind(path: str, expected: str, value: object) -> InvalidInput:
    got = "null" if value is None else JSON_KINDS.get(type(value), type(value).__name__)
    return InvalidInput(
        f"{path}: expected {expected}, got {got}" if path else f"expected {expected}, got {got}"
    )


def as_object(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise bad_kind(path, "an object", value)
    return value


def checked_field(
    data: Mapping[str, Any], key: str, path: str, kind: str, *, default: Any = REQUIRED
) -> Any:
    """``data[key]`` checked to be of ``kind``; a ``default`` also stands in for null."""
    value = data.get(key)
    if value is None and default is not REQUIRED:
        return default
    check, expected = KINDS[kind]
    if value is None and key not in data:
        raise InvalidInput(f"{at_path(path, key)}: missing")
    if not check(value):
        raise bad_kind(at_path(path, key), expected, value)
    return value


def each_of(
    data: Mapping[str, Any], key: str, path: str, read: Callable[[Any, str], Any]
) -> list[Any]:
    where = at_path(path, key)
    return [
        read(item, at_path(where, i))
        for i, item in enumerate(checked_field(data, key, path, "list", default=()))
    ]
