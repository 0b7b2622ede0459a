"""Media parts: images, documents and audio in a prompt or a tool's result (SPEC 16).

Each part holds either the bytes (``ImagePart(data, media_type="image/png")``, or
``ImagePart.from_path(p)`` with the type guessed from the content and the name) or a URL
(``ImagePart(url="https://...")``). They are checked once, where they are made: the bytes are not
empty, not larger than ``MAX_MEDIA_BYTES``, of a type the part takes (``IMAGE_TYPES``,
``DOCUMENT_TYPES``, ``AUDIO_TYPES``: every type some provider takes, and each one we can
recognise), and what that type says by their content: its magic number (``sniff``), or for
plain text no control characters (``is_text``). So a PNG declared as JPEG, a program saved as
``x.png`` and ``ImagePart(b"MZ...", media_type="image/png")`` are all refused. A URL is
``http``/``https`` only; its bytes are the provider's to fetch, so they cannot be checked here.
Every problem is an ``InvalidInput`` naming the fix, raised before any request.

The bytes never appear in a ``repr``, a log line, a span or an error: those show the media type,
the size and the first characters of the sha256. ``agentloop.messages`` re-exports the three
classes; they are members of its ``Part`` union.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar, Self

from agentloop._util.slots import record
from agentloop.errors import InvalidInput

__all__ = [
    "AUDIO_TOKENS_PER_SECOND",
    "AUDIO_TYPES",
    "DOCUMENT_TYPES",
    "GEMINI_TILE_TOKENS",
    "IMAGE_TOKENS_MAX",
    "IMAGE_TYPES",
    "MAX_MEDIA_BYTES",
    "PDF_PAGE_TOKENS",
    "AudioPart",
    "DocumentPart",
    "ImagePart",
    "MediaPart",
    "image_size",
    "is_media_type",
    "is_text",
    "media_from_dict",
    "media_from_path",
    "media_tokens",
    "sniff",
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
    (b"BM", 0, "image/bmp"),
    (b"II*\x00", 0, "image/tiff"),
    (b"MM\x00*", 0, "image/tiff"),
    (b"%PDF-", 0, "application/pdf"),
    (b"ID3", 0, "audio/mpeg"),
    (b"WAVE", 8, "audio/wav"),
    (b"AIFF", 8, "audio/aiff"),
    (b"AIFC", 8, "audio/aiff"),
    (b"OggS", 0, "audio/ogg"),
    (b"fLaC", 0, "audio/flac"),
    (b"ADIF", 0, "audio/aac"),
)
"""Magic numbers: the bytes at an offset that each media type starts with."""
_HEIF_BRANDS = frozenset({b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1"})
_CONTAINERS = {b"WEBP": b"RIFF", b"WAVE": b"RIFF", b"AIFF": b"FORM", b"AIFC": b"FORM"}
_ALIASES = {
    "image/jpg": "image/jpeg",
    "image/x-ms-bmp": "image/bmp",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
    "audio/x-aiff": "audio/aiff",
    "audio/x-flac": "audio/flac",
    "audio/x-aac": "audio/aac",
}
IMAGE_TYPES = (
    "image/png", "image/jpeg", "image/gif", "image/webp", "image/heic", "image/heif",
    "image/bmp", "image/tiff",
)  # fmt: skip
"""The image types a part takes: every type some provider takes, each with a signature."""
DOCUMENT_TYPES = ("application/pdf", "text/plain")
AUDIO_TYPES = ("audio/wav", "audio/mpeg", "audio/ogg", "audio/flac", "audio/aiff", "audio/aac")
_BINARY_BYTES = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")


def _guess_type(name: str) -> str | None:
    import mimetypes  # its tables load on first use only

    return mimetypes.guess_type(name)[0]


def _canonical(media_type: str) -> str:
    lowered = media_type.lower()
    return _ALIASES.get(lowered, lowered)


def sniff(data: bytes) -> str | None:
    """The media type the bytes themselves show, when they have a known signature.

    Plain text has none (any bytes without control characters may be text): it is never
    sniffed, only checked (``is_text``) once declared or named.
    """
    for magic, offset, media_type in _SIGNATURES:
        if data[offset : offset + len(magic)] == magic:
            container = _CONTAINERS.get(magic)
            if container is None or data[:4] == container:
                return media_type
    if data[4:8] == b"ftyp" and data[8:12] in _HEIF_BRANDS:
        return "image/heic" if data[8:12].startswith(b"he") else "image/heif"
    return _frame_sync(data)


def _frame_sync(data: bytes) -> str | None:
    """MP3 and ADTS AAC have no magic number: a frame header, 11 (12) set bits, opens them.

    MPEG audio counts only as layer II or III with a valid bitrate and sample rate, so that
    UTF-16 text (``FF FE``, which reads as a layer I header) is not taken for sound.
    """
    if len(data) < 3 or data[0] != 0xFF:
        return None
    if data[1] & 0xF6 == 0xF0:  # 1111 x 00 x: ADTS (layer bits 00, which MPEG audio reserves)
        return "audio/aac"
    layer, bitrate, rate = data[1] & 0x06, data[2] >> 4, (data[2] >> 2) & 0x03
    if data[1] & 0xE0 == 0xE0 and layer in (0x02, 0x04) and bitrate != 0x0F and rate != 0x03:
        return "audio/mpeg"
    return None


def is_text(data: bytes) -> bool:
    """Whether ``data`` may be plain text: no control characters but whitespace (and ESC).

    UTF-16 with a byte-order mark is judged on its decoded characters; anything else byte by
    byte, so UTF-8 and 8-bit encodings pass and an executable, an archive or an image (whose
    bytes hold NULs and control codes) does not.
    """
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return _CONTROLS.search(data.decode("utf-16")) is None
        except UnicodeDecodeError:
            pass
    return _BINARY_BYTES.search(data) is None


def is_media_type(data: bytes, media_type: str) -> bool:
    """Whether ``data`` is of ``media_type`` by its content (its signature, or as text)."""
    media_type = _canonical(media_type)
    if media_type == "text/plain":
        return is_text(data)
    seen = sniff(data)
    if media_type in ("image/heic", "image/heif"):  # one family: brands mix in both
        return seen in ("image/heic", "image/heif")
    return seen == media_type


def _text_as_data(name: str, text: str) -> str:
    """The fix for a ``str`` given as a part's bytes: a path, a URL or base64 text."""
    if text.startswith(("http://", "https://")):
        return f"{name} data must be bytes, got a URL: use {name}(url={text[:80]!r})"
    if len(text) > 260 or text.startswith("data:"):
        return (
            f"{name} data must be bytes, got a str of {len(text):,} characters; decode base64 "
            f"text first ({name}(base64.b64decode(text), media_type=...))"
        )
    return (
        f"{name} data must be bytes, got the str {text!r}: for a file use "
        f"{name}.from_path({text!r}), for a web address {name}(url=...)"
    )


def _listed(types: tuple[str, ...]) -> str:
    return types[0] if len(types) == 1 else f"{', '.join(types[:-1])} or {types[-1]}"


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
        name = type(self).__name__
        if (self.data is None) == (self.url is None):
            raise InvalidInput(f"{name} needs data= (bytes) or url=, exactly one")
        declared = self.media_type
        if declared is not None:
            if not isinstance(declared, str):
                raise InvalidInput(
                    f"{name} media_type must be a str such as {self.accepts[0]!r}, "
                    f"got {type(declared).__name__}"
                )
            object.__setattr__(self, "media_type", _canonical(declared))
        if self.url is not None:
            self._check_url(self.url)
        else:
            self._check_data(self.data)
        if self.media_type is not None and self.media_type not in self.accepts:
            raise InvalidInput(
                f"{name} takes {_listed(self.accepts)}, not {self.media_type!r}; use the part "
                "that fits the content"
            )
        if self.data is not None:
            self._check_content(self.data, declared)

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
        if isinstance(data, str):
            raise InvalidInput(_text_as_data(name, data))
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
        if self.media_type is None:
            seen = sniff(raw)
            if seen is None:
                raise InvalidInput(f"{name} needs media_type=: the bytes have no known signature")
            object.__setattr__(self, "media_type", seen)

    def _check_content(self, data: bytes, declared: str | None) -> None:
        """The bytes must be what the type says: a ``.png`` holding a program is no image."""
        media_type = self.media_type
        assert media_type is not None
        if is_media_type(data, media_type):
            return
        name, seen = type(self).__name__, sniff(data)
        if seen is not None:
            raise InvalidInput(f"{name} is declared {declared!r} but its bytes are {seen!r}")
        what = "text: they hold control characters" if media_type == "text/plain" else (
            f"{media_type}: they do not start with its signature"
        )  # fmt: skip
        raise InvalidInput(
            f"{name} is declared {declared!r} but its bytes are not {what}; pass the type the "
            "file really is, or convert it"
        )

    @classmethod
    def from_path(cls, path: str | Path, media_type: str | None = None) -> Self:
        """The file's bytes; the media type from its content, else its name.

        The content must match the type either way: a file named ``.png`` whose bytes are no
        PNG is ``InvalidInput`` naming the file.
        """
        file = Path(path)
        if not file.is_file():
            raise InvalidInput(f"{cls.__name__}.from_path: no such file: {str(file)!r}")
        data = file.read_bytes()
        seen = None if media_type else sniff(data)
        guessed = media_type or seen or _guess_type(file.name)
        by_name = " (typed by its name)" if guessed and not media_type and not seen else ""
        try:
            return cls(data, guessed)
        except InvalidInput as exc:
            raise InvalidInput(f"{cls.__name__}.from_path({str(file)!r}){by_name}: {exc}") from None

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
    """An image: PNG, JPEG, GIF, WebP, HEIC/HEIF, BMP or TIFF (each adapter says its own)."""

    kind: ClassVar[str] = "image"
    accepts: ClassVar[tuple[str, ...]] = IMAGE_TYPES


@record(repr=False)
class DocumentPart(_Media):
    """A document: a PDF or plain text."""

    kind: ClassVar[str] = "document"
    accepts: ClassVar[tuple[str, ...]] = DOCUMENT_TYPES


@record(repr=False)
class AudioPart(_Media):
    """A sound recording (WAV, MP3, OGG, FLAC, AIFF, AAC)."""

    kind: ClassVar[str] = "audio"
    accepts: ClassVar[tuple[str, ...]] = AUDIO_TYPES


MediaPart = ImagePart | DocumentPart | AudioPart


def media_from_path(path: str | Path) -> MediaPart:
    """The part a file is: an image, a document (PDF, plain text) or audio.

    Judged by its content, then its name; anything else is ``InvalidInput`` naming the file.
    """
    file = Path(path)
    if not file.is_file():
        raise InvalidInput(f"no such file: {str(file)!r}")
    data = file.read_bytes()
    media_type = _canonical(sniff(data) or _guess_type(file.name) or "")
    for cls in (ImagePart, DocumentPart, AudioPart):
        if media_type in cls.accepts:
            try:
                return cls(data, media_type)
            except InvalidInput as exc:
                raise InvalidInput(f"{str(file)!r}: {exc}") from None
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
    gemini = _gemini_tiles(width, height)
    if provider == "gemini":
        return gemini
    openai = _openai_tiles(width, height)
    return openai if provider is not None else max(anthropic, openai, gemini)


def _gemini_tiles(width: int, height: int) -> int:
    if width <= 384 and height <= 384:
        return GEMINI_TILE_TOKENS
    return GEMINI_TILE_TOKENS * math.ceil(width / 768) * math.ceil(height / 768)


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
