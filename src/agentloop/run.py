"""Run records: ``Run``, ``Turn`` and ``ConversationSummary``, and their plain-data forms.

A ``Run`` survives in ``agent.runs`` whatever happened (the audit trail); ``stop_reason`` holds
the ``AgentLoopError`` that ended it, None when it completed. ``to_dict``/``from_dict``
round-trip everything but the two process-local timestamps. ``from_dict`` trusts nothing it
reads (a record may come from a damaged store): a malformed field is an ``InvalidInput`` that
names it by its path (``turns[2].usage.input_tokens: expected a non-negative integer, got a
string``), never a bare ``KeyError``/``TypeError``/``AttributeError``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, Generic, TypeAlias

import pydantic_core
from typing_extensions import TypeVar

from agentloop._error_records import error_from_dict, error_to_dict, message_from_dict, stored_error
from agentloop._util.chain import Link, items
from agentloop._util.peers import RUN_WORDS, no_attribute
from agentloop._util.records import as_object as _object
from agentloop._util.records import at_path as _at
from agentloop._util.records import checked_field as _field
from agentloop._util.records import each_of as _each
from agentloop._util.slots import record
from agentloop.batching import BatchWait
from agentloop.errors import (
    AgentLoopError,
    ConversationSummary,
    InvalidInput,
)
from agentloop.media import MediaPart, media_from_dict
from agentloop.messages import Message, ToolCallPart, ToolResultPart, Usage
from agentloop.pausing import PendingCall, pause_fields
from agentloop.pricing import sum_costs, turn_cost

__all__ = [
    "TRUNCATION_REASONS",
    "ConversationSummary",
    "DepsT",
    "OutputT",
    "Run",
    "RunContext",
    "Turn",
    "error_from_dict",
    "error_to_dict",
    "message_from_dict",
]

_NO_USAGE = Usage()
"""The usage of a turn or run that reported none (frozen: one shared by all)."""

OutputT = TypeVar("OutputT", default=str | None)
"""The type of ``Run.output``: the agent's ``output_type``, or ``str | None`` without one."""

DepsT = TypeVar("DepsT", default=Any)
"""The type of ``ctx.deps``: what the application passed as ``run(..., deps=...)``."""


class RunContext(Generic[DepsT]):
    """What a run's callbacks may know: ``deps``, the run's id and its session's id.

    A dynamic system prompt (``Agent(instructions=fn)``, ``fn(ctx) -> str``) is given one at the
    start of each run. A tool's ``ToolContext`` is one too, so a tool may declare its first
    parameter ``ctx: RunContext[MyDeps]`` (the pydantic-ai spelling) as well as
    ``ctx: ToolContext[MyDeps]``.
    """

    __slots__ = ("agent", "deps", "run_id", "session_id", "turn")

    def __init__(
        self,
        *,
        run_id: str,
        session_id: str,
        deps: DepsT = None,  # type: ignore[assignment]
        turn: int = 0,
        agent: str | None = None,
    ) -> None:
        self.deps: DepsT = deps
        self.run_id, self.session_id, self.agent = run_id, session_id, agent  # agent: SPEC 26
        self.turn = turn

    def __repr__(self) -> str:
        return f"RunContext(run_id={self.run_id!r}, session_id={self.session_id!r})"


TRUNCATION_REASONS = frozenset(
    {
        "length",  # OpenAI Chat Completions
        "max_tokens",  # Anthropic
        "MAX_TOKENS",  # Gemini
        "max_output_tokens",  # OpenAI Responses (an incomplete response's reason)
        "model_context_window_exceeded",  # Anthropic: the context window filled while writing
    }
)
"""Stop reasons that mean the reply was cut off: at the output-token limit, or because the
context window filled while the model wrote (every provider's spelling)."""


@record(frozen=False)
class Turn:
    """One model call plus the dispatch of the tool calls it asked for."""

    index: int
    model: str
    tool_calls: list[ToolCallPart] = field(default_factory=list)
    tool_results: list[ToolResultPart] = field(default_factory=list)
    usage: Usage = _NO_USAGE
    stop_reason: str | None = None
    text: str = ""
    thinking: str = ""
    """The reply's readable reasoning (its ``ThinkingPart`` texts joined; "" when none)."""
    latency_seconds: float | None = None
    """How long the model call took (monotonic seconds; None when not measured)."""
    durations: dict[str, float] | None = None
    """Each tool call's seconds by call id (stored beside its result as ``duration_seconds``)."""
    warnings: list[str] | None = None
    """The safety stack's warnings during the turn (loop, convergence, budget), as text."""
    agent: str | None = None
    """The active agent's handoff name (SPEC 26); None for the run's starting agent."""
    batch: bool = False
    """The turn's reply came from a provider batch (SPEC 25), priced at the batch price."""

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (``thinking``, latency, durations and warnings only when present)."""
        took = self.durations or {}
        data = {
            "index": self.index,
            "model": self.model,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "tool_results": [
                {**r.to_dict(), "duration_seconds": took[r.call_id]}
                if r.call_id in took
                else r.to_dict()
                for r in self.tool_results
            ],
            "usage": self.usage.to_dict(),
            "stop_reason": self.stop_reason,
            "text": self.text,
        }
        if self.thinking:
            data["thinking"] = self.thinking
        if self.latency_seconds is not None:
            data["latency_seconds"] = self.latency_seconds
        if self.warnings:
            data["warnings"] = list(self.warnings)
        if self.agent is not None:
            data["agent"] = self.agent
        if self.batch:
            data["batch"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        """Rebuild from ``to_dict`` output; ``InvalidInput`` names a malformed field."""
        return _turn(data, "")


class _Kept:
    """A run's one slot that is no field: its conversation's link (``agentloop._util.chain``).

    A run's end keeps the session's history there as a link shared with the runs before it
    (``agentloop.engine.kept``); ``conversation`` is never set on such a run: its first read
    makes the list and keeps it here, in the link's place.
    """

    __slots__ = ("_link",)

    _link: Link | list[Message] | None


@record(frozen=False, eq=False)
class Run(_Kept, Generic[OutputT]):
    """One call of ``agent.run()``: its input, output, turns, messages and how it ended.

    ``output`` is the final answer: an instance of the agent's ``output_type`` for a typed agent,
    else the final reply's text; None while the run has not completed (a failed run in
    ``agent.runs``). After ``from_dict`` a typed output is its JSON form (dicts and lists).
    """

    id: str
    input: RunInput
    output: OutputT = None  # type: ignore[assignment]
    stop_reason: AgentLoopError | None = None
    turns: list[Turn] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    usage: Usage = _NO_USAGE
    unfinished_input: RunInput | None = None
    started_at: float | None = None
    ended_at: float | None = None
    session_id: str = ""
    """The session (conversation) the run belongs to."""
    conversation: list[Message] = field(default_factory=list, repr=False)
    """The committed, compacted transcript after the run (seed history included): what to pass
    as ``history=`` next time. Kept in memory only; ``messages`` is the stored audit trail.
    Later runs and edits of the session's history leave it as it was; a session's runs share
    what their conversations have in common, made a list at its first read."""
    pending: tuple[PendingCall, ...] = ()
    """The calls a paused run waits on (SPEC 17); empty for a run that is not paused."""
    decisions: list[dict[str, Any]] = field(default_factory=list, repr=False)
    """Every decision set applied to this run: ``{"at": time, "decisions": {call_id: ...}}``."""
    parent: dict[str, str] | None = field(default=None, repr=False)
    """A child agent's run (``as_tool``): the parent's ``session_id``, ``run_id``, ``call_id``
    and ``tool``, so a viewer nests it under the parent's tool call (SPEC 18)."""
    paused_turn: dict[str, Any] | None = field(default=None, repr=False)
    """A paused run's uncommitted turn (its reply and the results of the calls that ran)."""
    loaded_tools: list[str] = field(default_factory=list)
    """Deferred tools this run loaded (tool search, SPEC 22), in load order."""
    skills_read: list[str] = field(default_factory=list)
    """Skills this run read with ``load_skill`` (SPEC 22), in order."""
    memory: dict[str, Any] | None = field(default=None, repr=False)
    """Long-term memory (SPEC 27): ``namespace``, ``recalled`` ids, ``staged`` and ``committed``."""
    last_agent: str | None = None
    """The agent active when the run ended or paused (its handoff name; None: the starting one)."""
    thinking_prefix_mismatch: str | None = None
    """``"drop_block"`` when this run sent SPEC 28's escape hatch: stored with the run, so a
    resumed session keeps sending it (``ModelSettings.thinking_prefix_mismatch``)."""
    waiting: BatchWait | None = None
    """A batch run's model turn waiting in a provider batch (SPEC 25); None otherwise."""

    if not TYPE_CHECKING:  # for mypy a misspelt attribute stays an error it reports

        def __getattr__(self, name: str) -> Any:
            """A started run's list made at its first read; a peer library's word names ours.

            A run the engine starts (``started_run``) leaves ``_LATE`` unset: most runs never
            read them before their end replaces them, and an empty list less is one object less
            for the collector per run in flight. ``conversation`` stays unset: the run's end
            keeps a link (``_Kept``), made a list at the first read and kept in its place, so a
            later end (a paused run's) replaces it. A peer's word is SPEC 21's hint.
            """
            if name == "conversation":  # kept by the run's end as a link: a list made once
                link = self._link
                if type(link) is not list:
                    link = self._link = [] if link is None else items(link)
                return link
            if name in _LATE:
                made: list[Any] = []
                object.__setattr__(self, name, made)
                return made
            if name == "_link":  # no end kept a link yet (a run started or read from a record)
                return None
            public = [n for n in dir(type(self)) if not n.startswith("_")]
            raise no_attribute(self, name, public, RUN_WORDS)

    @property
    def paused(self) -> bool:
        """Whether the run waits on pending calls (``continue_run(decisions=...)``)."""
        return bool(self.pending)

    @property
    def truncated(self) -> bool:
        """Whether the final reply stopped at the output-token limit (never silent)."""
        return bool(self.turns) and self.turns[-1].stop_reason in TRUNCATION_REASONS

    @property
    def tool_calls(self) -> int:
        """How many tool calls the model asked for in this run."""
        return sum(len(t.tool_calls) for t in self.turns)

    @property
    def cost(self) -> float | None:
        """Estimated US dollars of this run's model calls; None when any part is unknown.

        Each turn is priced on its own usage and model by ``agentloop.pricing`` (the
        ``genai-prices`` table, cached input at its own rate). None, never 0, when a turn's
        model has no price, the table is not installed, or ``usage`` holds tokens no turn
        accounts for (a sub-agent's, rolled up without its model).
        """
        covered = sum((t.usage for t in self.turns), Usage())
        if covered != self.usage:
            return None
        return sum_costs(turn_cost(t.usage, t.model, t.batch) for t in self.turns)

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
            "input": _input_dict(self.input),
            "output": _jsonable(self.output),
            "stop_reason": None if self.stop_reason is None else error_to_dict(self.stop_reason),
            "turns": [t.to_dict() for t in self.turns],
            "messages": [m.to_dict() for m in self.messages],
            "usage": self.usage.to_dict(),
            "unfinished_input": None
            if self.unfinished_input is None
            else _input_dict(self.unfinished_input),
            "session_id": self.session_id,
            **pause_fields(self.pending, self.decisions, self.paused_turn),
            **({"parent": self.parent} if self.parent else {}),
            **({"memory": self.memory} if self.memory is not None else {}),
            **({"loaded_tools": self.loaded_tools} if self.loaded_tools else {}),
            **({"skills_read": self.skills_read} if self.skills_read else {}),
            **({"last_agent": self.last_agent} if self.last_agent else {}),
            **(
                {"thinking_prefix_mismatch": self.thinking_prefix_mismatch}
                if self.thinking_prefix_mismatch
                else {}
            ),
            **(
                {"waiting": self.waiting.to_dict(), "paused_turn": self.paused_turn}
                if self.waiting is not None
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Run[Any]:
        """Rebuild from ``to_dict`` output (``stop_reason`` becomes the same error class).

        Raises:
            InvalidInput: A field is missing or malformed; the message names it by its path.
        """
        data = _object(data, "")
        stop = _field(data, "stop_reason", "", "object", default=None)
        run = Run(
            id=_field(data, "id", "", "str"),
            input=_input(data.get("input"), "input"),
            output=data.get("output"),  # the JSON form of a typed output: any JSON value
            stop_reason=None if stop is None else stored_error(stop, "stop_reason"),
            turns=_each(data, "turns", "", _turn),
            messages=_each(data, "messages", "", message_from_dict),
            usage=_usage(data, ""),
            unfinished_input=None
            if data.get("unfinished_input") is None
            else _input(data["unfinished_input"], "unfinished_input"),
            session_id=_field(data, "session_id", "", "str", default=""),
            pending=tuple(PendingCall.from_dict(p) for p in data.get("pending") or ()),
            decisions=list(data.get("decisions") or ()),
            paused_turn=data.get("paused_turn"),
            loaded_tools=[str(n) for n in data.get("loaded_tools") or ()],
            skills_read=[str(n) for n in data.get("skills_read") or ()],
            parent=dict(data["parent"]) if isinstance(data.get("parent"), Mapping) else None,
            memory=dict(data["memory"]) if isinstance(data.get("memory"), Mapping) else None,
            last_agent=_field(data, "last_agent", "", "str", default=None),
            thinking_prefix_mismatch=_field(
                data, "thinking_prefix_mismatch", "", "str", default=None
            ),
            waiting=BatchWait.from_dict(data["waiting"]) if data.get("waiting") else None,
        )
        del run.conversation  # not stored: [] until a run's end here keeps its link (_Kept)
        return run

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Run):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]


_LATE = frozenset({"messages", "conversation", "decisions", "loaded_tools", "skills_read"})
"""The lists of a started run made at their first read (``Run.__getattr__``)."""


def started_run(run_id: str, input: RunInput, started_at: float, session_id: str) -> Run[Any]:
    """The record of a run starting now, as ``Run(...)`` builds it, its ``_LATE`` lists unset.

    Every other field is set here, one statement each (a loop over the fields costs more than
    the lists it saves); ``tests/test_run_started.py`` checks that no field is forgotten.
    """
    run: Run[Any] = object.__new__(Run)
    run.id = run_id
    run.input = input
    run.output = None
    run.stop_reason = None
    run.turns = []
    run.usage = _NO_USAGE
    run.unfinished_input = None
    run.started_at = started_at
    run.ended_at = None
    run.session_id = session_id
    run.pending = ()
    run.parent = None
    run.paused_turn = None
    run.memory = None
    run.last_agent = None
    run.thinking_prefix_mismatch = None
    run.waiting = None
    return run


RunInput: TypeAlias = "str | tuple[str | MediaPart, ...]"
"""A run's input as given: text, or text and media parts in order."""


def _input_dict(value: RunInput) -> str | list[Any]:
    if isinstance(value, str):
        return value
    return [v if isinstance(v, str) else v.to_dict() for v in value]


def _input(value: object, path: str) -> RunInput:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise InvalidInput(f"{path}: expected a string or a list, got {type(value).__name__}")
    items: list[str | MediaPart] = []
    for i, item in enumerate(value):
        media = media_from_dict(item) if isinstance(item, Mapping) else None
        if not isinstance(item, str) and media is None:
            raise InvalidInput(f"{path}[{i}]: expected a string or a media part")
        items.append(item if isinstance(item, str) else media)  # type: ignore[arg-type]
    return tuple(items)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return pydantic_core.to_jsonable_python(value, fallback=str)


# -- reading records back: every field checked, every failure naming its path -----------------


def _usage(data: Mapping[str, Any], path: str) -> Usage:
    """Every count of ``Usage`` (each field a non-negative integer; a missing one is 0)."""
    where = _at(path, "usage")
    usage = _object(_field(data, "usage", path, "object", default={}), where)
    counts = {name: _field(usage, name, where, "count", default=0) for name in _COUNTS}
    calls = _object(_field(usage, "provider_tool_calls", where, "object", default={}), where)
    at = _at(where, "provider_tool_calls")  # SPEC 24: kind -> count
    kinds = {str(kind): _field(calls, kind, at, "count", default=0) for kind in calls}
    return Usage(**counts, provider_tool_calls=kinds)


_COUNTS = tuple(f.name for f in dataclasses.fields(Usage) if f.name != "provider_tool_calls")


def _turn(data: object, path: str) -> Turn:
    data = _object(data, path)
    return Turn(
        index=_field(data, "index", path, "int"),
        model=_field(data, "model", path, "str"),
        tool_calls=_each(data, "tool_calls", path, _call),
        tool_results=_each(data, "tool_results", path, _result),
        usage=_usage(data, path),
        stop_reason=_field(data, "stop_reason", path, "str", default=None),
        text=_field(data, "text", path, "str", default=""),
        thinking=_field(data, "thinking", path, "str", default=""),
        latency_seconds=_field(data, "latency_seconds", path, "number", default=None),
        durations=_durations(data.get("tool_results")),
        warnings=[str(w) for w in _field(data, "warnings", path, "list", default=())] or None,
        agent=_field(data, "agent", path, "str", default=None),
        batch=data.get("batch") is True,
    )


def _durations(results: object) -> dict[str, float] | None:
    """Each stored tool result's ``duration_seconds`` by call id (None when none has one)."""
    if not isinstance(results, list):
        return None
    took = {
        str(r["call_id"]): float(r["duration_seconds"])
        for r in results
        if isinstance(r, Mapping)
        and "call_id" in r
        and isinstance(r.get("duration_seconds"), int | float)
    }
    return took or None


def _call(data: object, path: str) -> ToolCallPart:
    data = _object(data, path)
    arguments = _field(data, "arguments", path, "object")
    return ToolCallPart(
        _field(data, "id", path, "str"), _field(data, "name", path, "str"), dict(arguments)
    )


def _result(data: object, path: str) -> ToolResultPart:
    data = _object(data, path)
    return ToolResultPart(
        _field(data, "call_id", path, "str"),
        _field(data, "name", path, "str"),
        _field(data, "content", path, "str"),
        _field(data, "is_error", path, "bool", default=False),
    )
