"""Media parts (SPEC 16): built from bytes, a path or a URL; checked where they are made; bytes
round-trip exactly; never shown in a repr.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from agentloop.errors import InvalidInput
from agentloop.media import (
    MAX_MEDIA_BYTES,
    AudioPart,
    DocumentPart,
    ImagePart,
    media_from_dict,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
PDF = b"%PDF-1.7\n" + b"0" * 300
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 64


def test_bytes_round_trip_exactly_with_their_sha256() -> None:
    for part in (ImagePart(PNG, "image/png"), DocumentPart(PDF), AudioPart(WAV)):
        data = part.to_dict()
        assert data["sha256"] == hashlib.sha256(part.data or b"").hexdigest()
        again = media_from_dict(data)
        assert again == part and again is not None and again.data == part.data


def test_the_media_type_is_sniffed_from_the_bytes_then_the_name(tmp_path: Path) -> None:
    (tmp_path / "chart.bin").write_bytes(PNG)
    (tmp_path / "notes.txt").write_text("hello")
    assert ImagePart.from_path(tmp_path / "chart.bin").media_type == "image/png"
    assert DocumentPart.from_path(tmp_path / "notes.txt").media_type == "text/plain"
    assert ImagePart(PNG).media_type == "image/png"
    assert ImagePart(b"\xff\xd8\xff\xe0" + b"0" * 10, "image/jpg").media_type == "image/jpeg"


def test_a_url_part_keeps_its_url() -> None:
    part = ImagePart(url="https://example.org/cat.png")
    assert part.to_dict() == {
        "type": "image",
        "media_type": None,
        "url": "https://example.org/cat.png",
    }
    assert media_from_dict(part.to_dict()) == part


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: ImagePart(b""), "empty"),
        (lambda: ImagePart(PNG, "image/jpeg"), "declared 'image/jpeg' but its bytes are"),
        (lambda: ImagePart(PDF), "takes image/"),
        (lambda: DocumentPart(PNG), "takes application/pdf or text/plain"),
        (lambda: AudioPart(b"no signature here"), "needs media_type="),
        (lambda: ImagePart(url="file:///etc/passwd"), "http:// or https://"),
        (lambda: ImagePart(url="javascript:alert(1)"), "http:// or https://"),
        (lambda: ImagePart(PNG, url="https://x"), "exactly one"),
        (lambda: ImagePart(), "exactly one"),
        (lambda: ImagePart("text"), "must be bytes"),  # type: ignore[arg-type]
        (lambda: DocumentPart(b"%PDF-" + b"0" * MAX_MEDIA_BYTES), "pass a url="),
        (lambda: ImagePart.from_path("/no/such/file.png"), "no such file"),
    ],
)
def test_bad_media_is_invalid_input_naming_the_fix(make: object, words: str) -> None:
    with pytest.raises(InvalidInput, match=words.replace("(", r"\(").replace(")", r"\)")):
        make()  # type: ignore[operator]


def test_bytes_never_appear_in_repr_or_describe() -> None:
    secret = b"\x89PNG\r\n\x1a\nSECRET-PIXELS" + b"x" * 100
    part = ImagePart(secret)
    for shown in (repr(part), part.describe(), str([part])):
        assert "SECRET" not in shown and base64.b64encode(secret).decode()[:20] not in shown
        assert "image/png" in shown and part.sha256[:12] in shown


def test_a_stored_part_whose_bytes_changed_is_refused() -> None:
    data = ImagePart(PNG).to_dict()
    data["data"] = base64.b64encode(PNG[:-1] + b"!").decode()
    with pytest.raises(InvalidInput, match="sha256"):
        media_from_dict(data)
    assert media_from_dict({"type": "text", "text": "x"}) is None


def test_media_cost_tokens_by_formula_never_by_base64_length() -> None:
    import struct
    import zlib

    from agentloop.media import IMAGE_TOKENS_MAX, media_tokens
    from agentloop.messages import Message
    from agentloop.tokens import HeuristicTokenCounter

    def png(width: int, height: int, payload: int) -> bytes:
        header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        ihdr = b"IHDR" + header
        chunk = struct.pack(">I", len(header)) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
        return b"\x89PNG\r\n\x1a\n" + chunk + b"\x00" * payload

    small = ImagePart(png(150, 100, 10))
    big = ImagePart(png(4000, 3000, 2 * 1024 * 1024))  # a 2 MB image
    # each provider's own formula: Anthropic w*h/750, OpenAI 85 + 170 a tile, Gemini 258 a tile
    assert media_tokens(small, "anthropic") == 20
    assert media_tokens(small, "openai") == 255 and media_tokens(small, "gemini") == 258
    assert media_tokens(small) == 255  # unknown provider: the largest
    assert media_tokens(big, "anthropic") == IMAGE_TOKENS_MAX
    assert media_tokens(ImagePart(png(1024, 1024, 0)), "openai") == 765  # OpenAI's own example
    assert media_tokens(ImagePart(png(2048, 4096, 0)), "openai") == 1105  # and its other one
    assert media_tokens(ImagePart(png(1000, 1000, 0)), "gemini") == 4 * 258
    pdf = DocumentPart(b"%PDF-1.7 /Type /Pages /Type /Page /Type /Page /Type /Page")
    assert media_tokens(pdf, "anthropic") == 3 * 2000 and media_tokens(pdf, "gemini") == 3 * 258
    counted = HeuristicTokenCounter().count_message(Message("user", (big,)))
    assert counted < 2_000 < big.size // 4  # a 2 MB image fits a 32k window

    from agentloop.tokens import MEDIA_PROVIDER

    message = Message("user", (small,))
    token = MEDIA_PROVIDER.set("anthropic")
    try:
        assert HeuristicTokenCounter().count_message(message) == 4 + 20  # framing + the image
        MEDIA_PROVIDER.set("gemini")
        assert HeuristicTokenCounter().count_message(message) == 4 + 258  # per provider, cached
    finally:
        MEDIA_PROVIDER.reset(token)
