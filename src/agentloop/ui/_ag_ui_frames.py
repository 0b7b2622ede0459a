"""AG-UI frames: an event's SSE text as ``EventEncoder`` writes it, and the run's own events.

A ``Frame`` is one event shape's frame as the encoder writes it, encoded once with a marker in
each string field and cut there; each use quotes its strings in (as ``json.dumps`` quotes them)
with one ``str.format``, so no pydantic model is built an event. ``Frame.around`` gives a
fragment event's frame cut around its ``delta``, for a message's many fragments.
``interrupt_of`` and ``error_event`` are the run-level events (the interrupt of a pending call,
RUN_ERROR for a hard error, its message worded for the client), built as models.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import pydantic_core
from ag_ui import core
from ag_ui.encoder import EventEncoder

from agentloop.errors import AgentLoopError
from agentloop.pausing import PendingCall
from agentloop.ui._client_view import ClientView

__all__ = [
    "MARK",
    "QUOTED_MARK",
    "REASONING_CONTENT",
    "REASONING_END",
    "REASONING_MESSAGE_END",
    "REASONING_MESSAGE_START",
    "REASONING_START",
    "RUN_SUCCESS",
    "STEP_FINISHED",
    "STEP_STARTED",
    "TEXT_CONTENT",
    "TEXT_END",
    "TEXT_START",
    "TOOL_ARGS",
    "TOOL_END",
    "TOOL_ERROR",
    "TOOL_RESULT",
    "TOOL_START",
    "Frame",
    "error_event",
    "interrupt_of",
    "plain",
    "quoted",
]

_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {"type": "object", "description": "Full replacement of the arguments."},
        "message": {"type": "string", "description": "Why, when denied (the model reads it)."},
    },
    "required": ["approved"],
}
_EXTERNAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {"description": "The call's result (text, or a value made into text)."},
        "approved": {"type": "boolean", "description": "false denies the call."},
        "message": {"type": "string"},
    },
}


quoted: Callable[[str], str] = json.encoder.encode_basestring_ascii
"""A str as a JSON string (what ``json.dumps`` does for one, without its set-up per call)."""
MARK = "@@agentloop-fragment@@"
QUOTED_MARK = quoted(MARK)
_FIELD = re.compile(r'"@@agentloop-field-(\d+)@@"')


class Frame:
    """One event shape's SSE frame as ``EventEncoder`` writes it, with a hole a string field.

    ``Frame(core.ToolCallEndEvent, "tool_call_id")("call_1")`` is
    ``EventEncoder().encode(core.ToolCallEndEvent(tool_call_id="call_1"))``: the model is built
    and encoded once (on first use) with a marker in each named field, and each call quotes
    its values into the holes. ``fixed`` are the shape's other fields, the same every time.
    """

    __slots__ = ("_fixed", "_format", "kind", "names")

    def __init__(self, kind: type[core.BaseEvent], *names: str, **fixed: Any) -> None:
        self.kind = kind
        self.names = names
        self._fixed = fixed
        self._format: str | None = None

    def _compile(self) -> str:
        fields: dict[str, Any] = {n: f"@@agentloop-field-{i}@@" for i, n in enumerate(self.names)}
        pieces = _FIELD.split(EventEncoder().encode(self.kind(**fields, **self._fixed)))
        literals = [p.replace("{", "{{").replace("}", "}}") for p in pieces[0::2]]
        holes = [f"{{{i}}}" for i in pieces[1::2]]
        self._format = literals[0] + "".join(
            h + lit for h, lit in zip(holes, literals[1:], strict=True)
        )
        return self._format

    def __call__(self, *values: str) -> str:
        """The frame with ``values`` (in the order of ``names``)."""
        form = self._format or self._compile()
        return form.format(*map(quoted, values))

    def around(self, *values: str) -> tuple[str, str]:
        """The frame cut where its last field (a fragment's ``delta``) goes."""
        before, _, after = self(*values, MARK).partition(QUOTED_MARK)
        return before, after


STEP_STARTED = Frame(core.StepStartedEvent, "step_name")
STEP_FINISHED = Frame(core.StepFinishedEvent, "step_name")
TEXT_START = Frame(core.TextMessageStartEvent, "message_id", role="assistant")
TEXT_CONTENT = Frame(core.TextMessageContentEvent, "message_id", "delta")
TEXT_END = Frame(core.TextMessageEndEvent, "message_id")
REASONING_START = Frame(core.ReasoningStartEvent, "message_id")
REASONING_MESSAGE_START = Frame(core.ReasoningMessageStartEvent, "message_id", role="reasoning")
REASONING_CONTENT = Frame(core.ReasoningMessageContentEvent, "message_id", "delta")
REASONING_MESSAGE_END = Frame(core.ReasoningMessageEndEvent, "message_id")
REASONING_END = Frame(core.ReasoningEndEvent, "message_id")
TOOL_START = Frame(core.ToolCallStartEvent, "tool_call_id", "tool_call_name", "parent_message_id")
TOOL_ARGS = Frame(core.ToolCallArgsEvent, "tool_call_id", "delta")
TOOL_END = Frame(core.ToolCallEndEvent, "tool_call_id")
TOOL_RESULT = Frame(core.ToolCallResultEvent, "message_id", "tool_call_id", "content", role="tool")
TOOL_ERROR = Frame(
    core.ToolCallResultEvent,
    "message_id",
    "tool_call_id",
    "content",
    role="tool",
    metadata={"agentloop": {"error": True}},
)
RUN_SUCCESS = Frame(
    core.RunFinishedEvent, "thread_id", "run_id", "result", outcome={"type": "success"}
)


def plain(value: Any) -> Any:
    return pydantic_core.to_jsonable_python(value, fallback=str)


def interrupt_of(pending: PendingCall) -> core.Interrupt:
    """The AG-UI interrupt of a pending call: its id is the call's id."""
    call = pending.call
    if pending.message:
        message = pending.message
    elif pending.kind == "approval":
        message = f"Allow the call to '{call.name}'?"
    else:
        message = f"The call to '{call.name}' waits for its result."
    info = {"kind": pending.kind, "tool": call.name, "arguments": plain(call.arguments)}
    if pending.path:
        info["path"] = list(pending.path)
    return core.Interrupt(
        id=call.id,
        reason="tool_call",
        message=message,
        tool_call_id=None if pending.path else call.id,  # a child's call never streamed
        response_schema=_APPROVAL_SCHEMA if pending.kind == "approval" else _EXTERNAL_SCHEMA,
        metadata={"agentloop": info},
    )


def error_event(
    error: BaseException, message: str | None = None, facts: Mapping[str, Any] | None = None
) -> core.RunErrorEvent:
    """RUN_ERROR for a hard error: its class as ``code``, its facts in ``metadata``.

    ``message`` is the text the client reads (default: ``ClientView``'s, guardrails not
    exposed: redacted, never a guardrail's name or reason); ``facts`` more of ``metadata``.
    """
    if message is None:
        message = ClientView().message(error)
    info: dict[str, Any] = {"error": type(error).__name__, **(facts or {})}
    for name in ("phase", "request_sent", "status_code"):
        value = getattr(error, name, None)
        if value is not None:
            info[name] = plain(value)
    if isinstance(error, AgentLoopError):
        info["recoverable"] = error.is_recoverable()
    return core.RunErrorEvent(
        message=message,
        code=type(error).__name__,
        metadata={"agentloop": info},
    )
