"""The media rules of the Chat Completions twin (provider-rules.md, OpenAI 7), in OpenAI's words.

``check_content`` runs on every message of a request the twin receives (``openai_chat``). What
it enforces, with OpenAI's status (400) and text where OpenAI's is known (quoted from replies
recorded in public reports), else a plain one in OpenAI's style (marked *ours*):

- a content list is not empty, and each part is an object with a ``type`` its role takes: user
  ``text``/``image_url``/``input_audio``/``file``; system, developer and tool ``text`` only;
  assistant ``text``/``refusal`` ("Invalid value: 'x'. Supported values are: ...");
- an image in a ``tool`` message: "Invalid 'messages[3]'. Image URLs are only allowed for
  messages with role 'user', but this message with role 'tool' contains an image URL.";
- a required field missing ("Missing required parameter: 'messages[0].content[1].image_url'.");
- ``image_url.url``: an http(s) URL, or a data URL with an image MIME type and base64 that
  decodes to something ("Invalid image URL: '...url'. Expected a base64-encoded data URL with an
  image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got a value without
  the 'data:' prefix." / "unsupported MIME type 'x'" / "an invalid base64-encoded value" /
  "empty base64-encoded bytes"); its bytes PNG, JPEG, GIF or WebP ("You uploaded an unsupported
  image. Please make sure your image is below 20 MB in size and is of one the following formats:
  ['png', 'jpeg', 'gif', 'webp']."); ``detail`` auto, low or high;
- ``file``: ``file_data`` or ``file_id``; ``file_data`` with a ``filename`` (*ours*) and a data
  URL of a PDF ("Invalid file data: '...file_data'. Expected a base64-encoded data URL with an
  application/pdf MIME type (e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), but got
  ..."), whose bytes are a PDF (*ours*);
- ``input_audio``: ``format`` wav or mp3 ("Invalid value: 'ogg'. Supported values are: 'wav' and
  'mp3'."), ``data`` plain base64 (*ours*);
- by model, from OpenAI's docs and reports (the twin's own table, not the adapter's profiles): a
  model without vision (gpt-3.5, gpt-4, o1-mini, o1-preview, o3-mini) answers "Invalid content
  type. image_url is only supported by certain models." (and the same for ``file``, *ours*);
  input_audio is only for the audio models (gpt-audio*, gpt-4o(-mini)-audio-preview*; *ours*),
  which answer an image with "This model does not support image_url content.".
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FILE_DATA_TEXT",
    "IMAGE_URL_TEXT",
    "ONLY_CERTAIN_MODELS",
    "TOOL_IMAGE_TEXT",
    "UNSUPPORTED_IMAGE_TEXT",
    "check_content",
]

IMAGE_URL_TEXT = (
    "Invalid image URL: '{param}'. Expected a base64-encoded data URL with an image MIME type "
    "(e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got {got}."
)
FILE_DATA_TEXT = (
    "Invalid file data: '{param}'. Expected a base64-encoded data URL with an application/pdf "
    "MIME type (e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), but got {got}."
)
UNSUPPORTED_IMAGE_TEXT = (
    "You uploaded an unsupported image. Please make sure your image is below 20 MB in size and "
    "is of one the following formats: ['png', 'jpeg', 'gif', 'webp']."
)
TOOL_IMAGE_TEXT = (
    "Invalid 'messages[{index}]'. Image URLs are only allowed for messages with role 'user', but "
    "this message with role 'tool' contains an image URL."
)
ONLY_CERTAIN_MODELS = "Invalid content type. {kind} is only supported by certain models."

_TEXT_ONLY = re.compile(
    r"gpt-3\.5.*|gpt-4(-\d{4}.*|-32k.*|-turbo-preview)?|o1-mini.*|o1-preview.*|o3-mini.*"
)
_AUDIO = re.compile(r"gpt-audio.*|gpt-4o(-mini)?-audio.*")
_PART_TYPES: Mapping[str, tuple[str, ...]] = {
    "user": ("text", "image_url", "input_audio", "file"),
    "assistant": ("text", "refusal"),
}
_SIGNATURES = {
    "png": b"\x89PNG\r\n\x1a\n",
    "jpeg": b"\xff\xd8\xff",
    "gif": b"GIF8",
}
_DATA_URL = re.compile(r"data:([^;,]*);base64,(.*)", re.DOTALL)
_DETAILS = ("auto", "low", "high")
_AUDIO_FORMATS = ("wav", "mp3")
_PDF = "application/pdf"

Bad = Callable[[str, str | None, str | None], Exception]
"""``openai_chat._bad``: OpenAI's 400 ``invalid_request_error`` with a message, param and code."""


@dataclass(frozen=True)
class _At:
    """Where a content part is: message ``index``, part ``number``."""

    index: int
    number: int

    @property
    def path(self) -> str:
        return f"messages[{self.index}].content[{self.number}]"

    @property
    def type_param(self) -> str:
        """The param OpenAI names in "Invalid content type" (its dotted, bracketed form)."""
        return f"messages.[{self.index}].content.[{self.number}].type"


def check_content(index: int, message: Mapping[str, Any], model: str, bad: Bad) -> None:
    """Raise ``bad(...)`` for the first media rule message ``index`` breaks (text passes)."""
    content = message.get("content")
    if not isinstance(content, list):
        return
    role = str(message.get("role"))
    if not content:
        param = f"messages.[{index}].content"
        raise bad(f"[] is too short - '{param}'", param, "empty_array")
    for number, part in enumerate(content):
        at = _At(index, number)
        if not isinstance(part, dict) or "type" not in part:
            raise _missing(f"{at.path}.type", bad)
        kind = part["type"]
        if role == "tool" and kind == "image_url":
            raise bad(TOOL_IMAGE_TEXT.format(index=index), f"messages[{index}]", None)
        allowed = _PART_TYPES.get(role, ("text",))
        if kind not in allowed:
            raise _invalid_value(kind, allowed, f"{at.path}.type", bad)
        _CHECKS[kind](part, at, model, bad)


def _invalid_value(value: object, allowed: tuple[str, ...], param: str, bad: Bad) -> Exception:
    listed = ", ".join(f"'{a}'" for a in allowed[:-1])
    joiner = "," if len(allowed) > 2 else ""
    listed = f"{listed}{joiner} and '{allowed[-1]}'" if listed else f"'{allowed[0]}'"
    return bad(f"Invalid value: '{value}'. Supported values are: {listed}.", param, "invalid_value")


def _missing(param: str, bad: Bad) -> Exception:
    return bad(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


def _field(part: object, key: str, path: str, bad: Bad) -> Any:
    value = part.get(key) if isinstance(part, dict) else None
    if value is None:
        raise _missing(f"{path}.{key}", bad)
    return value


def _text(part: Mapping[str, Any], at: _At, model: str, bad: Bad) -> None:
    _field(part, "text", at.path, bad)


def _refusal(part: Mapping[str, Any], at: _At, model: str, bad: Bad) -> None:
    _field(part, "refusal", at.path, bad)


def _decoded(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _data_url(
    url: object, param: str, text: str, wanted: Callable[[str], bool], bad: Bad
) -> tuple[str, bytes]:
    """The MIME type and bytes of a base64 data URL, or OpenAI's refusal."""
    match = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    if match is None:
        got = "a value without the 'data:' prefix"
    elif not wanted(match[1]):
        got = f"unsupported MIME type '{match[1]}'"
    else:
        raw = _decoded(match[2])
        if raw:
            return match[1], raw
        got = "an invalid base64-encoded value" if raw is None else "empty base64-encoded bytes"
    raise bad(text.format(param=param, got=got), param, "invalid_value")


def _image(part: Mapping[str, Any], at: _At, model: str, bad: Bad) -> None:
    if _TEXT_ONLY.fullmatch(model):
        raise bad(ONLY_CERTAIN_MODELS.format(kind="image_url"), at.type_param, None)
    if _AUDIO.fullmatch(model):
        param = f"messages[{at.index}].content"
        raise bad("This model does not support image_url content.", param, "invalid_value")
    image = _field(part, "image_url", at.path, bad)
    url = _field(image, "url", f"{at.path}.image_url", bad)
    detail = image.get("detail")
    if detail is not None and detail not in _DETAILS:
        raise _invalid_value(detail, _DETAILS, f"{at.path}.image_url.detail", bad)
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return
    param = f"{at.path}.image_url.url"
    mime, raw = _data_url(url, param, IMAGE_URL_TEXT, lambda m: m.startswith("image/"), bad)
    fmt = mime.removeprefix("image/")
    signature = _SIGNATURES.get(fmt)
    webp = fmt == "webp" and raw[8:12] == b"WEBP"
    if not (webp or (signature is not None and raw.startswith(signature))):
        raise bad(UNSUPPORTED_IMAGE_TEXT, None, "sanitizer_server_error")


def _file(part: Mapping[str, Any], at: _At, model: str, bad: Bad) -> None:
    if _TEXT_ONLY.fullmatch(model) or _AUDIO.fullmatch(model):
        raise bad(ONLY_CERTAIN_MODELS.format(kind="file"), at.type_param, None)
    file = _field(part, "file", at.path, bad)
    if not (file.get("file_data") or file.get("file_id")):
        raise _missing(f"{at.path}.file.file_data", bad)
    if "file_data" not in file:
        return
    _field(file, "filename", f"{at.path}.file", bad)
    param = f"{at.path}.file.file_data"
    _, raw = _data_url(file["file_data"], param, FILE_DATA_TEXT, _PDF.__eq__, bad)
    if not raw.startswith(b"%PDF-"):
        raise bad(f"Invalid file data: '{param}'. The file is not a valid PDF.", param, None)


def _audio(part: Mapping[str, Any], at: _At, model: str, bad: Bad) -> None:
    if not _AUDIO.fullmatch(model):
        raise bad(ONLY_CERTAIN_MODELS.format(kind="input_audio"), at.type_param, None)
    audio = _field(part, "input_audio", at.path, bad)
    data = _field(audio, "data", f"{at.path}.input_audio", bad)
    fmt = _field(audio, "format", f"{at.path}.input_audio", bad)
    if fmt not in _AUDIO_FORMATS:
        raise _invalid_value(fmt, _AUDIO_FORMATS, f"{at.path}.input_audio.format", bad)
    if not (isinstance(data, str) and _decoded(data)):
        param = f"{at.path}.input_audio.data"
        raise bad(
            f"Invalid '{param}'. Expected base64-encoded audio data, but got an invalid "
            "base64-encoded value.",
            param,
            "invalid_value",
        )


_CHECKS: Mapping[str, Callable[[Mapping[str, Any], _At, str, Bad], None]] = {
    "text": _text,
    "refusal": _refusal,
    "image_url": _image,
    "file": _file,
    "input_audio": _audio,
}
