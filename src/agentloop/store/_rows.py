"""Reading stored rows back: every damaged row an ``InvalidInput`` naming its field.

The shared SQL (``_sql``) turns these into one ``MemoryBackendError`` per damaged run or
history, naming the run (or session) and the field: ``run 3f… is damaged: record field
record: turns[0].usage.input_tokens: expected a non-negative integer, got a string``. Nothing here
touches a driver; the caller fetched the rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agentloop.errors import InvalidInput
from agentloop.run import Run, Turn, message_from_dict

__all__ = ["column", "describe", "from_record", "json_column", "unfinished_run"]


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
