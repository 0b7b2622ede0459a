"""The Vercel AI SDK's chat request, checked where it enters: ``{id, messages, trigger, ...}``.

``useChat`` with its default transport POSTs the whole chat each time: ``id`` (the chat, our
thread id), ``messages`` (``UIMessage[]``: ``{id, role, parts}``), ``trigger``
(``"submit-message"`` or ``"regenerate-message"``) and ``messageId``. Everything here is pure:
``parse_chat`` turns the decoded JSON into a ``ChatRequest`` or raises ``BadChat`` (the app
answers 400 with its text), and the converters make ``UIMessage``s into our ``Message``s:

- the last message says what the request asks: a ``user`` message is a new run's input; an
  ``assistant`` message carries the client's answers to the calls a paused run waits on
  (``approval-responded`` tool parts from ``addToolApprovalResponse``, ``output-available`` /
  ``output-error`` ones from ``addToolOutput``);
- the messages before it seed a new thread's session (an assistant message splits at its
  ``step-start`` parts into one assistant message and one tool message per step).

The client is not trusted with the server's instructions: a ``system`` message is refused, as
is any other role. Reasoning parts from the client are not sent back to a model (a provider
takes back only its own, signed reasoning), nor are data, source or step parts.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from agentloop._util.slots import record
from agentloop.errors import AgentLoopError
from agentloop.messages import (
    AudioPart,
    DocumentPart,
    ImagePart,
    MediaPart,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.pausing import Answer, Approve, Decision, Deny

__all__ = [
    "BadChat",
    "ChatRequest",
    "UIMessage",
    "answers",
    "parse_chat",
    "run_input",
    "seed",
    "unfinished",
]

_ROLES = ("user", "assistant")
_TRIGGERS = ("submit-message", "regenerate-message")


class BadChat(AgentLoopError):
    """The request is not a chat request this app can take (the app answers 400)."""


@record
class UIMessage:
    """One checked ``UIMessage``: its id, role and parts (each a JSON object with a ``type``)."""

    id: str
    role: Literal["user", "assistant"]
    parts: tuple[Mapping[str, Any], ...]


@record
class ChatRequest:
    """A checked chat request: the chat id (thread), its messages and what the client asked."""

    id: str
    messages: tuple[UIMessage, ...]
    trigger: str

    @property
    def last(self) -> UIMessage:
        """The message that says what this request asks."""
        return self.messages[-1]


def parse_chat(body: object) -> ChatRequest:
    """Check the decoded body's shape; ``BadChat`` names the first field that does not fit."""
    if not isinstance(body, Mapping):
        raise BadChat(f"the body must be a JSON object, got {_kind(body)}")
    chat_id = body.get("id")
    if not isinstance(chat_id, str) or not chat_id:
        raise BadChat("'id' (the chat id) must be a non-empty string")
    trigger = body.get("trigger", "submit-message")
    if trigger not in _TRIGGERS:
        raise BadChat(f"'trigger' must be one of {', '.join(_TRIGGERS)}, got {trigger!r:.60}")
    if trigger == "regenerate-message":
        raise BadChat(
            "'regenerate-message' is not supported: the server's session keeps the conversation, "
            "so a reply cannot be taken back; send a new message instead"
        )
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise BadChat("'messages' must be a non-empty array of UIMessages")
    messages = tuple(_message(item, f"messages[{i}]") for i, item in enumerate(raw))
    return ChatRequest(chat_id, messages, trigger)


def _message(item: object, where: str) -> UIMessage:
    if not isinstance(item, Mapping):
        raise BadChat(f"{where} must be an object, got {_kind(item)}")
    role = item.get("role")
    if role not in _ROLES:
        hint = " (set the system prompt on the server)" if role == "system" else ""
        raise BadChat(f"{where}.role must be 'user' or 'assistant', got {role!r:.60}{hint}")
    parts = item.get("parts")
    if not isinstance(parts, list):
        raise BadChat(f"{where}.parts must be an array")
    for j, part in enumerate(parts):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise BadChat(f"{where}.parts[{j}] must be an object with a string 'type'")
    message_id = item.get("id", "")
    return UIMessage(str(message_id) if isinstance(message_id, str) else "", role, tuple(parts))


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


# -- the user's input -------------------------------------------------------------------------


def run_input(message: UIMessage) -> list[str | MediaPart]:
    """A user message's parts as a run's input: its text, and its files as media parts."""
    items: list[str | MediaPart] = []
    for j, part in enumerate(message.parts):
        kind = part["type"]
        if kind == "text" and isinstance(part.get("text"), str):
            items.append(part["text"])
        elif kind == "file":
            items.append(_media(part, f"the user message's parts[{j}]"))
    if not items:
        raise BadChat("the last user message has no text or file part")
    return items


def _media(part: Mapping[str, Any], where: str) -> MediaPart:
    """A ``file`` part (a ``data:`` URL or an http(s) URL) as an image, document or audio part."""
    url, media_type = part.get("url"), part.get("mediaType")
    if not isinstance(url, str) or not isinstance(media_type, str):
        raise BadChat(f"{where}: a file part needs a string 'url' and 'mediaType'")
    cls: type[ImagePart] | type[DocumentPart] | type[AudioPart]
    if media_type.startswith("image/"):
        cls = ImagePart
    elif media_type.startswith("audio/"):
        cls = AudioPart
    elif media_type == "application/pdf" or media_type.startswith("text/"):
        cls = DocumentPart
    else:
        raise BadChat(f"{where}: a file of type {media_type!r:.60} cannot be sent to a model")
    try:
        if not url.startswith("data:"):
            return cls(url=url, media_type=media_type)
        header, _, payload = url.partition(",")
        if not header.endswith(";base64"):
            raise BadChat(f"{where}: a data: URL must be base64-encoded")
        return cls(base64.b64decode(payload, validate=True), media_type)
    except (binascii.Error, ValueError) as exc:  # InvalidInput is a ValueError
        raise BadChat(f"{where}: {exc}") from exc


# -- a new thread's history -------------------------------------------------------------------


def seed(messages: Sequence[UIMessage]) -> list[Message]:
    """The client's earlier messages as a transcript (checked by the session when it is made)."""
    history: list[Message] = []
    for i, message in enumerate(messages):
        if message.role == "user":
            history.append(Message("user", tuple(_user_parts(message, i))))
        else:
            history.extend(_assistant_steps(message))
    return history


def _user_parts(message: UIMessage, index: int) -> list[Part]:
    parts: list[Part] = []
    for j, part in enumerate(message.parts):
        if part["type"] == "text" and isinstance(part.get("text"), str):
            parts.append(TextPart(part["text"]))
        elif part["type"] == "file":
            parts.append(_media(part, f"messages[{index}].parts[{j}]"))
    return parts or [TextPart("")]


def _assistant_steps(message: UIMessage) -> list[Message]:
    """One assistant message (and one tool message when it called tools) per step."""
    steps: list[list[Mapping[str, Any]]] = [[]]
    for part in message.parts:
        if part["type"] == "step-start":
            steps.append([])
        else:
            steps[-1].append(part)
    out: list[Message] = []
    for step in steps:
        text = "".join(p["text"] for p in step if p["type"] == "text" and _is_str(p.get("text")))
        calls = [c for c in map(_tool_call, step) if c is not None]
        results = [r for r in map(_tool_result, step) if r is not None]
        if text or calls:
            out.append(Message.assistant(text, calls))
        if results:
            out.append(Message.tool_results(results))
    return out


def unfinished(messages: Sequence[UIMessage]) -> list[str]:
    """The ids of the tool parts in ``messages`` without an output (a stopped chat's), in order."""
    calls: list[str] = []
    done: set[str] = set()
    for message in messages:
        for part in message.parts if message.role == "assistant" else ():
            call = _tool_call(part)
            if call is None:
                continue
            if _tool_result(part) is None:
                calls.append(call.id)
            else:
                done.add(call.id)
    return [c for c in calls if c not in done]


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _tool_name(part: Mapping[str, Any]) -> str | None:
    kind = part["type"]
    if kind == "dynamic-tool":
        name = part.get("toolName")
        return name if isinstance(name, str) and name else None
    return (kind[5:] or None) if kind.startswith("tool-") else None


def _tool_call(part: Mapping[str, Any]) -> ToolCallPart | None:
    name, call_id = _tool_name(part), part.get("toolCallId")
    if name is None or not isinstance(call_id, str) or not call_id:
        return None
    arguments = part.get("input")
    return ToolCallPart(call_id, name, arguments if isinstance(arguments, Mapping) else {})


def _tool_result(part: Mapping[str, Any]) -> ToolResultPart | None:
    call = _tool_call(part)
    state = part.get("state")
    if call is None or state not in ("output-available", "output-error", "output-denied"):
        return None
    if state == "output-available":
        return ToolResultPart(call.id, call.name, _text(part.get("output")))
    text = part.get("errorText") if state == "output-error" else Deny().text
    return ToolResultPart(call.id, call.name, str(text or "error"), is_error=True)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# -- the client's answers to pending calls ----------------------------------------------------


def answers(message: UIMessage) -> tuple[dict[str, Decision], dict[str, Decision]]:
    """The decisions an assistant message carries: ``(approvals, outputs)`` by call id.

    ``approval-responded`` is ``Approve()`` or ``Deny(reason)``; a tool output the client added
    (``output-available``) is ``Answer(output)``, and an ``output-error`` is ``Deny(errorText)``.
    Neither is checked against the run here. An approval only ever answers a pending call, so
    one for a call that is not pending is forged; outputs answer only the calls the run waits on
    (the caller filters them), since the same message holds the results of calls the server ran.
    """
    approvals: dict[str, Decision] = {}
    outputs: dict[str, Decision] = {}
    for part in message.parts:
        call = _tool_call(part)
        if call is None:
            continue
        state = part.get("state")
        if state == "approval-responded":
            approvals[call.id] = _approval(part.get("approval"), call.id)
        elif state == "output-available":
            outputs[call.id] = Answer(part.get("output"))
        elif state == "output-error":
            reason = part.get("errorText")
            outputs[call.id] = Deny(reason if isinstance(reason, str) and reason else None)
    return approvals, outputs


def _approval(approval: object, call_id: str) -> Decision:
    if not isinstance(approval, Mapping) or not isinstance(approval.get("approved"), bool):
        raise BadChat(f"the approval of call {call_id!r:.80} needs a boolean 'approved'")
    if approval["approved"]:
        return Approve()
    reason = approval.get("reason")
    return Deny(reason if isinstance(reason, str) and reason else None)
