"""Gemini media wire forms (SPEC 16; provider-rules, Gemini rule 5).

What ``_encode`` sends for an ``ImagePart``, ``DocumentPart`` or ``AudioPart``:

- Bytes -> ``{"inlineData": {"mimeType", "data": <base64>}}``; a URL -> ``{"fileData":
  {"mimeType", "fileUri"}}`` (the type declared, else guessed from the URL's path; a Files API
  URI may go without one, since Gemini stored its type at upload).
- Gemini's own lists decide the types (its "Supported formats" pages): images PNG, JPEG, WebP,
  HEIC, HEIF; documents PDF and plain text; audio WAV, MP3, AIFF, AAC, OGG, FLAC. Anything
  else (a GIF, a BMP) is Gemini's 400 "Unsupported MIME type", so it is a ``ConfigurationError``
  before sending, naming the part (``describe()``, never the bytes).
- A tool's media: Gemini 3 takes images (PNG, JPEG, WebP) and documents (PDF, plain text) as
  bytes inside the ``functionResponse`` itself, ``{"functionResponse": {..., "parts":
  [{"inlineData": {...}}]}}`` ("multimodal function responses"; the Gemini API has no
  ``fileData`` there). Everything else a tool returned (audio, a URL, any media on Gemini 2.5,
  which answers ``function_response.parts`` with a 400) goes in a ``user`` turn of its own right
  after the turn of function responses, each tool's media after a text line naming the tool, so
  the responses stay one per call. Media of a type Gemini cannot take at all becomes a line the
  model reads (``tool 'x' returned [image: image/gif, ...], which Gemini cannot take``), the
  soft error the engine gives for a kind the model does not take.

The base64 is computed once per part when its message is encoded (``Message.encoded``); the
nested and the separate forms share the same ``inlineData`` object.
"""

from __future__ import annotations

import mimetypes
from typing import Any
from urllib.parse import urlsplit

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError
from agentloop.messages import MediaPart, ToolResultPart

__all__ = [
    "RESPONSE_TYPES",
    "WIRE_TYPES",
    "ToolMedia",
    "encode_media",
    "refuse_kind",
    "tool_media",
]

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})
DOCUMENT_TYPES = frozenset({"application/pdf", "text/plain"})
AUDIO_TYPES = frozenset(
    {"audio/wav", "audio/mpeg", "audio/mp3", "audio/aiff", "audio/aac", "audio/ogg", "audio/flac"}
)
WIRE_TYPES = IMAGE_TYPES | DOCUMENT_TYPES | AUDIO_TYPES
"""Every media type Gemini takes in ``inlineData`` or ``fileData``."""
RESPONSE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"}) | DOCUMENT_TYPES
"""The types Gemini 3 takes inside a ``functionResponse`` (multimodal function responses)."""
FILES_API = "https://generativelanguage.googleapis.com/"
_BY_KIND = {"image": IMAGE_TYPES, "document": DOCUMENT_TYPES, "audio": AUDIO_TYPES}


def _media_type(part: MediaPart) -> str | None:
    """The type to send: the declared one, else (a URL) the one its path names."""
    if part.media_type is not None or part.url is None:
        return part.media_type
    return mimetypes.guess_type(urlsplit(part.url).path)[0]


def _unsupported(part: MediaPart, media_type: str | None) -> str | None:
    """Why Gemini cannot take ``part`` (None: it can)."""
    if media_type is None:
        if part.url is not None and part.url.startswith(FILES_API):
            return None  # a Files API upload carries its own type
        return "its URL names no media type; pass media_type="
    if media_type not in WIRE_TYPES:
        accepted = ", ".join(sorted(_BY_KIND[part.kind]))
        return f"Gemini takes {part.kind}s as {accepted}; convert it to one of them"
    return None


def encode_media(part: MediaPart) -> dict[str, Any]:
    """The wire part for ``part``; ``ConfigurationError`` when Gemini cannot take it.

    The message leaves the model out (the encoding is cached per message, not per model):
    ``encode_contents`` puts the model's name in front of it.
    """
    media_type = _media_type(part)
    why = _unsupported(part, media_type)
    if why is not None:
        raise ConfigurationError(f"cannot take {part.describe()}: {why}", field="input")
    if part.data is None:
        assert part.url is not None
        file: dict[str, Any] = {"fileUri": part.url}
        if media_type is not None:
            file["mimeType"] = media_type
        return {"fileData": file}
    return {"inlineData": {"mimeType": media_type, "data": part.base64()}}


def refuse_kind(family: str, kinds: frozenset[str], part: MediaPart) -> ConfigurationError:
    """The error for a part of a kind the model's profile does not list.

    ``encode_contents`` puts the model's name in front, as for ``encode_media``'s refusals.
    """
    takes = ", ".join(sorted(kinds)) or "no media"
    return ConfigurationError(
        f"cannot take {part.describe()}: its profile ({family}) takes {takes}", field="input"
    )


@record(repr=False)
class ToolMedia:
    """One tool result's media, encoded: where its ``functionResponse`` is and what goes where.

    ``nested``: the ``inlineData`` parts Gemini 3 takes inside the ``functionResponse``;
    ``after``: the parts that go in the user turn after the responses on Gemini 3 (its label
    first); ``after_all``: the same turn's parts on models that take no media in a response.
    """

    index: int
    nested: tuple[dict[str, Any], ...]
    after: tuple[dict[str, Any], ...]
    after_all: tuple[dict[str, Any], ...]

    def __repr__(self) -> str:  # counts only: the parts hold the base64
        sizes = f"nested={len(self.nested)}, after={len(self.after)}"
        return f"ToolMedia(index={self.index}, {sizes}, after_all={len(self.after_all)})"


def tool_media(index: int, result: ToolResultPart) -> ToolMedia:
    """Encode the media of ``result``, whose ``functionResponse`` is wire part ``index``."""
    label = {"text": f"[media returned by tool '{result.name}']"}
    nested: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    every: list[dict[str, Any]] = []
    for part in result.media:
        try:
            wire = encode_media(part)
        except ConfigurationError:
            note = f"tool '{result.name}' returned {part.describe()}, which Gemini cannot take"
            after.append({"text": note})
            every.append({"text": note})
            continue
        every.append(wire)
        blob = wire.get("inlineData")
        if blob is not None and blob["mimeType"] in RESPONSE_TYPES:
            nested.append(wire)
        else:
            after.append(wire)
    return ToolMedia(
        index,
        tuple(nested),
        (label, *after) if after else (),
        (label, *every),
    )
