"""Media parts: images, documents and audio in a prompt or a tool's result (SPEC 16).

Each part holds either the bytes (``ImagePart(data, media_type="image/png")``, or
``ImagePart.from_path(p)`` with the type guessed from the content and the name) or a URL
(``ImagePart(url="https://...")``). They are checked once, where they are made: the bytes are not
empty, not larger than ``MAX_MEDIA_BYTES``, and of the kind the declared type says (a PNG declared
as JPEG is refused); a URL is ``http``/``https`` only. Every problem is an ``InvalidInput``
naming the fix, raised before any request.

The bytes never appear in a ``repr``, a log line, a span or an error: those show the media type,
the size and the first characters of the sha256. ``agentloop.messages`` re-exports the three
classes; they are members of its ``Part`` union.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar, Self

from agentloop._util.slots import record
from agentloop.errors import InvalidInput

__all__ = [
    "AUDIO_TOKENS_PER_SECOND",
    "GEMINI_TILE_TOKENS",
    "IMAGE_TOKENS_MAX",
    "MAX_MEDIA_BYTES",
    "PDF_PAGE_TOKENS",
    "AudioPart",
    "DocumentPart",
    "ImagePart",
    "MediaPart",
    "image_size",
    "media_from_dict",
    "media_from_path",
    "media_tokens",
]

MAX_MEDIA_BYTES = 20 * 1024 * 1024
"""The largest part accepted as bytes (20 MiB: the inline limit of OpenAI and Gemini); larger
files go by URL or the provider's file API."""

_SIGNATURES: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),
    (b"%PDF-", 0, "application/pdf"),
    (b"ID3", 0, "audio/mpeg"),
    (b"\xff\xfb", 0, "audio/mpeg"),
    (b"\xff\xf3", 0, "audio/mpeg"),
    (b"WAVE", 8, "audio/wav"),
    (b"OggS", 0, "audio/ogg"),
    (b"fLaC", 0, "audio/flac"),
)
_ALIASES = {"image/jpg": "image/jpeg", "audio/x-wav": "audio/wav", "audio/mp3": "audio/mpeg"}


def _guess_type(name: str) -> str | None:
    import mimetypes  # its tables load on first use only

    return mimetypes.guess_type(name)[0]


def sniff(data: bytes) -> str | None:
    """The media type the bytes themselves show, when they have a known signature."""
    for magic, offset, media_type in _SIGNATURES:
        if data[offset : offset + len(magic)] == magic:
            return media_type
    return None


@record(repr=False)
class _Media:
    """Bytes or a URL of one media type; the kinds below say which types they take."""

    kind: ClassVar[str] = "media"
    accepts: ClassVar[tuple[str, ...]] = ()

    data: bytes | None = None
    media_type: str | None = None
    url: str | None = field(default=None, kw_only=True)
    sha256: str = field(default="", init=False, compare=False)

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise InvalidInput(f"{type(self).__name__} needs data= (bytes) or url=, exactly one")
        if self.url is not None:
            self._check_url(self.url)
        else:
            self._check_data(self.data)
        declared = self.media_type
        if declared is not None:
            object.__setattr__(self, "media_type", _ALIASES.get(declared.lower(), declared.lower()))
        if self.media_type is not None and not self.media_type.startswith(self.accepts):
            raise InvalidInput(
                f"{type(self).__name__} takes {' or '.join(self.accepts)}*, "
                f"not {self.media_type!r}; use the part that fits the content"
            )

    def _check_url(self, url: str) -> None:
        from urllib.parse import urlsplit  # loaded by the first URL part, not by every import

        scheme = urlsplit(url).scheme.lower() if isinstance(url, str) else ""
        if scheme not in ("http", "https"):
            raise InvalidInput(
                f"{type(self).__name__} url must be http:// or https://, got {scheme or url!r}; "
                "for a local file use from_path()"
            )

    def _check_data(self, data: object) -> None:
        name = type(self).__name__
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidInput(f"{name} data must be bytes, got {type(data).__name__}")
        raw = bytes(data)
        if not raw:
            raise InvalidInput(f"{name} data is empty (0 bytes)")
        if len(raw) > MAX_MEDIA_BYTES:
            raise InvalidInput(
                f"{name} is {len(raw):,} bytes, over the {MAX_MEDIA_BYTES:,}-byte limit for "
                "inline media; pass a url= instead"
            )
        object.__setattr__(self, "data", raw)
        import hashlib  # loaded by the first media part, not by every import

        object.__setattr__(self, "sha256", hashlib.sha256(raw).hexdigest())
        seen = sniff(raw)
        declared = self.media_type
        if declared is None:
            if seen is None:
                raise InvalidInput(f"{name} needs media_type=: the bytes have no known signature")
            object.__setattr__(self, "media_type", seen)
        elif seen is not None and seen != _ALIASES.get(declared.lower(), declared.lower()):
            raise InvalidInput(f"{name} is declared {declared!r} but its bytes are {seen!r}")

    @classmethod
    def from_path(cls, path: str | Path, media_type: str | None = None) -> Self:
        """The file's bytes; the media type from its content, else its name."""
        file = Path(path)
        if not file.is_file():
            raise InvalidInput(f"{cls.__name__}.from_path: no such file: {str(file)!r}")
        data = file.read_bytes()
        guessed = media_type or sniff(data) or _guess_type(file.name)
        return cls(data, guessed)

    @property
    def size(self) -> int:
        """The number of bytes (0 for a URL)."""
        return 0 if self.data is None else len(self.data)

    def describe(self) -> str:
        """What logs, spans, errors and the CLI show instead of the bytes."""
        if self.data is None:
            return f"[{self.kind}: {self.media_type or 'unknown type'}, {self.url}]"
        return f"[{self.kind}: {self.media_type}, {self.size:,} bytes, sha256 {self.sha256[:12]}]"

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.describe()[len(self.kind) + 1 :]}"

    def base64(self) -> str:
        """The bytes as base64 text (the wire form of every provider)."""
        assert self.data is not None
        return base64.b64encode(self.data).decode("ascii")

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form: the bytes as base64 with their sha256, or the URL."""
        data: dict[str, Any] = {"type": self.kind, "media_type": self.media_type}
        if self.data is None:
            data["url"] = self.url
        else:
            data["data"] = self.base64()
            data["sha256"] = self.sha256
        return data


@record(repr=False)
class ImagePart(_Media):
    """An image (PNG, JPEG, GIF, WebP)."""

    kind: ClassVar[str] = "image"
    accepts: ClassVar[tuple[str, ...]] = ("image/",)


@record(repr=False)
class DocumentPart(_Media):
    """A document: a PDF or plain text."""

    kind: ClassVar[str] = "document"
    accepts: ClassVar[tuple[str, ...]] = ("application/pdf", "text/plain")


@record(repr=False)
class AudioPart(_Media):
    """A sound recording (WAV, MP3, ...)."""

    kind: ClassVar[str] = "audio"
    accepts: ClassVar[tuple[str, ...]] = ("audio/",)


MediaPart = ImagePart | DocumentPart | AudioPart


def media_from_path(path: str | Path) -> MediaPart:
    """The part a file is: an image, a document (PDF, plain text) or audio.

    Judged by its content, then its name; anything else is ``InvalidInput`` naming the file.
    """
    file = Path(path)
    if not file.is_file():
        raise InvalidInput(f"no such file: {str(file)!r}")
    data = file.read_bytes()
    media_type = sniff(data) or _guess_type(file.name) or ""
    for cls in (ImagePart, DocumentPart, AudioPart):
        if media_type.startswith(cls.accepts):
            return cls(data, media_type)
    raise InvalidInput(
        f"{str(file)!r} is not an image, a PDF, plain text or audio ({media_type or 'unknown'})"
    )


IMAGE_TOKENS_MAX = 1_600
"""An image's tokens at most (Anthropic resizes to about 1.15 megapixels: ~1,600 tokens)."""
PDF_PAGE_TOKENS = 2_000
AUDIO_TOKENS_PER_SECOND = 32


def media_tokens(part: MediaPart, provider: str | None = None) -> int:
    """A media part's context cost by ``provider``'s own formula, never its base64 length.

    Images: Anthropic width x height / 750 (at most ``IMAGE_TOKENS_MAX``: it resizes past about
    1.15 megapixels); OpenAI (and the OpenAI-compatible family) 85 + 170 a 512-px tile after
    fitting into 2048 px and scaling the short side to 768; Gemini 258 a 768-px tile (258 for an
    image of 384 px or less). PDFs ``PDF_PAGE_TOKENS`` a page (Gemini 258), plain text 4
    characters a token, audio ``AUDIO_TOKENS_PER_SECOND`` (Gemini's rate), its length read from
    a WAV header or taken at 16 kB a second. ``provider=None`` (not known) takes the largest of
    the formulas, so compaction never undercounts; so does an image whose size cannot be read.
    """
    data = part.data
    if isinstance(part, ImagePart):
        size = image_size(data) if data is not None else None
        return IMAGE_TOKENS_MAX if size is None else _image_tokens(size, provider)
    if data is None:
        return IMAGE_TOKENS_MAX
    if isinstance(part, DocumentPart):
        if part.media_type != "application/pdf":
            return len(data) // 4 + 1
        pages = max(1, data.count(b"/Type /Page") - data.count(b"/Type /Pages"))
        return pages * (GEMINI_TILE_TOKENS if provider == "gemini" else PDF_PAGE_TOKENS)
    seconds = _wav_seconds(data) if data[8:12] == b"WAVE" else len(data) / 16_000
    return max(1, int(seconds * AUDIO_TOKENS_PER_SECOND))


GEMINI_TILE_TOKENS = 258


def _image_tokens(size: tuple[int, int], provider: str | None) -> int:
    width, height = size
    anthropic = max(1, min(IMAGE_TOKENS_MAX, width * height // 750))
    if provider == "anthropic":
        return anthropic
    if provider == "gemini":
        if width <= 384 and height <= 384:
            return GEMINI_TILE_TOKENS
        return GEMINI_TILE_TOKENS * math.ceil(width / 768) * math.ceil(height / 768)
    openai = _openai_tiles(width, height)
    return openai if provider is not None else max(anthropic, openai)


def _openai_tiles(width: int, height: int) -> int:
    scale = min(1.0, 2048 / max(width, height, 1))
    scale *= min(1.0, 768 / max(min(width, height) * scale, 1))
    return 85 + 170 * math.ceil(width * scale / 512) * math.ceil(height * scale / 512)


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG, GIF or JPEG header (None when unreadable)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:3] == b"GIF" and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return int.from_bytes(data[at + 7 : at + 9], "big"), int.from_bytes(
                data[at + 5 : at + 7], "big"
            )
        at += 2 + length
    return None


def _wav_seconds(data: bytes) -> float:
    rate = int.from_bytes(data[28:32], "little") if len(data) >= 32 else 0
    return len(data) / rate if rate else len(data) / 16_000


_KINDS: dict[str, type[ImagePart] | type[DocumentPart] | type[AudioPart]] = {
    "image": ImagePart,
    "document": DocumentPart,
    "audio": AudioPart,
}


def media_from_dict(data: Mapping[str, Any]) -> MediaPart | None:
    """The media part ``to_dict`` wrote, or None when ``data`` is not one.

    A stored part whose bytes no longer match their sha256 is ``InvalidInput``.
    """
    cls = _KINDS.get(str(data.get("type")))
    if cls is None:
        return None
    media_type = data.get("media_type")
    if "url" in data:
        return cls(media_type=media_type, url=data["url"])
    try:
        raw = base64.b64decode(str(data["data"]), validate=True)
    except (KeyError, binascii.Error) as exc:
        raise InvalidInput(f"{cls.kind} part: its data is not base64: {exc}") from None
    part = cls(raw, media_type)
    expected = data.get("sha256")
    if expected is not None and expected != part.sha256:
        raise InvalidInput(f"{cls.kind} part: its bytes do not match their sha256")
    return part
