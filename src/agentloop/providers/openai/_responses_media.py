"""Media on the Responses API: images and files as input content (SPEC 16, OpenAI rules 3 and 7).

Pure (no I/O). ``_responses_request`` encodes each message once (``Message.encoded``); a user
message or a tool message with media comes here, and each returns its input items and the media
parts they carry, which ``refuse_media`` checks against the model on every request, before
sending. A message without media never comes here.

Wire forms (OpenAI's spec: ``InputContent`` is ``InputTextContent``, ``InputImageContent`` and
``InputFileContent``). A user message with media sends ``content`` as a list, in order:

- text: ``{"type": "input_text", "text": ...}``;
- ``ImagePart``: ``{"type": "input_image", "image_url": "data:<type>;base64,<data>", "detail":
  "auto"}``, or the part's URL as ``image_url`` (OpenAI fetches it);
- ``DocumentPart`` (PDF): ``{"type": "input_file", "filename": "document-<sha256[:12]>.pdf",
  "file_data": "data:application/pdf;base64,<data>"}`` (``filename`` is required beside
  ``file_data``); a document by URL: ``{"type": "input_file", "file_url": <url>}``;
- ``DocumentPart`` (plain text, bytes): an ``input_text``, the document's ``describe()`` line and
  then its text (as on Chat Completions: every model reads text).

A tool's media go in its own ``function_call_output``: ``FunctionCallOutputItemParam.output``
is a string or a list of ``input_text`` / ``input_image`` / ``input_file``, so a result with
media sends ``output`` as that list (its text first, when it has any), and the transcript keeps
the API's order (each output right after the calls it answers; no extra user message).

Refused before sending (``ConfigurationError`` naming the part's ``describe()`` and the model,
``field="input"``): audio (the Responses API's input content has no ``input_audio``: that is
Chat Completions'), a kind the model's profile does not list (a plain-text document given as
bytes is exempt: it goes as text), image bytes that are not PNG, JPEG, GIF or WebP, an image
whose data URL passes the spec's 20,971,520-character ``image_url`` limit, and media in a system
or assistant message (no wire form). Each part's bytes are base64-encoded once per message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from agentloop.errors import ConfigurationError
from agentloop.messages import (
    AudioPart,
    DocumentPart,
    ImagePart,
    MediaPart,
    Message,
    Part,
    TextPart,
    ToolResultPart,
)
from agentloop.providers.openai._chat_media import IMAGE_TYPES, MediaData

__all__ = [
    "IMAGE_URL_MAX",
    "MEDIA",
    "ResponsesWire",
    "encode_tool_results",
    "encode_user",
    "refuse_media",
    "refuse_misplaced",
]

IMAGE_URL_MAX = 20_971_520
"""The longest ``image_url`` the spec allows (``InputImageContentParamAutoParam``)."""
MEDIA = (ImagePart, DocumentPart, AudioPart)
"""The media part classes (for ``isinstance``)."""

_PDF = "application/pdf"

ResponsesWire: TypeAlias = tuple[tuple[dict[str, Any], ...], tuple[MediaPart, ...]]
"""One agentloop message on the wire: its input items, and the media they carry."""


class _Encoder(MediaData):
    """Encodes the media parts of one message as Responses content items."""

    __slots__ = ()

    def part(self, part: MediaPart) -> dict[str, Any] | None:
        """The content item of ``part``; None for one ``refuse_media`` refuses on every model."""
        if isinstance(part, AudioPart):
            return None
        if isinstance(part, ImagePart):
            url = part.url if part.url is not None else self.data_url(part)
            return {"type": "input_image", "image_url": url, "detail": "auto"}
        if part.data is None:
            return {"type": "input_file", "file_url": part.url}
        if part.media_type == _PDF:
            return {"type": "input_file", **self.pdf_file(part)}
        return {"type": "input_text", "text": self.as_text(part)}

    def content(self, parts: Iterable[Part]) -> list[dict[str, Any]]:
        """The content list of text and media parts (others are not content)."""
        content: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part, TextPart):
                content.append({"type": "input_text", "text": part.text})
            elif isinstance(part, MEDIA):
                item = self.part(part)
                if item is not None:
                    content.append(item)
        return content


def encode_user(message: Message) -> ResponsesWire:
    """A user message with media: one input ``message`` whose ``content`` is a list."""
    media = tuple(part for part in message.parts if isinstance(part, MEDIA))
    content = _Encoder().content(message.parts)
    return ({"type": "message", "role": "user", "content": content},), media


def encode_tool_results(message: Message) -> ResponsesWire:
    """One ``function_call_output`` per result; a result's media in its own ``output`` list."""
    items: list[dict[str, Any]] = []
    media: list[MediaPart] = []
    encoder: _Encoder | None = None
    for part in message.parts:
        if not isinstance(part, ToolResultPart):
            continue
        output: str | list[dict[str, Any]] = part.content
        if part.media:
            encoder = encoder or _Encoder()
            text = [TextPart(part.content)] if part.content else []
            output = encoder.content([*text, *part.media])
            media.extend(part.media)
        items.append({"type": "function_call_output", "call_id": part.call_id, "output": output})
    return tuple(items), tuple(media)


def refuse_media(media: Sequence[MediaPart], accepted: frozenset[str], model: str) -> None:
    """Raise ``ConfigurationError`` for the first part ``model`` cannot take on this API."""
    for part in media:
        why = _why_not(part, accepted)
        if why is not None:
            raise ConfigurationError(
                f"{model} cannot take {part.describe()} on the Responses API: {why}",
                field="input",
            )


def _why_not(part: MediaPart, accepted: frozenset[str]) -> str | None:
    if isinstance(part, AudioPart):
        return (
            "its input content is text, images and files only (no input_audio); send audio "
            "through Chat Completions (Settings(api='chat') or OpenAIClient) to an audio model"
        )
    plain_text = (
        isinstance(part, DocumentPart) and part.data is not None and (part.media_type != _PDF)
    )
    if part.kind not in accepted and not plain_text:
        takes = " and ".join(sorted(accepted)) if accepted else "no media"
        return f"its profile takes {takes}"
    if isinstance(part, ImagePart) and part.data is not None:
        if part.media_type not in IMAGE_TYPES:
            return "OpenAI reads png, jpeg, gif and webp images; convert it to one of them"
        length = len(f"data:{part.media_type};base64,") + 4 * -(-part.size // 3)
        if length > IMAGE_URL_MAX:
            return (
                f"its data URL would be {length:,} characters, over the API's "
                f"{IMAGE_URL_MAX:,}; make it smaller or pass a url="
            )
    return None


def refuse_misplaced(message: Message) -> None:
    """Raise ``ConfigurationError`` for media in a system or assistant message (no wire form)."""
    for part in message.parts:
        if isinstance(part, MEDIA):
            raise ConfigurationError(
                f"the Responses API takes {part.describe()} only in a user message or a tool "
                f"result, not in a {message.role} message",
                field="input",
            )
