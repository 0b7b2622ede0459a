"""Media parts as Anthropic content blocks (SPEC 16; provider-rules Anthropic 5).

The Messages API's ``RequestImageBlock`` and ``RequestDocumentBlock``, in a user message or
inside a ``tool_result``'s ``content`` (a list of text, image and document blocks):

- ``ImagePart`` bytes: ``{"type": "image", "source": {"type": "base64", "media_type": ...,
  "data": <base64>}}``; ``ImagePart(url=...)``: ``"source": {"type": "url", "url": ...}``.
- ``DocumentPart`` PDF bytes: ``{"type": "document", "source": {"type": "base64",
  "media_type": "application/pdf", "data": <base64>}}``; by URL: ``{"type": "url", "url"}``.
- ``DocumentPart`` plain text: ``"source": {"type": "text", "media_type": "text/plain",
  "data": <the text itself>}`` (the bytes decoded as UTF-8, not base64).

A tool's media go in its ``tool_result``: ``content`` becomes ``[text, *media]`` (the text block
only when the tool said something; the API refuses an empty text block). A result without media
keeps its plain string ``content``, byte for byte as before.

What Anthropic cannot take is found while the message is encoded (once: the encoding is cached
on the message) and refused per request, naming the part and the model, before anything is
sent (``check``): audio (there is no audio block); an image type other than the four the API
lists; an image whose base64 passes 5 MiB (the API measures the base64 text); a plain-text
document by URL (the API has no such source) or one that is not UTF-8; media in an assistant
message; any kind the model's profile does not list (``accepts``); and the part of one message that
takes the request's inline media past the API's 32 MiB request limit (a message whose media
cross it only with earlier messages' is the API's 413, a ``ContextLengthExceeded`` the engine's
overflow salvage compacts). Bytes are base64-encoded
once per message, however many times a part appears in it, and never shown: errors carry
``describe()``.
"""

from __future__ import annotations

from typing import Any

from agentloop.errors import ConfigurationError, ContextLengthExceeded
from agentloop.media import AudioPart, DocumentPart, ImagePart, MediaPart
from agentloop.messages import ToolResultPart
from agentloop.providers.anthropic._settings import profile

__all__ = [
    "IMAGE_TYPES",
    "MAX_IMAGE_BASE64",
    "MAX_REQUEST_BYTES",
    "MEDIA",
    "WIRE_KINDS",
    "Found",
    "MediaEncoder",
    "accepts",
    "check",
]

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
"""``Base64ImageSource.media_type``: the only image types the API takes."""

MAX_IMAGE_BASE64 = 5 * 1024 * 1024
"""The API's limit on one image's base64 text (``image exceeds 5 MB maximum``)."""

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The API's limit on a whole request body (413 ``request_too_large`` past it)."""

WIRE_KINDS = frozenset({"image", "document"})
"""The media kinds the Messages API has blocks for (no audio, whatever a profile says)."""

MEDIA = (ImagePart, DocumentPart, AudioPart)

Found = tuple[tuple[MediaPart, str | None], ...]
"""Every media part of a message, with why Anthropic cannot take it (None: it can)."""

_PDF = "application/pdf"
_TEXT = "text/plain"
_NO_AUDIO = (
    "Anthropic has no audio input (image and document blocks only); transcribe it first or "
    "use a provider that takes audio"
)
_IMAGE_TYPE = f"Anthropic takes images as {', '.join(IMAGE_TYPES)} only; convert it to PNG or JPEG"
_TEXT_URL = "Anthropic takes a plain-text document as its text, not by URL; pass its bytes"
_NOT_UTF8 = "a plain-text document must be UTF-8 text"
_ASSISTANT = "Anthropic takes media in user messages and tool results only, not from the assistant"


def accepts(model: str) -> frozenset[str]:
    """The media kinds ``model`` takes: its profile's, within what the API has blocks for."""
    return profile(model).media & WIRE_KINDS


def check(found: Found, model: str | None, total: int = 0) -> int:
    """Raise ``ConfigurationError`` for the first part ``model`` cannot take (before sending).

    ``model`` None: what the API takes at all (``WIRE_KINDS``). ``total``: the inline media
    bytes of the request so far; returned with these parts' added (a request carries at most
    ``MAX_REQUEST_BYTES``, every earlier turn's media included).
    """
    allowed = WIRE_KINDS if model is None else accepts(model)
    own = sum(_base64_length(part.size) for part, _ in found)  # this message's alone
    shared = total > 0 and own <= MAX_REQUEST_BYTES
    for part, why in found:
        if why is None and part.kind not in allowed:
            takes = " and ".join(sorted(allowed)) or "no media"
            why = f"its profile takes {takes}"
        total += _base64_length(part.size)
        if why is None and total > MAX_REQUEST_BYTES:
            if shared:  # it fits alone, not after earlier messages': compaction's to fix (413)
                raise _too_large(total)
            why = (
                f"with it the request carries {total:,} bytes of inline media, over Anthropic's "
                f"{MAX_REQUEST_BYTES:,}-byte request limit; send fewer or pass url="
            )
        if why is not None:
            raise ConfigurationError(
                f"{model or 'Anthropic'} cannot take {part.describe()}: {why}", field="messages"
            )
    return total


def _too_large(total: int) -> ContextLengthExceeded:
    """The conversation's media outgrew the request limit: a context too large, not a config.

    The API answers such a request 413 ``request_too_large``, which is a
    ``ContextLengthExceeded``; raised before sending, the run's overflow salvage (SPEC 7)
    compacts (old media go first, SPEC 16) and sends the turn again. A screenshot agent on
    Claude no longer stops at its eighth 3 MB screenshot while its window is nearly empty.
    """
    return ContextLengthExceeded(
        f"the conversation carries {total:,} bytes of inline media, over Anthropic's "
        f"{MAX_REQUEST_BYTES:,}-byte request limit (earlier turns' media included)",
        provider="anthropic",
        status_code=413,
        request_sent=False,
    )


def _base64_length(size: int) -> int:
    return 4 * ((size + 2) // 3)


class MediaEncoder:
    """One message's media blocks, what could not be encoded, and base64 made once per bytes."""

    __slots__ = ("_base64", "_role", "found")

    def __init__(self, role: str) -> None:
        self._role = role
        self._base64: dict[str, str] = {}
        self.found: list[tuple[MediaPart, str | None]] = []

    def block(self, part: MediaPart) -> dict[str, Any] | None:
        """The part's block; None (and the reason kept in ``found``) when it cannot be sent."""
        why = _ASSISTANT if self._role == "assistant" else self._refusal(part)
        source: dict[str, Any] = {}
        if why is None:
            try:
                source = self._source(part)
            except UnicodeDecodeError:
                why = _NOT_UTF8
        self.found.append((part, why))
        return None if why is not None else {"type": part.kind, "source": source}

    def tool_result(self, part: ToolResultPart) -> dict[str, Any]:
        """A ``tool_result`` whose ``content`` is its text, then its media blocks."""
        content: list[dict[str, Any]] = (  # the API refuses an empty text block
            [{"type": "text", "text": part.content}] if part.content else []
        )
        content.extend(b for b in map(self.block, part.media) if b is not None)
        return {
            "type": "tool_result",
            "tool_use_id": part.call_id,
            "content": content or part.content,
            "is_error": part.is_error,
        }

    def _refusal(self, part: MediaPart) -> str | None:
        if isinstance(part, AudioPart):
            return _NO_AUDIO
        if isinstance(part, ImagePart):
            if part.media_type is not None and part.media_type not in IMAGE_TYPES:
                return _IMAGE_TYPE
            base64_size = _base64_length(part.size)
            if base64_size > MAX_IMAGE_BASE64:
                return (
                    f"its base64 is {base64_size:,} bytes, over Anthropic's "
                    f"{MAX_IMAGE_BASE64:,}-byte limit per image; resize it or pass url="
                )
            return None
        if part.media_type == _TEXT and part.data is None:
            return _TEXT_URL
        return None

    def _source(self, part: MediaPart) -> dict[str, Any]:
        if part.data is None:
            return {"type": "url", "url": part.url}
        if part.media_type == _TEXT:
            return {"type": "text", "media_type": _TEXT, "data": part.data.decode("utf-8")}
        data = self._base64.get(part.sha256)
        if data is None:
            data = self._base64[part.sha256] = part.base64()
        media_type = part.media_type if isinstance(part, ImagePart) else _PDF
        return {"type": "base64", "media_type": media_type, "data": data}
