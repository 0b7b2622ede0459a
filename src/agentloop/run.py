"""Run records: ``Run``, ``Turn`` and ``ConversationSummary``, and their plain-data forms.

A ``Run`` survives in ``agent.runs`` whatever happened (the audit trail); ``stop_reason`` holds
the ``AgentLoopError`` that ended it, None when it completed. ``to_dict``/``from_dict``
round-trip everything but the two process-local timestamps.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic

import pydantic_core
from typing_extensions import TypeVar

from agentloop import errors
from agentloop.errors import AgentLoopError, AttemptRecord, InternalError
from agentloop.messages import Message, ToolCallPart, ToolResultPart, Usage

__all__ = [
    "TRUNCATION_REASONS",
    "ConversationSummary",
    "OutputT",
    "Run",
    "Turn",
    "error_from_dict",
    "error_to_dict",
]

OutputT = TypeVar("OutputT", default=str | None)
"""The type of ``Run.output``: the agent's ``output_type``, or ``str | None`` without one."""

TRUNCATION_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})
"""Finish reasons that mean the reply stopped at the output-token limit (all three wire formats)."""


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """Where a conversation stood when an error ended its run."""

    run_id: str
    turns_completed: int
    tool_calls: int
    messages: int
    input_tokens: int
    output_tokens: int
    last_model: str | None

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return dataclasses.asdict(self)


@dataclass(slots=True)
class Turn:
    """One model call plus the dispatch of the tool calls it asked for."""

    index: int
    model: str
    tool_calls: list[ToolCallPart] = field(default_factory=list)
    tool_results: list[ToolResultPart] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return {
            "index": self.index,
            "model": self.model,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "tool_results": [r.to_dict() for r in self.tool_results],
            "usage": self.usage.to_dict(),
            "stop_reason": self.stop_reason,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        """Rebuild from ``to_dict`` output."""
        return cls(
            index=int(data["index"]),
            model=str(data["model"]),
            tool_calls=[
                ToolCallPart(c["id"], c["name"], dict(c["arguments"])) for c in data["tool_calls"]
            ],
            tool_results=[
                ToolResultPart(r["call_id"], r["name"], r["content"], bool(r["is_error"]))
                for r in data["tool_results"]
            ],
            usage=Usage.from_dict(data.get("usage", {})),
            stop_reason=data.get("stop_reason"),
            text=data.get("text", ""),
        )


@dataclass(slots=True, eq=False)
class Run(Generic[OutputT]):
    """One call of ``agent.run()``: its input, output, turns, messages and how it ended.

    ``output`` is the final answer: an instance of the agent's ``output_type`` for a typed agent,
    else the final reply's text; None while the run has not completed (a failed run in
    ``agent.runs``). After ``from_dict`` a typed output is its JSON form (dicts and lists).
    """

    id: str
    input: str
    output: OutputT = None  # type: ignore[assignment]
    stop_reason: AgentLoopError | None = None
    turns: list[Turn] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    unfinished_input: str | None = None
    started_at: float | None = None
    ended_at: float | None = None

    @property
    def truncated(self) -> bool:
        """Whether the final reply stopped at the output-token limit (never silent)."""
        return bool(self.turns) and self.turns[-1].stop_reason in TRUNCATION_REASONS

    @property
    def tool_calls(self) -> int:
        """How many tool calls the model asked for in this run."""
        return sum(len(t.tool_calls) for t in self.turns)

    def summary(self) -> ConversationSummary:
        """A ``ConversationSummary`` of this run so far."""
        return ConversationSummary(
            run_id=self.id,
            turns_completed=len(self.turns),
            tool_calls=self.tool_calls,
            messages=len(self.messages),
            input_tokens=self.usage.input_tokens,
            output_tokens=self.usage.output_tokens,
            last_model=self.turns[-1].model if self.turns else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready); timestamps are process-local and left out."""
        return {
            "id": self.id,
            "input": self.input,
            "output": _jsonable(self.output),
            "stop_reason": None if self.stop_reason is None else error_to_dict(self.stop_reason),
            "turns": [t.to_dict() for t in self.turns],
            "messages": [m.to_dict() for m in self.messages],
            "usage": self.usage.to_dict(),
            "unfinished_input": self.unfinished_input,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Run[Any]:
        """Rebuild from ``to_dict`` output (``stop_reason`` becomes the same error class)."""
        stop = data.get("stop_reason")
        output: Any = data.get("output")  # the JSON form of a typed output
        return Run(
            id=str(data["id"]),
            input=str(data["input"]),
            output=output,
            stop_reason=None if stop is None else error_from_dict(stop),
            turns=[Turn.from_dict(t) for t in data.get("turns", ())],
            messages=[Message.from_dict(m) for m in data.get("messages", ())],
            usage=Usage.from_dict(data.get("usage", {})),
            unfinished_input=data.get("unfinished_input"),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Run):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return pydantic_core.to_jsonable_python(value, fallback=str)


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
    """Rebuild an error serialised by ``error_to_dict`` (unknown classes become InternalError)."""
    cls = getattr(errors, str(data.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, AgentLoopError)):
        return InternalError(str(data.get("message", "")))
    error = cls.__new__(cls)
    error.args = tuple(data.get("args", ()))
    error.message = str(data.get("raw_message", data.get("message", "")))
    error.summary = None
    attributes = dict(data.get("attributes", {}))
    if "attempt_log" in attributes:
        attributes["attempt_log"] = tuple(_attempt(r) for r in attributes["attempt_log"])
    if isinstance(error, errors.ProviderError) and attributes.get("phase") is not None:
        attributes["phase"] = errors.FailurePhase(attributes["phase"])
    partial = attributes.get("partial")
    if isinstance(error, errors.StreamError) and isinstance(partial, dict) and "role" in partial:
        attributes["partial"] = Message.from_dict(partial)
    error.__dict__.update(attributes)
    return error


def _attempt(record: Mapping[str, Any]) -> AttemptRecord:
    phase = record.get("phase")
    return AttemptRecord(
        attempt=int(record["attempt"]),
        error_type=record.get("error_type"),
        status_code=record.get("status_code"),
        phase=None if phase is None else errors.FailurePhase(phase),
        request_sent=record.get("request_sent"),
        duration_seconds=float(record.get("duration_seconds", 0.0)),
        wait_seconds=float(record.get("wait_seconds", 0.0)),
    )
