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
    assert media_tokens(small) == 258  # unknown provider: the largest (Gemini's here)
    wide = ImagePart(png(1000, 1000, 0))  # Gemini 4 tiles (1,032), OpenAI 765, Anthropic 1,333
    assert media_tokens(wide) == max(
        media_tokens(wide, p) for p in ("anthropic", "openai", "gemini")
    )
    assert media_tokens(big, "anthropic") == IMAGE_TOKENS_MAX
    assert media_tokens(ImagePart(png(1024, 1024, 0)), "openai") == 765  # OpenAI's own example
    assert media_tokens(ImagePart(png(2048, 4096, 0)), "openai") == 1105  # and its other one
    assert media_tokens(ImagePart(png(1000, 1000, 0)), "gemini") == 4 * 258
    pdf = DocumentPart(b"%PDF-1.7 /Type /Pages /Type /Page /Type /Page /Type /Page")
    assert media_tokens(pdf, "anthropic") == 3 * 2000 and media_tokens(pdf, "gemini") == 3 * 258
    counted = HeuristicTokenCounter().count_message(Message("user", (big,)))
    assert counted < 8_000 < big.size // 4  # a 2 MB image fits a 32k window (Gemini: 24 tiles)

    from agentloop.tokens import MEDIA_PROVIDER

    message = Message("user", (small,))
    token = MEDIA_PROVIDER.set("anthropic")
    try:
        assert HeuristicTokenCounter().count_message(message) == 4 + 20  # framing + the image
        MEDIA_PROVIDER.set("gemini")
        assert HeuristicTokenCounter().count_message(message) == 4 + 258  # per provider, cached
    finally:
        MEDIA_PROVIDER.reset(token)


# -- the content is what the type says (issue 32, item 9) --------------------------------------

PROGRAM = (
    b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00\xb8" + bytes(47) + b"PE\x00\x00"
)
ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(56)
SAMPLES = {  # the first bytes of a real file of each type we take
    "image/png": PNG,
    "image/jpeg": b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01",
    "image/gif": b"GIF87a\x01\x00\x01\x00\x80\x00\x00",
    "image/webp": b"RIFF\x1a\x00\x00\x00WEBPVP8 \x0e\x00\x00\x00",
    "image/heic": b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic",
    "image/heif": b"\x00\x00\x00\x18ftypmif1\x00\x00\x00\x00mif1heic",
    "image/bmp": b"BM\x3a\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00",
    "image/tiff": b"II*\x00\x08\x00\x00\x00",
    "application/pdf": PDF,
    "text/plain": "Grüße, plain text.\r\n\tindented\n".encode(),
    "audio/wav": WAV,
    "audio/mpeg": b"ID3\x04\x00\x00\x00\x00\x00\x00",
    "audio/ogg": b"OggS\x00\x02\x00\x00\x00\x00\x00\x00",
    "audio/flac": b"fLaC\x00\x00\x00\x22",
    "audio/aiff": b"FORM\x00\x00\x00\x2eAIFFCOMM",
    "audio/aac": b"\xff\xf1\x50\x80\x02\x1f\xfc",
}
KINDS = {"image": ImagePart, "application": DocumentPart, "text": DocumentPart, "audio": AudioPart}


@pytest.mark.parametrize("media_type", list(SAMPLES))
def test_every_type_we_take_is_recognised_by_its_bytes(media_type: str) -> None:
    cls = KINDS[media_type.split("/")[0]]
    assert cls(SAMPLES[media_type], media_type).media_type == media_type
    if media_type != "text/plain":  # text has no signature: it is checked, never sniffed
        assert cls(SAMPLES[media_type]).media_type == media_type
    for other in cls.accepts:  # the same bytes under another type of the same kind: refused
        same_family = {media_type, other} <= {"image/heic", "image/heif"}
        if other != media_type and not same_family and not (other == "text/plain"):
            with pytest.raises(InvalidInput, match=f"declared '{other}' but its bytes are"):
                cls(SAMPLES[media_type], other)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: ImagePart(PROGRAM, media_type="image/png"), "are not image/png: they do not"),
        (lambda: ImagePart(ELF, "image/jpeg"), "are not image/jpeg"),
        (lambda: AudioPart(PROGRAM, "audio/mpeg"), "are not audio/mpeg"),
        (lambda: DocumentPart(PROGRAM, "application/pdf"), "are not application/pdf"),
        (lambda: DocumentPart(ELF, "text/plain"), "are not text: they hold control characters"),
        (lambda: DocumentPart(PNG, "text/plain"), "declared 'text/plain' but its bytes are 'image/png'"),  # noqa: E501
        (lambda: ImagePart(b"XXXX\x1a\x00\x00\x00WEBPVP8 ", "image/webp"), "are not image/webp"),
        (lambda: ImagePart(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml"),
         "ImagePart takes image/png, image/jpeg, image/gif, image/webp"),
        (lambda: ImagePart(url="https://example.org/a.svg", media_type="image/svg+xml"),
         "not 'image/svg+xml'"),
        (lambda: AudioPart(b"\x1aE\xdf\xa3webm", "audio/webm"), "AudioPart takes audio/wav"),
        (lambda: ImagePart(PNG, media_type=5), "media_type must be a str"),  # type: ignore[arg-type]
    ],
)  # fmt: skip
def test_bytes_that_are_not_their_type_are_invalid_input(make: object, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        make()  # type: ignore[operator]
    assert words in str(caught.value)
    assert "MZ" not in str(caught.value) and "ELF" not in str(caught.value)  # never the bytes


def test_a_program_saved_as_png_is_refused_naming_the_file(tmp_path: Path) -> None:
    from agentloop.media import media_from_path

    program = tmp_path / "cat.png"
    program.write_bytes(PROGRAM)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(ELF)
    for make, file in ((ImagePart.from_path, program), (media_from_path, program),
                       (DocumentPart.from_path, notes)):  # fmt: skip
        with pytest.raises(InvalidInput, match="its bytes are not") as caught:
            make(file)
        assert repr(str(file)) in str(caught.value)
    with pytest.raises(InvalidInput, match=r"\(typed by its name\)"):
        ImagePart.from_path(program)
    with pytest.raises(InvalidInput, match="declared 'image/png'"):
        ImagePart.from_path(program, "image/png")
    # UTF-16 text with its byte-order mark is text; a stored part is checked as it is read
    (tmp_path / "u16.txt").write_bytes("ünïcode".encode("utf-16"))
    assert DocumentPart.from_path(tmp_path / "u16.txt").media_type == "text/plain"
    stored = {
        "type": "image",
        "media_type": "image/png",
        "data": base64.b64encode(PROGRAM).decode(),
    }
    with pytest.raises(InvalidInput, match="are not image/png"):
        media_from_dict(stored)


@pytest.mark.parametrize(
    ("data", "fix"),
    [
        ("x.png", "use ImagePart.from_path('x.png'), for a web address ImagePart(url=...)"),
        ("https://example.org/cat.png", "use ImagePart(url='https://example.org/cat.png')"),
        ("iVBORw0KGgo" * 40, "decode base64 text first (ImagePart(base64.b64decode(text)"),
    ],
    ids=["path", "url", "base64"],
)
def test_a_str_as_data_points_to_from_path_or_url(data: str, fix: str) -> None:
    with pytest.raises(InvalidInput, match="ImagePart data must be bytes") as caught:
        ImagePart(data)  # type: ignore[arg-type]
    assert fix in str(caught.value)


def test_mp3_and_aac_are_known_by_their_frame_header_and_utf16_text_is_not_sound() -> None:
    assert AudioPart(b"\xff\xfb\x90\x64" + bytes(40)).media_type == "audio/mpeg"  # MPEG-1 layer III
    assert AudioPart(b"\xff\xf3\x40\xc4" + bytes(40)).media_type == "audio/mpeg"  # MPEG-2 layer III
    assert AudioPart(b"\xff\xf9\x50\x80" + bytes(40)).media_type == "audio/aac"  # ADTS, MPEG-2
    text = "a note".encode("utf-16")  # starts FF FE, which reads as an MPEG layer I header
    assert DocumentPart(text, "text/plain").media_type == "text/plain"
    with pytest.raises(InvalidInput, match="needs media_type="):
        AudioPart(text)
    with pytest.raises(InvalidInput, match="are not audio/mpeg"):
        AudioPart(text, "audio/mpeg")
