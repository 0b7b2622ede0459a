"""What a run looks like on the A2A wire (SPEC 26), pure: no I/O, no server.

A task is a run and a context a session. These functions build the protocol's own messages
(the official ``a2a-sdk``'s protobuf types) from ours, and read what a client sends::

    run ended              state            what the task carries
    completed              COMPLETED        artifact ``output``: the text, or a data part
                                            (a typed output's ``model_dump``)
    paused (SPEC 17)       INPUT_REQUIRED   status message: data part ``{"pending": [...]}``
    Cancelled              CANCELED
    input guardrail        REJECTED         status text ``GuardrailTripped: <message>``
    any other hard error   FAILED           status text ``<ErrorClass>: <message>`` (redacted)

A follow-up's decisions are one data part ``{"decisions": {call_id: decision}}`` where a
decision is ``"approve"``, ``"deny"``, ``{"deny": message}``, ``{"answer": value}`` or
``{"edit": {...}}``; ``decisions`` reads them into ours (``InvalidInput`` on a bad one).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic_core
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import ContentTypeNotSupportedError
from google.protobuf import json_format, struct_pb2

from agentloop.errors import InvalidInput
from agentloop.pausing import Answer, Approve, Decision, Deny, Edit, PendingCall
from agentloop.safety._client_text import served_failure

__all__ = [
    "OUTPUT",
    "TERMINAL",
    "agent_message",
    "data_part",
    "decisions",
    "error_text",
    "output_artifact",
    "pending_message",
    "state_name",
    "text_of",
]

OUTPUT = "output"
"""The id and name of a task's one artifact: the run's output."""

TERMINAL = frozenset(
    {
        pb.TASK_STATE_COMPLETED,
        pb.TASK_STATE_FAILED,
        pb.TASK_STATE_CANCELED,
        pb.TASK_STATE_REJECTED,
    }
)
"""The states a task never leaves."""


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input_required`` (the words of SPEC 26's soft text)."""
    return pb.TaskState.Name(state).removeprefix("TASK_STATE_").lower()


def data_part(value: Any) -> pb.Part:
    """A part carrying JSON ``value`` (made plain first: models dumped, other values as text)."""
    plain = pydantic_core.to_jsonable_python(value, fallback=str)
    part = pb.Part()
    json_format.ParseDict(plain, part.data)
    return part


def agent_message(task_id: str, context_id: str, parts: Sequence[pb.Part]) -> pb.Message:
    """A status message from the agent."""
    return pb.Message(
        message_id=uuid.uuid4().hex,
        context_id=context_id,
        task_id=task_id,
        role=pb.ROLE_AGENT,
        parts=list(parts),
    )


def output_artifact(output: Any) -> pb.Artifact:
    """The ``output`` artifact: text as a text part, anything else as a data part."""
    part = pb.Part(text=output) if isinstance(output, str) else data_part(output)
    return pb.Artifact(artifact_id=OUTPUT, name=OUTPUT, parts=[part])


def pending_message(task_id: str, context_id: str, pending: Sequence[PendingCall]) -> pb.Message:
    """An ``INPUT_REQUIRED`` status message: what the run waits on, as a data part."""
    waiting = [
        {
            "id": p.id,
            "name": p.call.name,
            "arguments": dict(p.call.arguments),
            "kind": p.kind,
            "message": p.message,
        }
        for p in pending
    ]
    return agent_message(task_id, context_id, [data_part({"pending": waiting})])


def error_text(error: BaseException) -> str:
    """A hard error's status text: ``<ErrorClass>: <message>``, redacted (no key, no path)."""
    message = served_failure(error, "A2A")  # the app's internals (a store, a governor) as words
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def refuse_files(message: pb.Message) -> None:
    """``ContentTypeNotSupportedError`` (-32005) for a file part (``raw`` or ``url``).

    The card's input mode is ``text/plain``: a file would otherwise be dropped unseen, and the
    agent answer as if it had seen it (SPEC 16 x 26).
    """
    for part in message.parts:
        if part.WhichOneof("content") in ("raw", "url"):
            kind = part.media_type or "a file"
            raise ContentTypeNotSupportedError(
                message=f"this agent takes text parts (text/plain), not {kind}: send text"
            )


def text_of(message: pb.Message) -> str:
    """The text of a message's text parts, joined by newlines ('' when it has none)."""
    return "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text")


def _data_of(message: pb.Message) -> list[Any]:
    return [
        json_format.MessageToDict(part.data)
        for part in message.parts
        if part.WhichOneof("content") == "data"
    ]


def decisions(message: pb.Message, pending: Sequence[PendingCall]) -> dict[str, Decision]:
    """The decisions a follow-up carries for ``pending``; ``InvalidInput`` naming the call ids.

    Only the shape is read here; ``check_decisions`` and the tools check happen at continue.
    """
    ids = ", ".join(repr(p.id) for p in pending)
    given = [d["decisions"] for d in _data_of(message) if isinstance(d, dict) and "decisions" in d]
    if len(given) != 1 or not isinstance(given[0], Mapping):
        raise InvalidInput(
            f"the task waits for decisions on its pending calls ({ids}): send one data part "
            '{"decisions": {call_id: "approve" | "deny" | {"deny": message} | '
            '{"answer": value} | {"edit": {...}}}}'
        )
    return {str(k): _decision(str(k), v, ids) for k, v in given[0].items()}


def _decision(call_id: str, value: object, ids: str) -> Decision:
    if value == "approve":
        return Approve()
    if value == "deny":
        return Deny()
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, inner),) = value.items()
        if kind == "deny" and (inner is None or isinstance(inner, str)):
            return Deny(inner)
        if kind == "answer":
            return Answer(inner)
        if kind == "edit" and isinstance(inner, Mapping):
            return Edit(dict(inner))
    raise InvalidInput(
        f'decision for {call_id!r} is {value!r}, not a decision: use "approve", "deny", '
        f'{{"deny": message}}, {{"answer": value}} or {{"edit": {{...}}}} (pending: {ids})'
    )


def struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    """A protobuf ``Struct`` of plain data."""
    out = struct_pb2.Struct()
    out.update(dict(value))
    return out
