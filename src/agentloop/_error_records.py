"""Errors and messages as records store them, and read back without trusting the record.

``error_to_dict`` keeps an ``AgentLoopError`` as its class name, message and attributes;
``error_from_dict`` rebuilds it, checking every attribute (an unknown class becomes
``InternalError``; nothing stored may replace what the class defines). ``message_from_dict`` reads
a stored message. A malformed field is an ``InvalidInput`` naming its path. ``agentloop.run``
re-exports the public three.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from agentloop import errors
from agentloop._util.records import as_object as _object
from agentloop._util.records import at_path as _at
from agentloop._util.records import bad_kind as _bad
from agentloop._util.records import checked_field as _field
from agentloop._util.records import each_of as _each
from agentloop.errors import (
    AgentLoopError,
    AttemptRecord,
    ConversationSummary,
    InternalError,
    InvalidInput,
)
from agentloop.messages import Message

__all__ = ["error_from_dict", "error_to_dict", "message_from_dict", "stored_error"]


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, AttemptRecord):
        return {k: _plain(getattr(value, k)) for k in AttemptRecord.__dataclass_fields__}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, ConversationSummary | Message):
        return value.to_dict()
    return value


def error_to_dict(error: AgentLoopError) -> dict[str, Any]:
    """An error as its class name, message and attributes."""
    attributes = {k: _plain(v) for k, v in error.attributes().items()}
    return {
        "type": type(error).__name__,
        "message": str(error),
        "raw_message": error.message,
        "args": _plain(list(error.args)),
        "attributes": attributes,
    }


def error_from_dict(data: Mapping[str, Any]) -> AgentLoopError:
    """Rebuild an error serialised by ``error_to_dict`` (unknown classes become InternalError).

    Raises:
        InvalidInput: A field is missing or malformed; the message names it by its path.
    """
    return stored_error(data, "")


def message_from_dict(data: object, path: str = "message") -> Message:
    """``Message.from_dict`` for a record read back: ``InvalidInput`` names ``path`` on failure."""
    try:
        return Message.from_dict(_object(data, path))
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: not a message: {exc.message}") from exc
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        detail = f"{type(exc).__name__}: {exc}"[:200]
        raise InvalidInput(f"{path}: not a message ({detail})") from exc


def stored_error(data: object, path: str) -> AgentLoopError:
    """The error stored at ``path`` (``error_from_dict`` naming where it sits in a record)."""
    data = _object(data, path)
    name = _field(data, "type", path, "str")
    message = _field(data, "message", path, "str", default="")
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, AgentLoopError)):
        return InternalError(message)
    error = cls.__new__(cls)
    error.args = tuple(_field(data, "args", path, "list", default=()))
    error.message = _field(data, "raw_message", path, "str", default=message)
    error.summary = None
    error.__dict__.update(_attributes(cls, data, _at(path, "attributes")))
    return error


_ATTRIBUTE_KINDS = {"status_code": "int", "retry_after": "number", "request_sent": "bool",
                    "attempts": "count", "retry_wait_seconds": "number",
                    "should_retry": "bool"}  # fmt: skip
_CLASS_DEFAULTS = frozenset({"should_retry"})
"""Declared data attributes with a class-level default: a stored value may set them."""


def _attributes(cls: type[AgentLoopError], data: Mapping[str, Any], path: str) -> dict[str, Any]:
    """An error's stored attributes, each checked; none may shadow what the class defines."""
    attributes = dict(_object(data.get("attributes", {}), path))
    for name in attributes:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise InvalidInput(f"{path}: {name!r} is not an attribute name")
        if name in ("message", "summary", "args") or (
            hasattr(cls, name) and name not in _CLASS_DEFAULTS
        ):
            raise InvalidInput(f"{_at(path, name)}: would replace {cls.__name__}.{name}")
        kind = _ATTRIBUTE_KINDS.get(name)
        if kind is not None:
            _field(attributes, name, path, kind, default=None)
    if "attempt_log" in attributes:
        attributes["attempt_log"] = tuple(_each(attributes, "attempt_log", path, _attempt))
    if issubclass(cls, errors.ProviderError) and attributes.get("phase") is not None:
        attributes["phase"] = _phase(attributes["phase"], _at(path, "phase"))
    partial = attributes.get("partial")
    if issubclass(cls, errors.StreamError) and isinstance(partial, Mapping) and "role" in partial:
        attributes["partial"] = message_from_dict(partial, _at(path, "partial"))
    return attributes


_PHASES = tuple(p.value for p in errors.FailurePhase)


def _phase(value: object, path: str) -> errors.FailurePhase:
    if isinstance(value, str) and value in _PHASES:
        return errors.FailurePhase(value)
    raise _bad(path, f"one of {', '.join(_PHASES)}", value)


def _attempt(data: object, path: str) -> AttemptRecord:
    record = _object(data, path)
    phase = record.get("phase")
    return AttemptRecord(
        attempt=_field(record, "attempt", path, "int"),
        error_type=_field(record, "error_type", path, "str", default=None),
        status_code=_field(record, "status_code", path, "int", default=None),
        phase=None if phase is None else _phase(phase, _at(path, "phase")),
        request_sent=_field(record, "request_sent", path, "bool", default=None),
        duration_seconds=float(_field(record, "duration_seconds", path, "number", default=0.0)),
        wait_seconds=float(_field(record, "wait_seconds", path, "number", default=0.0)),
    )
