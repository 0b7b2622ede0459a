"""What an AG-UI request asks: its messages as ours, its input, and its answers as decisions.

Everything from the client is checked here, once, where it enters (the app turns an
``InvalidInput`` from this module into a 422 or a RUN_ERROR; nothing runs before it passes):

- ``history`` makes AG-UI ``messages`` into ``agentloop.messages.Message``: ``user`` (text, or
  text with image, audio and document parts by data or URL), ``assistant`` (text and tool
  calls), ``tool`` (a result, named by its call). ``system`` and ``developer`` messages are left
  out: the agent's instructions are the server's, and a browser does not get to rewrite them.
  ``reasoning`` and ``activity`` messages are the UI's own record and are left out too
  (reasoning goes back to a provider only as that provider wrote it, SPEC 16). A video part is
  refused.
- ``user_input`` is the run's input: the last message, which must be a user message.
- ``decisions`` makes the ``resume`` entries into decisions for the session's pending calls:
  ``cancelled`` is ``Deny()``; for an approval ``{"approved": true}`` is ``Approve()``, with
  ``editedArgs`` ``Edit(editedArgs)``, ``{"approved": false, "message": m}`` ``Deny(m)``; for
  an external call ``{"content": c}`` is ``Answer(c)``. An id that is not a pending call of the
  session is refused, and ``check_decisions`` refuses a set that misses one.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

from ag_ui import core

from agentloop.errors import InvalidInput
from agentloop.media import AudioPart, DocumentPart, ImagePart
from agentloop.messages import Message, ToolCallPart, ToolResultPart, UserInput
from agentloop.pausing import (
    Answer,
    Approve,
    Decision,
    Deny,
    Edit,
    PendingCall,
    check_decisions,
)
from agentloop.ui import _json_body as json_body

__all__ = ["decisions", "history", "user_input"]

_MEDIA: dict[str, type[ImagePart | AudioPart | DocumentPart]] = {
    "image": ImagePart,
    "audio": AudioPart,
    "document": DocumentPart,
}


def _media(part: Any, where: str) -> ImagePart | AudioPart | DocumentPart:
    kind = part.type
    made = _MEDIA.get(kind)
    if made is None:
        raise InvalidInput(f"{where}: a {kind} part is not supported (text, image, audio, pdf)")
    source = part.source
    if source.type == "url":
        return made(url=source.value, media_type=source.mime_type)
    if source.type == "data":
        try:
            data = base64.b64decode(source.value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidInput(f"{where}: the {kind} part's data is not base64") from exc
        return made(data, media_type=source.mime_type)
    raise InvalidInput(f"{where}: a {kind} part from a {source.type} source is not supported")


def _content(content: Any, where: str) -> list[Any]:
    if isinstance(content, str):
        return [content]
    return [part.text if part.type == "text" else _media(part, where) for part in content]


def _user(message: core.UserMessage, where: str) -> Message:
    items = _content(message.content, where)
    if not items:
        raise InvalidInput(f"{where}: a user message needs content")
    return Message.from_input(items)


def _arguments(raw: str, where: str) -> dict[str, Any]:
    try:
        value = json_body.decode(raw or "{}", "a tool call's arguments are not JSON")
    except ValueError as exc:  # too deep, a lone surrogate, or not JSON at all
        raise InvalidInput(f"{where}: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: a tool call's arguments must be a JSON object")
    return value


def _assistant(message: core.AssistantMessage, where: str) -> Message:
    calls = [
        ToolCallPart(c.id, c.function.name, _arguments(c.function.arguments, where))
        for c in message.tool_calls or ()
    ]
    return Message.assistant(message.content or "", calls)


def _tool(message: core.ToolMessage, names: Mapping[str, str], where: str) -> Message:
    name = names.get(message.tool_call_id)
    if name is None:
        raise InvalidInput(
            f"{where}: a tool message answers {message.tool_call_id!r}, which no earlier "
            "assistant message called"
        )
    content = message.content
    text = content if isinstance(content, str) else " ".join(_texts(content, where))
    is_error = message.error is not None
    return Message(
        "tool", (ToolResultPart(message.tool_call_id, name, message.error or text, is_error),)
    )


def _texts(content: Sequence[Any], where: str) -> list[str]:
    if any(part.type != "text" for part in content):
        raise InvalidInput(f"{where}: a tool message's parts must be text")
    return [part.text for part in content]


def history(messages: Sequence[core.Message]) -> list[Message]:
    """The client's messages as ours (consecutive tool results become one tool message)."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for index, message in enumerate(messages):
        where = f"messages[{index}] ({message.role})"
        if isinstance(message, core.UserMessage):
            out.append(_user(message, where))
        elif isinstance(message, core.AssistantMessage):
            made = _assistant(message, where)
            names.update({c.id: c.name for c in made.tool_calls})
            out.append(made)
        elif isinstance(message, core.ToolMessage):
            made = _tool(message, names, where)
            if out and out[-1].role == "tool":
                made = Message("tool", (*out.pop().parts, *made.parts))
            out.append(made)
        # system, developer, reasoning and activity: left out (the module's docstring)
    return out


def user_input(messages: Sequence[core.Message]) -> UserInput:
    """The run's input: the last message, a user message (text, or text and media parts)."""
    if not messages or not isinstance(messages[-1], core.UserMessage):
        last = messages[-1].role if messages else "none"
        raise InvalidInput(
            f"the last message must be a user message (the run's input), got {last}; "
            "an answer to an interrupt goes in `resume`"
        )
    where = f"messages[{len(messages) - 1}] (user)"
    items = _content(messages[-1].content, where)
    if len(items) == 1 and isinstance(items[0], str):
        return items[0]
    return items


def _decision(pending: PendingCall, entry: core.ResumeEntry) -> Decision:
    if entry.status == "cancelled":
        return Deny()
    payload = entry.payload
    where = f"resume entry for {entry.interrupt_id!r}"
    if not isinstance(payload, Mapping):
        raise InvalidInput(f"{where}: the payload must be an object")
    message = payload.get("message")
    message = message if isinstance(message, str) else None
    if payload.get("approved") is False:
        return Deny(message)
    if pending.kind == "external":
        if "content" not in payload:
            raise InvalidInput(f"{where}: an external call is answered with {{'content': ...}}")
        return Answer(payload["content"])
    if payload.get("approved") is not True:
        raise InvalidInput(f"{where}: an approval is answered with {{'approved': true|false}}")
    edited = payload.get("editedArgs")
    if edited is None:
        return Approve()
    if not isinstance(edited, Mapping):
        raise InvalidInput(f"{where}: editedArgs must be an object")
    return Edit(dict(edited))


def decisions(
    pending: Sequence[PendingCall], resume: Sequence[core.ResumeEntry]
) -> dict[str, Decision]:
    """The decisions ``resume`` gives for ``pending``; ``InvalidInput`` when it does not fit."""
    by_id = {p.id: p for p in pending}
    made: dict[str, Decision] = {}
    for entry in resume:
        waiting = by_id.get(entry.interrupt_id)
        if waiting is None:
            raise InvalidInput(
                f"resume answers {entry.interrupt_id!r}, which is not a pending call of this "
                f"thread; pending: {', '.join(repr(k) for k in by_id) or 'none'}"
            )
        if entry.interrupt_id in made:
            raise InvalidInput(f"resume answers {entry.interrupt_id!r} twice")
        made[entry.interrupt_id] = _decision(waiting, entry)
    return check_decisions(tuple(pending), made)
