"""Rows to and from their JSON columns; reading back, every damaged row an ``InvalidInput``.

The shared SQL (``_sql``) turns these into one ``MemoryBackendError`` per damaged run or
history, naming the run (or session) and the field: ``run 3f… is damaged: record field
record: turns[0].usage.input_tokens: expected a non-negative integer, got a string``. Nothing here
touches a driver; the caller fetched the rows. ``StoredRun`` is what a read returns.
Writing, ``to_json`` is the one encoder: compact, and a value that cannot be written is a
``MemoryBackendError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.messages import Message
from agentloop.run import Run, Turn, message_from_dict
from agentloop.safety.output import storable
from agentloop.store._status import RunStatus, status_of

__all__ = [
    "text_column",
    "StoredRun",
    "column",
    "describe",
    "from_record",
    "json_column",
    "messages_json",
    "stored_run",
    "to_json",
    "unfinished_run",
]


@record
class StoredRun:
    """One stored run record.

    Attributes:
        session_id: The session the run belongs to.
        run: The run; ``started_at`` and ``ended_at`` come from the store. While the run has no
            recorded end, ``run.turns`` and ``run.messages`` hold its completed turns only.
        finished: Whether the run's end (its finalize) was recorded.
        absorbed: How many of the run's messages a compaction commit already folded into the
            stored history (what a resume must not add again).
        resumptions: ``(wall-clock time, turn)`` of each ``continue_run`` that picked it up.
    """

    session_id: str
    run: Run
    finished: bool
    absorbed: int = 0
    resumptions: tuple[tuple[float, int], ...] = ()

    @property
    def status(self) -> RunStatus:
        """``running``, ``waiting``, ``paused``, ``completed`` or ``failed`` (SPEC 9).

        What the store's ``status`` column says of it (both follow the record, ``_status``).
        """
        return status_of(self.run, self.finished)


def to_json(value: Any) -> str:
    """``value`` as compact JSON text; ``MemoryBackendError`` when it cannot be written."""
    try:
        text = _ENCODE(value)
    except (ValueError, TypeError, RecursionError) as exc:
        raise MemoryBackendError(f"a record cannot be written as JSON: {describe(exc)}") from exc
    # A lone surrogate (a provider's half emoji, a non-UTF-8 file name) cannot be encoded for
    # any driver; escaped, it is JSON's own \udxxx escape, so it reads back exactly as it was.
    return storable(text)


def text_column(text: str) -> str:
    r"""Free text for a plain TEXT column (a run's input, a step key): always writable.

    Lone surrogates are escaped (``storable``) and NUL, which PostgreSQL text cannot hold,
    is written as ``\\x00``.
    """
    return storable(text).replace("\x00", "\\x00")


def _plain(value: Any) -> Any:
    """Values ``Run.to_dict`` leaves as objects (e.g. ``StreamError.partial``)."""
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else repr(value)


def _encoder() -> Callable[[Any], str]:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_plain)``, fast.

    ``json.dumps`` with options builds an encoder a call (11,000 instructions, as much as the
    JSON of a small turn); the C encoder is built once here instead. It keeps no record of
    the containers it is in (``check_circular``), so a value that contains itself is a
    ``RecursionError``, not a ``ValueError`` (both a ``MemoryBackendError`` from ``to_json``).
    """
    from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]

    if c_make_encoder is None:  # an interpreter without the C accelerator
        return json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_plain).encode
    encode = c_make_encoder(None, _plain, encode_basestring, None, ":", ",", False, False, True)

    def to_text(value: Any) -> str:
        return "".join(encode(value, 0))

    return to_text


_ENCODE = _encoder()


def messages_json(messages: Sequence[Message]) -> str:
    """A list of messages as one JSON column."""
    return to_json([m.to_dict() for m in messages])


def describe(exc: BaseException) -> str:
    """An exception as its class and first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def json_column(text: object, field: str) -> Any:
    """A stored JSON column, decoded; ``InvalidInput`` naming ``field`` when it does not parse."""
    if not isinstance(text, str | bytes):
        raise InvalidInput(f"{field}: expected JSON text, got {type(text).__name__}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(f"{field}: not JSON ({describe(exc)})") from exc


def column(value: Any, field: str, kinds: tuple[type, ...], *, nullable: bool = False) -> Any:
    """A column checked to be of ``kinds`` (SQLite keeps whatever type was written)."""
    if (value is None and nullable) or (isinstance(value, kinds) and not isinstance(value, bool)):
        return value
    raise InvalidInput(f"column {field}: expected {_names(kinds)}, got {type(value).__name__}")


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join(kind.__name__ for kind in kinds)


def from_record(data: Any, field: str, read: Callable[[Any], Any]) -> Any:
    """``read(data)`` (a ``from_dict``), its ``InvalidInput`` prefixed with ``field``."""
    try:
        return read(data)
    except InvalidInput as exc:
        raise InvalidInput(f"{field}: {exc.message}") from exc


def unfinished_run(run_id: str, input_: str, rows: Sequence[Sequence[Any]]) -> Run:
    """A run without a recorded end, rebuilt from its ``(number, turn, messages)`` turn rows."""
    run = Run(id=run_id, input=input_)
    for number, turn_json, messages_json in rows:
        where = f"turn {number}"
        turn: Turn = from_record(json_column(turn_json, where), where, Turn.from_dict)
        messages = json_column(messages_json, f"{where} messages")
        if not isinstance(messages, list):
            raise InvalidInput(
                f"{where} messages: expected an array, got {type(messages).__name__}"
            )
        run.turns.append(turn)
        run.usage = run.usage + turn.usage
        run.messages.extend(
            message_from_dict(m, f"{where} messages[{i}]") for i, m in enumerate(messages)
        )
    return run


def stored_run(
    row: Sequence[Any], turns: Sequence[Sequence[Any]], resumed: Sequence[Sequence[Any]]
) -> StoredRun:
    """A run from its ``agentloop_runs`` row (``RUN_COLUMNS``) and its other rows.

    ``turns`` are its ``(number, turn, messages)`` rows (read only while it has no record),
    ``resumed`` its ``(at, from_turn)`` resumptions.
    """
    run_id, session_id, input_, started_at, ended_at, absorbed, record = row
    column(session_id, "session_id", (str,))
    if record is not None:
        run = from_record(json_column(record, "record"), "record", Run.from_dict)
        if run.id != str(run_id):
            raise InvalidInput(f"record: id: {run.id!r:.40} in the row of run {run_id}")
    else:
        run = unfinished_run(str(run_id), column(input_, "input", (str,)), turns)
    run.started_at = column(started_at, "started_at", (int, float), nullable=True)
    run.ended_at = column(ended_at, "ended_at", (int, float), nullable=True)
    return StoredRun(
        session_id,
        run,
        record is not None,
        column(absorbed, "absorbed", (int,)),
        tuple(
            (float(column(at, "at", (int, float))), column(turn, "from_turn", (int,)))
            for at, turn in resumed
        ),
    )
