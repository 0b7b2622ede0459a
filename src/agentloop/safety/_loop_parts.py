"""A loop detector's signatures and its failing A-B-A-B tail (``agentloop.safety.loops``).

A signature is one operation as the detector counts it: the tool's name, the canonical JSON of
its arguments and a stable digest of its result text. Snapshots write each signature once and
refer to it by index; these helpers read both that form and the older one (signatures whole).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

_Key: TypeAlias = tuple[str, str]
"""(tool name, canonical JSON of the arguments)."""
_Signature: TypeAlias = tuple[str, str, int | None]
"""(tool name, canonical JSON of the arguments, hash of the result text or None if empty)."""


def _signature(item: Any) -> _Signature:
    tool, args, digest = item
    return (str(tool), str(args), None if digest is None else int(digest))


def _pattern(signature: _Signature) -> str:
    return f"{signature[0]}({signature[1]})"


def _index(value: Any) -> int:
    """An index into a snapshot's ``sigs`` (an int, never a bool or negative)."""
    if type(value) is not int or value < 0:
        raise ValueError(f"not a signature index: {value!r}")
    return value


def _positive(value: Any) -> int:
    count = int(value)
    if count < 1:
        raise ValueError(f"not a count: {value!r}")
    return count


def _stored(item: Any, sigs: list[_Signature] | None) -> _Signature:
    """A signature of a snapshot: its index into ``sigs``, or itself (the older form)."""
    return _signature(item) if sigs is None else sigs[_index(item)]


class _Alternation:
    """The failing A-B-A-B tail of the operation stream (two different calls alternating)."""

    __slots__ = ("before_previous", "length", "previous", "warned")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.length = 0
        self.previous: _Signature | None = None
        self.before_previous: _Signature | None = None
        self.warned = False

    @property
    def cycles(self) -> int:
        """Completed A-B pairs in the tail."""
        return self.length // 2

    def push(self, signature: _Signature, is_error: bool) -> None:
        """Extend or restart the tail with one recorded operation."""
        if not is_error:
            self.reset()
            return
        previous = self.previous
        if previous is None or previous[:2] == signature[:2]:
            self.length = 1
            self.warned = False
        elif self.length >= 2 and signature == self.before_previous:
            self.length += 1
        else:
            self.length = 2
            self.warned = False
        self.before_previous, self.previous = previous, signature

    def snapshot(self, index: dict[_Signature, int]) -> dict[str, Any]:
        """The tail, its two signatures by their place in ``index`` (added when missing)."""
        previous, before = self.previous, self.before_previous
        return {
            "length": self.length,
            "previous": None if previous is None else index.setdefault(previous, len(index)),
            "before_previous": None if before is None else index.setdefault(before, len(index)),
            "warned": self.warned,
        }

    def restore(self, data: Mapping[str, Any], sigs: list[_Signature] | None = None) -> None:
        """Put back a ``snapshot``: signatures by index into ``sigs``, or whole (the old form)."""
        previous, before = data["previous"], data["before_previous"]
        self.length = int(data["length"])
        self.previous = None if previous is None else _stored(previous, sigs)
        self.before_previous = None if before is None else _stored(before, sigs)
        self.warned = bool(data["warned"])

    def description(self) -> str:
        """``<A> and <B>``, A being the call that started the alternation."""
        assert self.previous is not None and self.before_previous is not None
        first, second = (
            (self.before_previous, self.previous)
            if self.length % 2 == 0
            else (self.previous, self.before_previous)
        )
        return f"{_pattern(first)} and {_pattern(second)}"


_NO_ALTERNATION = _Alternation()
"""The empty tail a detector holds until its first failing operation (never pushed to)."""
