"""Media on Chat Completions: images, documents and audio as content parts (SPEC 16).

Pure (no I/O). ``openai.py`` encodes each message once (``Message.encoded``) through
``encode_user`` / ``encode_tool_results``; each returns the wire messages and the media parts it
carried, and ``refuse_media`` checks those against the model on every request, before sending.
A message without media costs what it did before: one truthiness test per request.

Wire forms (provider-rules.md, OpenAI 7; ``ChatCompletionRequestUserMessageContentPart`` in
OpenAI's spec). A user message with media sends ``content`` as a list of parts, in order:

- text: ``{"type": "text", "text": ...}``;
- ``ImagePart``: ``{"type": "image_url", "image_url": {"url": "data:<type>;base64,<data>"}}``,
  or the part's ``https://`` URL as is (OpenAI fetches it);
- ``DocumentPart`` (PDF): ``{"type": "file", "file": {"filename": "document-<sha256[:12]>.pdf",
  "file_data": "data:application/pdf;base64,<data>"}}``;
- ``DocumentPart`` (plain text): a text part, the document's ``describe()`` line and then its
  text (Chat Completions takes only PDFs as files: "Expected a base64-encoded data URL with an
  application/pdf MIME type");
- ``AudioPart``: ``{"type": "input_audio", "input_audio": {"data": <base64>, "format": "wav" |
  "mp3"}}``.

A ``tool`` message takes text only, so a tool's media go in ONE user message right after the
turn's ``tool`` messages: for each result with media, a text part ``Media returned by <tool>
(<call id>):`` and then its media parts. A result that is media only (no text) says
``(its media follow in the next message)`` in its ``tool`` message, so no tool message is empty.

Refused before sending (``ConfigurationError`` naming the part's ``describe()`` and the model,
``field="input"``): a kind the model's profile does not list (``OpenAIClient(media=...)``
overrides it; a plain-text document is exempt, as it goes as text, which every model reads),
audio other than WAV or MP3, audio or a document given by URL (Chat Completions has no URL form
for them), an image whose bytes are not PNG, JPEG, GIF or WebP (OpenAI: "You uploaded an
unsupported image"), and media in a system or assistant message. Each part's bytes are
base64-encoded once per message, however often the message is sent.
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
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.model import MEDIA_KINDS

__all__ = [
    "AUDIO_FORMATS",
    "IMAGE_TYPES",
    "MEDIA_FOLLOW_TEXT",
    "ChatWire",
    "carries_media",
    "encode_tool_results",
    "encode_user",
    "media_header",
    "media_override",
    "refuse_media",
    "refuse_misplaced",
]

AUDIO_FORMATS = {"audio/wav": "wav", "audio/wave": "wav", "audio/mpeg": "mp3"}
"""The audio types ``input_audio`` takes, with their ``format`` value."""
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types OpenAI reads (a URL's type is the server's to check)."""
MEDIA_FOLLOW_TEXT = "(its media follow in the next message)"
"""The ``tool`` message text of a result that returned media and no text."""

_MEDIA = (ImagePart, DocumentPart, AudioPart)
_PDF = "application/pdf"
_PLAIN = frozenset({TextPart, ThinkingPart, ToolCallPart, ToolResultPart})


ChatWire: TypeAlias = tuple[list[dict[str, Any]], tuple[MediaPart, ...]]
"""One agentloop message on the wire: its wire messages, and the media they carry (a plain
tuple: the per-request loop unpacks it, and only an exact tuple unpacks on the fast path)."""
_NO_MEDIA: tuple[MediaPart, ...] = ()


def media_header(result: ToolResultPart) -> str:
    """The text part that opens a tool result's media in the user message after the results."""
    return f"Media returned by {result.name} ({result.call_id}):"


class MediaData:
    """The OpenAI family's forms of a part's bytes, for one message.

    The same bytes are base64-encoded once. Chat Completions and the Responses API share it;
    each wraps the forms in its own content items.
    """

    __slots__ = ("_base64",)

    def __init__(self) -> None:
        self._base64: dict[str, str] = {}

    def data(self, part: MediaPart) -> str:
        """The bytes as base64 (computed once per distinct bytes)."""
        key = part.sha256
        text = self._base64.get(key)
        if text is None:
            text = self._base64[key] = part.base64()
        return text

    def data_url(self, part: MediaPart) -> str:
        """``data:<type>;base64,<data>``."""
        return f"data:{part.media_type};base64,{self.data(part)}"

    def pdf_file(self, part: MediaPart) -> dict[str, str]:
        """A PDF's ``filename`` (from its sha256: the APIs require one) and ``file_data``."""
        return {"filename": f"document-{part.sha256[:12]}.pdf", "file_data": self.data_url(part)}

    @staticmethod
    def as_text(part: MediaPart) -> str:
        """A plain-text document as text: its ``describe()`` line, then its contents."""
        assert part.data is not None
        return f"{part.describe()}\n{part.data.decode('utf-8', errors='replace')}"


class _Encoder(MediaData):
    """Encodes media parts of one message as Chat Completions content parts."""

    __slots__ = ()

    def part(self, part: MediaPart) -> dict[str, Any] | None:
        """The content part of ``part``; None for one ``refuse_media`` refuses on every model."""
        if isinstance(part, ImagePart):
            if part.data is None:
                return {"type": "image_url", "image_url": {"url": part.url}}
            return {"type": "image_url", "image_url": {"url": self.data_url(part)}}
        if part.data is None:
            return None
        if isinstance(part, AudioPart):
            fmt = AUDIO_FORMATS.get(part.media_type or "")
            if fmt is None:
                return None
            return {"type": "input_audio", "input_audio": {"data": self.data(part), "format": fmt}}
        if part.media_type == _PDF:
            return {"type": "file", "file": self.pdf_file(part)}
        return {"type": "text", "text": self.as_text(part)}

    def parts(self, parts: Iterable[Part]) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, _MEDIA):
                encoded = self.part(part)
                if encoded is not None:
                    content.append(encoded)
        return content


def carries_media(parts: Iterable[Part]) -> bool:
    """Whether any part is media (a failed ``isinstance`` is slow: known types skip it)."""
    for part in parts:
        if type(part) not in _PLAIN and isinstance(part, _MEDIA):
            return True
    return False


def encode_user(message: Message) -> ChatWire:
    """A user or system message: ``content`` a string without media, else a list of parts."""
    if not carries_media(message.parts):  # the string content, as before media existed
        return [{"role": message.role, "content": message.text}], _NO_MEDIA
    if message.role != "user":
        refuse_misplaced(message)
    media = tuple(p for p in message.parts if isinstance(p, _MEDIA))
    return [{"role": "user", "content": _Encoder().parts(message.parts)}], media


def encode_tool_results(message: Message) -> ChatWire:
    """One ``tool`` message per result; their media in one user message after them."""
    wire: list[dict[str, Any]] = []
    with_media: list[ToolResultPart] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            content = part.content
            if part.media:
                with_media.append(part)
                content = content or MEDIA_FOLLOW_TEXT
            wire.append({"role": "tool", "tool_call_id": part.call_id, "content": content})
    if not with_media:
        return wire, _NO_MEDIA
    encoder = _Encoder()
    media: list[dict[str, Any]] = []
    for result in with_media:
        media.append({"type": "text", "text": media_header(result)})
        media.extend(encoder.parts(result.media))
    wire.append({"role": "user", "content": media})
    return wire, tuple(m for r in with_media for m in r.media)


def media_override(kinds: Iterable[str]) -> frozenset[str]:
    """``OpenAIClient(media=...)`` checked: a set of known kinds (a str is one kind)."""
    chosen = frozenset((kinds,) if isinstance(kinds, str) else kinds)
    unknown = sorted(chosen - MEDIA_KINDS)
    if unknown:
        raise ConfigurationError(
            f"media takes {', '.join(sorted(MEDIA_KINDS))}, not {unknown[0]!r}", field="media"
        )
    return chosen


def refuse_media(media: Sequence[MediaPart], accepted: frozenset[str], model: str) -> None:
    """Raise ``ConfigurationError`` for the first part ``model`` cannot take on this endpoint."""
    for part in media:
        why = _why_not(part, accepted)
        if why is not None:
            raise ConfigurationError(
                f"{model} cannot take {part.describe()} on Chat Completions: {why}",
                field="input",
            )


def _why_not(part: MediaPart, accepted: frozenset[str]) -> str | None:
    if part.kind not in accepted and not _is_text(part):
        takes = " and ".join(sorted(accepted)) if accepted else "no media"
        return f"its profile takes {takes} (OpenAIClient(media=...) overrides that)"
    if isinstance(part, ImagePart):
        if part.data is not None and part.media_type not in IMAGE_TYPES:
            return "OpenAI reads png, jpeg, gif and webp images; convert it to one of them"
        return None
    if part.data is None:
        form = "input_audio" if isinstance(part, AudioPart) else "a file part"
        return f"{form} takes the bytes, not a URL; download it and pass data= or from_path()"
    if isinstance(part, AudioPart) and part.media_type not in AUDIO_FORMATS:
        return "input_audio takes wav or mp3 only; convert it to one of them"
    return None


def _is_text(part: MediaPart) -> bool:
    """A plain-text document given as bytes: sent as text, which every model reads."""
    return isinstance(part, DocumentPart) and part.data is not None and _PDF != part.media_type


def refuse_misplaced(message: Message) -> None:
    """Raise ``ConfigurationError`` for media in a system or assistant message (no wire form)."""
    for part in message.parts:
        if isinstance(part, _MEDIA):
            raise ConfigurationError(
                f"Chat Completions takes {part.describe()} only in a user message or a tool "
                f"result, not in a {message.role} message",
                field="input",
            )
