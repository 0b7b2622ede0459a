"""Typed reads of decoded provider JSON: the one place a wrong shape becomes ``ResponseInvalid``.

Every adapter decodes a reply body or stream event with ``loads`` and then reads each field it
uses through one of the accessors below, which return the value with its expected type or raise
``WireError`` naming the field (``choices[0].message.tool_calls[1].function.name: expected a
non-empty string, got int``). The adapter's decoder entry point turns ``WireError`` into
``ResponseInvalid`` (phase ``body``, ``request_sent`` True) with the raw body kept, redacted, and
the ``WireError`` as ``__cause__``. Fields an adapter never reads are never checked.

The accessors are plain ``isinstance`` checks (no model objects are built), so the success path
costs a few hundred nanoseconds per reply; ``bench/provider_overhead.py`` keeps that honest.

Rules shared by the three adapters (docs/providers.md, "What counts as an invalid response"):

- a body or event that is not JSON, or nests too deep for the decoder (``RecursionError``);
- an object where a string is expected, a string where an object is, and so on, for every field
  read; ``null`` counts as absent wherever the field is optional;
- token counts that are not non-negative integers below 2**63 (integral floats are accepted);
- a finish/stop reason that is not a string (or null);
- a tool call whose name is null, empty or not a string, or whose id is not a string (a missing
  id is synthesised by the adapter).

Error messages name the field and the JSON type found, never the value of a string (it may be
anything the server echoed, a key included).

``decode_json`` is ``json.loads`` made faster: pydantic_core's parser (jiter, already a
dependency through pydantic) reads a reply 1.3-3x faster than the stdlib. Where jiter refuses
text (invalid JSON, but also lone surrogate escapes and nesting past about 200 levels, which
``json`` takes), ``json.loads`` decides, so every text gives the value or the exception (type
and message) it gave before; jiter accepts nothing ``json`` refuses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic_core import from_json

__all__ = [
    "WireError",
    "as_count",
    "as_index",
    "as_list",
    "as_object",
    "decode_json",
    "dumps",
    "loads",
    "opt_object",
    "nonempty_str",
    "opt_str",
    "wrong",
]

_MAX_COUNT = 2**63
_EMPTY: Mapping[str, Any] = {}


class WireError(Exception):
    """A decoded provider value does not have the shape an adapter reads (internal).

    Never leaves an adapter: each decoder entry point converts it into ``ResponseInvalid``.
    ``path`` names the field (``body`` for the whole body or event).
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


def wrong(path: str, expected: str, value: object) -> WireError:
    """The ``WireError`` for a field holding ``value`` where ``expected`` was."""
    return WireError(path, f"expected {expected}, got {describe(value)}")


def describe(value: object) -> str:
    """A value's JSON type, with the value itself only for numbers, booleans and null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"integer {value}" if abs(value) < 10**30 else "a very large integer"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def decode_json(text: str) -> Any:
    """``json.loads(text)``, the same values and errors, by the faster parser first."""
    try:
        return from_json(text)
    except ValueError:
        return json.loads(text)  # jiter refused it: json accepts it or raises as it always did


def loads(text: str | bytes, what: str = "body") -> Any:
    """``json.loads``; malformed or too deeply nested JSON raises ``WireError``."""
    try:
        return decode_json(text) if isinstance(text, str) else json.loads(text)
    except RecursionError as exc:
        raise WireError(what, "JSON nested too deeply to decode") from exc
    except ValueError as exc:
        raise WireError(what, f"not valid JSON ({exc})") from exc


def dumps(value: object, path: str) -> str:
    """``json.dumps`` of a decoded value (tool arguments); too deep raises ``WireError``."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError) as exc:
        raise WireError(path, "nested too deeply to encode") from exc


def as_object(value: object, path: str) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else ``WireError``."""
    if isinstance(value, dict):
        return value
    raise wrong(path, "an object", value)


def opt_object(value: object, path: str) -> Mapping[str, Any]:
    """A JSON object, or an empty mapping for null/absent; anything else is ``WireError``."""
    if isinstance(value, dict):
        return value
    if value is None:
        return _EMPTY
    raise wrong(path, "an object or null", value)


def as_list(value: object, path: str) -> list[Any]:
    """A JSON array, or an empty list for null/absent; anything else is ``WireError``."""
    if isinstance(value, list):
        return value
    if value is None:
        return []
    raise wrong(path, "an array or null", value)


def opt_str(value: object, path: str) -> str | None:
    """A string, or None for null/absent; anything else is ``WireError``."""
    if value is None or isinstance(value, str):
        return value
    raise wrong(path, "a string or null", value)


def nonempty_str(value: object, path: str) -> str:
    """A non-empty string (a tool call's name, a required id), else ``WireError``."""
    if isinstance(value, str) and value:
        return value
    raise wrong(path, "a non-empty string", value)


def as_count(value: object, path: str) -> int:
    """A token count: a non-negative integer (0 for null/absent), else ``WireError``.

    An integral float (``12.0``, which some servers send) is accepted; ``1e400`` (infinity),
    ``NaN``, ``-1``, ``"12"``, ``true`` and ``[1]`` are not.
    """
    if type(value) is int and 0 <= value < _MAX_COUNT:
        return value
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer() and 0 <= value < _MAX_COUNT:
        return int(value)
    raise wrong(path, "a non-negative integer", value)


def as_index(value: object, path: str) -> int | None:
    """A non-negative integer index, or None for null/absent; else ``WireError``."""
    if type(value) is int and value >= 0:
        return value
    if value is None:
        return None
    raise wrong(path, "a non-negative integer or null", value)
