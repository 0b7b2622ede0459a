"""Loop detection: identical (tool, arguments, result) operations repeated in a window.

A soft error invites the model to try again; a model that ignores what it reads tries the same
thing forever. The ``LoopDetector`` watches the last ``window`` operations and says when the
same operation keeps producing the same result (warn at ``warn_threshold``, stop at
``stop_threshold``), or when two failing operations alternate A-B-A-B.

The engine calls ``check()`` before every dispatch (a pure read) and ``record()`` once after
every attempt. Every call costs O(1) amortized whatever the window: counts live in a dict
beside the window list, and entries made stale by progress are tombstoned, not searched for.
One operation can neither warn nor stop (a threshold of 1 aside), so a session keeps its first
as given and makes its detector only when a second one (or a snapshot) needs it
(``engine.guards.SafetyState.loop_record``): a session with one tool call never encodes it.
Result texts are hashed with a stable digest (not ``hash()``, which differs per process), so
``snapshot()`` / ``restore()`` carry the window into another process (``Agent.resume``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentloop._util.jsontext import unchecked
from agentloop._util.slots import record
from agentloop.errors import ConfigurationError, LoopDetected
from agentloop.safety._config import require_non_negative_fields
from agentloop.safety._loop_parts import (
    _NO_ALTERNATION,
    _Alternation,
    _index,
    _Key,
    _pattern,
    _positive,
    _Signature,
    _signature,
)

__all__ = [
    "LoopDetection",
    "LoopDetector",
    "LoopWarning",
    "canonical_arguments",
    "result_digest",
]

UNAVAILABLE_ARGUMENTS = "*"
"""The arguments shown for a name that is not available: one pattern per name."""


@record
class LoopDetection:
    """Warn at ``warn_threshold`` identical operations, stop at ``stop_threshold`` (0 disables)."""

    warn_threshold: int = 3
    stop_threshold: int = 10
    window: int = 50

    def __post_init__(self) -> None:
        require_non_negative_fields(self, "warn_threshold", "stop_threshold", "window")
        if self.window == 0 and (self.warn_threshold or self.stop_threshold):
            raise ConfigurationError("LoopDetection.window must be >= 1", field="window")


@record
class LoopWarning:
    """A pattern reached the warn threshold (below the stop): one per pattern per episode."""

    pattern: str
    repetitions: int


def _first_canonical(value: Any) -> str:
    """Builds the encoders (and imports ``json``) on the first call, not at import."""
    global _CANONICAL, _UNCHECKED
    import json

    _CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=repr).encode
    _UNCHECKED = unchecked(ensure_ascii=True, sort_keys=True, default=repr)
    return canonical_arguments(value)


_CANONICAL: Callable[[Any], str] = _first_canonical
"""One encoder for every call (``json.dumps`` with options builds a new one each time)."""
_UNCHECKED: Callable[[Any, int], Sequence[str]] | None = None
"""``_CANONICAL``'s C encoder without its circular-reference check (no ``markers``): the same
text, without the encoder ``encode()`` makes per call. A circular value recurses until
``RecursionError``, and then ``_CANONICAL`` says what it is."""


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    """Compact JSON of ``arguments`` with sorted keys (``repr`` for values JSON cannot hold)."""
    try:
        if _UNCHECKED is not None:
            try:
                return "".join(_UNCHECKED(arguments, 0))
            except RecursionError:
                pass  # circular (or deeper than the stack): the checking encoder decides
        return _CANONICAL(arguments)
    except (TypeError, ValueError):  # e.g. keys of mixed types, circular structures
        if isinstance(arguments, Mapping):
            return repr(sorted(arguments.items(), key=lambda item: str(item[0])))
        return repr(arguments)


_crc32, _adler32 = zlib.crc32, zlib.adler32
_ABSENT: Any = object()
"""No live result for a call (``None`` is one: the empty text's)."""


def result_digest(text: str) -> int | None:
    """A stable 64-bit digest of a result text (None for an empty text)."""
    if not text:
        return None
    data = text.encode("utf-8", "surrogatepass")
    return (_crc32(data) << 32) | _adler32(data)  # stable across processes, C speed


_EMPTY: set[Any] = set()
"""The empty set a detector holds until it has something to keep (never added to)."""


_NO_DEAD: dict[Any, int] = {}
"""The tombstones a detector holds until its first drop (never written to)."""

_NO_WINDOW: list[Any] = []
_NO_COUNTS: dict[Any, int] = {}
_NO_LIVE: dict[Any, int | None] = {}
"""A detector's until its first operation (never written to): a session with no call makes none."""


class LoopDetector:
    """Counts identical operations in a sliding window and says when the model is stuck.

    Args:
        config: the thresholds and the window size (``0`` disables a threshold).
    """

    def __init__(self, config: LoopDetection | None = None) -> None:
        self.config = config or LoopDetection()
        stop = self.config.stop_threshold
        self._alternation_stop = (stop + 1) // 2 if stop else 0
        self._clear()

    def _clear(self) -> None:
        self._window: list[_Signature] = _NO_WINDOW  # its own list at the first operation
        self._counts: dict[_Signature, int] = _NO_COUNTS  # (a list: 50 entries pop from the
        self._live_hash: dict[_Key, int | None] = _NO_LIVE  # front cheaply)
        self._dead: dict[_Signature, int] = _NO_DEAD  # a dict of its own at the first drop
        self._warned: set[_Signature] = _EMPTY  # a set of its own at the first add
        self._at_stop: set[_Signature] = _EMPTY
        self._alternation = _NO_ALTERNATION  # one of its own at the first failing operation

    def _own(self) -> dict[_Key, int | None]:
        """A window, counts and live results of its own (the first operation); the live ones."""
        self._window, self._counts, self._live_hash = [], {}, {}
        return self._live_hash

    def __repr__(self) -> str:
        return f"LoopDetector({self.config!r})"

    def check(self) -> LoopDetected | None:
        """The stop-level pattern in the window, if any. Pure: never changes state."""
        if not self._at_stop and not 0 < self._alternation_stop <= self._alternation.length // 2:
            return None  # nothing at the stop line (checked before every call)
        found = self._stop_signature()
        if found is not None:
            return LoopDetected(f"{_pattern(found)} repeated {self._counts[found]} times")
        if self._alternation_at_stop():
            alternation = self._alternation
            cycles = alternation.cycles
            return LoopDetected(f"{alternation.description()} alternating {cycles} times")
        return None

    def consume_stop(self) -> LoopDetected | None:
        """Clear the pattern ``check()`` reports (after the engine ended the run on it)."""
        detected = self.check()
        found = self._stop_signature()
        if found is not None:
            self._drop(found)
        elif detected is not None:
            self._drop_alternation()
        return detected

    def end_run(self) -> None:
        """Drop every stop-level pattern the run never fired, so the next run is not refused."""
        if not self._at_stop and self._alternation is _NO_ALTERNATION:
            return  # nothing at the stop line (the end of most runs)
        while self.consume_stop() is not None:
            pass

    def reset(self) -> None:
        """Forget everything."""
        self._clear()

    def snapshot(self) -> dict[str, Any]:
        """The window and its bookkeeping as plain JSON data (for ``restore``).

        Compact: each signature once (``sigs``), everything else by its index there; the
        counts and the live results are not written, ``restore`` derives them from the window
        and its tombstones (``dead``).
        """
        index: dict[_Signature, int] = {}
        window = [index.setdefault(s, len(index)) for s in self._window]
        return {
            "window": window,
            "dead": [[index.setdefault(s, len(index)), n] for s, n in self._dead.items()],
            "warned": sorted(index.setdefault(s, len(index)) for s in self._warned),
            "at_stop": sorted(index.setdefault(s, len(index)) for s in self._at_stop),
            "alternation": self._alternation.snapshot(index),
            "sigs": [list(s) for s in index],
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        """Replace the state with a ``snapshot()``; raises ``ValueError`` on malformed data.

        Reads the compact form and the one before it (``window``, ``counts`` and ``live``
        written out in full), which stores of an older agentloop hold.
        """
        try:
            self._clear()
            if "sigs" in data:
                self._restore_compact(data)
            else:
                self._restore_full(data)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            self._clear()
            raise ValueError(f"not a LoopDetector snapshot: {exc!r}") from exc

    def _restore_compact(self, data: Mapping[str, Any]) -> None:
        sigs = [_signature(s) for s in data["sigs"]]
        self._window = [sigs[_index(i)] for i in data["window"]]
        self._dead = {sigs[_index(i)]: _positive(n) for i, n in data["dead"]}
        counts: dict[_Signature, int] = {}
        for signature in self._window:
            counts[signature] = counts.get(signature, 0) + 1
        for signature, dead in self._dead.items():  # tombstoned entries are still in the window
            left = counts.get(signature, 0) - dead
            if left < 0:
                raise ValueError(f"{dead} dead entries of {_pattern(signature)} in the window")
            if left:
                counts[signature] = left
            else:
                del counts[signature]
        self._counts = counts
        self._live_hash = {(t, a): d for t, a, d in counts}  # one live result a call
        self._warned = {sigs[_index(i)] for i in data["warned"]} or _EMPTY
        self._at_stop = {sigs[_index(i)] for i in data["at_stop"]} or _EMPTY
        self._alternation = _Alternation()
        self._alternation.restore(data["alternation"], sigs)

    def _restore_full(self, data: Mapping[str, Any]) -> None:
        self._window = [_signature(s) for s in data["window"]]
        self._counts = {_signature(s[:3]): int(s[3]) for s in data["counts"]}
        self._live_hash = {
            (str(t), str(a)): None if d is None else int(d) for t, a, d in data["live"]
        }
        self._dead = {_signature(s[:3]): int(s[3]) for s in data["dead"]}
        self._warned = {_signature(s) for s in data["warned"]}
        self._at_stop = {_signature(s) for s in data["at_stop"]}
        self._alternation = _Alternation()
        self._alternation.restore(data["alternation"])

    def record(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        result_text: str,
        *,
        is_error: bool,
        available: bool = True,
    ) -> LoopWarning | None:
        """Record one attempt after dispatch; return a warning when a pattern reaches the warn line.

        Args:
            tool: the tool name the model asked for.
            arguments: the arguments the attempt ran with.
            result_text: what the model reads back (soft errors included).
            is_error: whether the result is a soft error (feeds the alternation check).
            available: False when the name is not available; all such calls to one name form
                one pattern whatever their arguments and results.

        Returns:
            A ``LoopWarning`` the first time a pattern reaches ``warn_threshold`` (below the stop).
        """
        config = self.config
        if not config.window:  # no window: nothing is ever recorded
            return None
        if not available:
            args, digest = UNAVAILABLE_ARGUMENTS, None
        else:  # canonical_arguments and result_digest, inlined: the same values, two calls fewer
            try:  # canonical_arguments' C encoder, called here; the function when it raises
                args = "".join(_UNCHECKED(arguments, 0)) if _UNCHECKED else _CANONICAL(arguments)
            except Exception:  # (or raises the same)
                args = canonical_arguments(arguments)
            data = result_text.encode("utf-8", "surrogatepass")
            digest = (_crc32(data) << 32) | _adler32(data) if data else None
        signature: _Signature = (tool, args, digest)
        key = (tool, args)
        live = self._live_hash
        live = live if live is not _NO_LIVE else self._own()  # (the first operation)
        last = live.get(key, _ABSENT)  # one lookup (a live result may be None: an empty text)
        if last is not _ABSENT and last != digest:  # a changed result is progress: older ones drop
            self._drop((tool, args, last))
        window = self._window
        if len(window) >= config.window:
            self._evict(window.pop(0))
        window.append(signature)
        counts = self._counts
        count = counts.get(signature, 0) + 1
        counts[signature] = count
        live[key] = digest
        if 0 < config.stop_threshold <= count:
            self._arm(signature)
        alternation = self._alternation
        if is_error or alternation is not _NO_ALTERNATION:  # (a success without a tail: none)
            alternation = self._tail(signature, is_error)
        warn = config.warn_threshold
        if not warn:  # below the warn line nothing warns (the checks below, not called)
            return None
        found = self._repetition_warning(signature, count) if count >= warn else None
        if found is None and alternation.length // 2 >= warn:
            return self._alternation_warning()
        return found

    def _arm(self, signature: _Signature) -> None:
        """``signature`` reached the stop line: ``check()`` reports it before the next call."""
        if self._at_stop is _EMPTY:
            self._at_stop = set()
        self._at_stop.add(signature)

    def _tail(self, signature: _Signature, is_error: bool) -> _Alternation:
        """The failing tail after one more operation: a failure extends it, a success ends it."""
        if not is_error:
            self._alternation = _NO_ALTERNATION
        elif self._alternation is _NO_ALTERNATION:  # the first failing operation: a tail of its own
            self._alternation = _Alternation()
            self._alternation.push(signature, is_error)
        else:
            self._alternation.push(signature, is_error)
        return self._alternation

    def _is_stop(self, count: int) -> bool:
        return 0 < self.config.stop_threshold <= count

    def _stop_signature(self) -> _Signature | None:
        if not self._at_stop:
            return None
        return min(self._at_stop, key=lambda s: (-self._counts[s], _pattern(s)))

    def _alternation_at_stop(self) -> bool:
        return 0 < self._alternation_stop <= self._alternation.cycles

    def _repetition_warning(self, signature: _Signature, count: int) -> LoopWarning | None:
        warn = self.config.warn_threshold
        if not warn or count < warn or self._is_stop(count) or signature in self._warned:
            return None
        if self._warned is _EMPTY:
            self._warned = set()
        self._warned.add(signature)
        return LoopWarning(_pattern(signature), count)

    def _alternation_warning(self) -> LoopWarning | None:
        alternation, warn = self._alternation, self.config.warn_threshold
        if not warn or alternation.warned or alternation.cycles < warn:
            return None
        if self._alternation_at_stop():
            return None
        alternation.warned = True
        return LoopWarning(f"{alternation.description()} alternating", alternation.cycles)

    def _drop(self, signature: _Signature) -> None:
        """Stop counting every window entry of ``signature`` (they are evicted later)."""
        count = self._counts.pop(signature, 0)
        if count:
            if self._dead is _NO_DEAD:
                self._dead = {}
            self._dead[signature] = self._dead.get(signature, 0) + count
        self._forget(signature)

    def _drop_alternation(self) -> None:
        alternation = self._alternation
        for signature in (alternation.previous, alternation.before_previous):
            if signature is not None:
                self._drop(signature)
        self._alternation = _NO_ALTERNATION  # an empty tail again

    def _evict(self, signature: _Signature) -> None:
        dead = self._dead.get(signature, 0)
        if dead:
            if dead == 1:
                del self._dead[signature]
            else:
                self._dead[signature] = dead - 1
            return
        count = self._counts[signature] - 1
        if count:
            self._counts[signature] = count
            if not self._is_stop(count):
                self._at_stop.discard(signature)
        else:
            del self._counts[signature]
            self._forget(signature)

    def _forget(self, signature: _Signature) -> None:
        key = (signature[0], signature[1])
        if key in self._live_hash and self._live_hash[key] == signature[2]:
            del self._live_hash[key]
        self._warned.discard(signature)
        self._at_stop.discard(signature)
