"""Pausing for people (SPEC 17): what a paused run waits on, and the decisions that answer it.

A call to a tool declared ``@tool(requires_approval=True)`` (with no ``approver`` on the agent),
to a tool declared ``@tool(external=True)``, or one a hook answered ``Ask`` in a run with
``RunConfig(headless=False)`` and no approver, is **pending**: the run returns normally with
``run.paused`` True and ``run.pending`` a tuple of ``PendingCall``. The application answers each
by its call id with one decision and continues the same run: ``await agent.continue_run(
decisions={call_id: Approve()})``.

- ``Approve()`` runs an approval call as the model asked.
- ``Edit(arguments)`` runs an approval call with new arguments (validated as the model's are).
- ``Deny(message=None)`` answers either kind: the model reads ``User denied permission``
  (``: <message>`` appended when given).
- ``Answer(content)`` is an external call's result (a string, or a value made into text as tool
  outputs are; content that cannot be made into text is ``InvalidInput`` before anything runs).

An approval is never spent on nothing: ``check_tools`` refuses an ``Approve`` or ``Edit`` for a
call whose tool the agent of its turn does not have (``InvalidInput`` naming the tool, before
anything is recorded), so the run stays paused for a process that has it. Every face that
decides uses it through ``agentloop.engine.pause.check_agent_tools``.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import field
from typing import Any, Literal, TypeAlias

from agentloop._util.slots import record
from agentloop.errors import InvalidInput
from agentloop.messages import ToolCallPart

__all__ = [
    "DENIED_TEXT",
    "LOST_TEXT",
    "Answer",
    "Approve",
    "Decision",
    "Deny",
    "Edit",
    "PendingCall",
    "PendingKind",
    "check_decisions",
    "check_tools",
    "decision_from_dict",
    "pause_fields",
]

PendingKind: TypeAlias = Literal["approval", "external"]

DENIED_TEXT = "User denied permission"
"""What the model reads for a denied call (``: <message>`` appended when the denial has one)."""

LOST_TEXT = "the approved call started but its result was lost; it was not run again"
"""What the model reads for an approved call that had started when its process died."""


@record
class PendingCall:
    """A tool call the run waits on.

    ``call`` is the model's ``ToolCallPart``, ``kind`` ``"approval"`` or ``"external"``, and
    ``message`` the hook's ``Ask`` text, or None.
    """

    call: ToolCallPart
    kind: PendingKind
    message: str | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True)
    """The agents from the root to the one whose call this is (empty: the run's own agent)."""

    @property
    def id(self) -> str:
        """The call's id: the key of its decision."""
        return self.call.id

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "call": {
                "id": self.call.id,
                "name": self.call.name,
                "arguments": dict(self.call.arguments),
            },
            "kind": self.kind,
            "message": self.message,
            "path": list(self.path),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingCall:
        """Rebuild from ``to_dict`` output; ``InvalidInput`` names a malformed field."""
        try:
            raw = data["call"]
            call = ToolCallPart(str(raw["id"]), str(raw["name"]), dict(raw["arguments"]))
            kind = data["kind"]
            message = data.get("message")
            path = tuple(str(p) for p in data.get("path", ()))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInput(f"a stored pending call is malformed: {exc!r}") from exc
        if not isinstance(call, ToolCallPart) or kind not in ("approval", "external"):
            raise InvalidInput(f"a stored pending call is malformed: {dict(data)!r}")
        return cls(call, kind, message if isinstance(message, str) else None, path=path)


@record
class Approve:
    """Run the approval call as the model asked."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the run record keeps the decisions applied)."""
        return {"kind": "approve"}


@record
class Edit:
    """Run the approval call with ``arguments`` instead (validated as the model's are)."""

    arguments: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the run record keeps the decisions applied)."""
        return {"kind": "edit", "arguments": dict(self.arguments)}


@record
class Deny:
    """Refuse either kind of call; the model reads ``User denied permission[: message]``."""

    message: str | None = None

    @property
    def text(self) -> str:
        """What the model reads."""
        return DENIED_TEXT if not self.message else f"{DENIED_TEXT}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the run record keeps the decisions applied)."""
        return {"kind": "deny", "message": self.message}


@record
class Answer:
    """An external call's result: a string, or a value made into text as tool outputs are."""

    content: Any

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the run record keeps the decisions applied)."""
        import pydantic_core

        return {
            "kind": "answer",
            "content": pydantic_core.to_jsonable_python(self.content, fallback=str),
        }


Decision: TypeAlias = Approve | Edit | Deny | Answer

_FITS: dict[type[Any], frozenset[str]] = {
    Approve: frozenset({"approval"}),
    Edit: frozenset({"approval"}),
    Deny: frozenset({"approval", "external"}),
    Answer: frozenset({"external"}),
}


def decision_from_dict(data: Mapping[str, Any]) -> Decision:
    """Rebuild a decision from ``to_dict`` output."""
    kind = data.get("kind")
    if kind == "approve":
        return Approve()
    if kind == "edit" and isinstance(data.get("arguments"), Mapping):
        return Edit(dict(data["arguments"]))
    if kind == "deny":
        message = data.get("message")
        return Deny(message if isinstance(message, str) else None)
    if kind == "answer":
        return Answer(data.get("content", ""))
    raise InvalidInput(f"a stored decision is malformed: {dict(data)!r}")


def pause_fields(
    pending: tuple[PendingCall, ...],
    decisions: list[dict[str, Any]],
    paused_turn: dict[str, Any] | None,
) -> dict[str, Any]:
    """A run record's pause fields (``Run.to_dict``): absent for a run that never paused."""
    data: dict[str, Any] = {"decisions": decisions} if decisions else {}
    if pending:
        data["pending"] = [p.to_dict() for p in pending]
        data["paused_turn"] = paused_turn
    return data


def check_decisions(pending: tuple[PendingCall, ...], decisions: object) -> dict[str, Decision]:
    """The decisions by call id, when they answer ``pending`` exactly; else ``InvalidInput``.

    Every pending call needs exactly one decision of a kind that fits it; a missing, unknown or
    unfitting decision names the call and the fix, and nothing is changed.
    """
    if not isinstance(decisions, Mapping):
        raise InvalidInput(
            "decisions must be a dict of call id to decision, e.g. "
            "decisions={run.pending[0].id: Approve()}, got " + type(decisions).__name__
        )
    by_id = {p.call.id: p for p in pending}
    unknown = [k for k in decisions if k not in by_id]
    if unknown:
        raise InvalidInput(
            f"decision for {unknown[0]!r}, which is not a pending call of this run; "
            f"pending: {', '.join(repr(k) for k in by_id) or 'none'}"
        )
    missing = [k for k in by_id if k not in decisions]
    if missing:
        waiting = by_id[missing[0]]
        raise InvalidInput(
            f"no decision for pending call {missing[0]!r} (tool '{waiting.call.name}', "
            f"{waiting.kind}): every pending call needs exactly one decision"
        )
    checked: dict[str, Decision] = {}
    for call_id, decision in decisions.items():
        fits = _FITS.get(type(decision))
        kind = by_id[call_id].kind
        if fits is None:
            raise InvalidInput(
                f"decision for {call_id!r} is {type(decision).__name__}, not a decision: use "
                "Approve(), Edit(arguments), Deny(message) or Answer(content) "
                "(from agentloop import Approve, ...)"
            )
        if kind not in fits:
            allowed = (
                "Approve(), Edit(arguments) or Deny()"
                if kind == "approval"
                else ("Answer(content) or Deny()")
            )
            raise InvalidInput(
                f"decision for {call_id!r} is {type(decision).__name__}, which does not fit an "
                f"{kind} call (tool '{by_id[call_id].call.name}'): use {allowed}"
            )
        if isinstance(decision, Edit) and not isinstance(decision.arguments, Mapping):
            raise InvalidInput(
                f"Edit for {call_id!r} needs a dict of arguments, got "
                f"{type(decision.arguments).__name__}"
            )
        if isinstance(decision, Answer):
            _check_answer(call_id, decision)
        checked[call_id] = decision
    return checked


def _check_answer(call_id: str, answer: Answer) -> None:
    """``InvalidInput`` when the answer cannot be recorded and made into text (SPEC 17)."""
    try:
        answer.to_dict()
    except Exception as exc:  # a circular list, bytes that are no text, a str() that raises
        raise InvalidInput(
            f"Answer for {call_id!r}: its content ({type(answer.content).__name__}) cannot be "
            f"made into text ({type(exc).__name__}: {exc}); answer with a string, or plain "
            "data (numbers, lists and dicts of them): Answer(str(value))"
        ) from exc


ToolNames: TypeAlias = Callable[[tuple[str, ...]], Container[str] | None]
"""The tool names of the agent at a pending call's ``path`` (None: not known, not checked)."""


def check_tools(
    pending: tuple[PendingCall, ...],
    decisions: Mapping[str, Decision],
    tools: ToolNames,
    *,
    why: Callable[[str], str] | None = None,
) -> None:
    """``InvalidInput`` naming the tool when an approval would be spent on nothing (SPEC 17).

    An ``Approve`` or ``Edit`` runs the call's tool: when the agent of its turn (``tools`` of
    the call's ``path``) does not have it, the decision is refused before anything is recorded,
    and the run stays paused. ``Deny`` and ``Answer`` need no tool. ``why(tool)``: words put
    after "does not have" (the toolsets' check says which deps decided).
    """
    for waiting in pending:
        decision = decisions.get(waiting.call.id)
        if not isinstance(decision, Approve | Edit):
            continue
        names = tools(waiting.path)
        if names is None or waiting.call.name in names:
            continue
        agent = f"agent '{waiting.path[-1]}'" if waiting.path else "the agent"
        because = "" if why is None else why(waiting.call.name)
        raise InvalidInput(
            f"{type(decision).__name__} for {waiting.call.id!r} would run tool "
            f"'{waiting.call.name}', which {agent} continuing the run does not have{because}: "
            "nothing was recorded and the run stays paused; continue it with an agent built with "
            "that tool, Agent(tools=...) or Agent(toolsets=...), or pass the toolsets that "
            "have it again, continue_run(toolsets=...) (those given to run(toolsets=...) stay "
            "with the session that ran it, in its process), or Deny the call"
        )
