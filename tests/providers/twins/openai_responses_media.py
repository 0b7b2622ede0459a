"""The media rules of the Responses twin (OpenAI's spec: ``InputContent``, ``InputImageContent``,
``InputFileContent``, ``FunctionCallOutputItemParam``), in OpenAI's words.

``check_content`` runs on a message's ``content`` list and on a ``function_call_output``'s
``output`` list (``openai_responses``). What it enforces, with OpenAI's status (400) and text where
OpenAI's is known (quoted from replies recorded in public reports), else a plain one in OpenAI's
style (marked *ours*):

- each part is an object with a ``type``: a message part one of the content types OpenAI lists
  ("Invalid value: 'text'. Supported values are: 'input_text', 'input_image', 'input_audio',
  ..."); a user, system or developer message takes ``input_text``, ``input_image`` and
  ``input_file`` (``InputContent``); a ``function_call_output`` list the same three
  (*ours*: the spec's discriminator); ``input_audio`` has no schema in a Responses message
  (*ours*: "input_audio is not supported in the Responses API input content");
- a required field missing ("Missing required parameter: 'input[0].content[1].filename'.");
- ``input_image``: ``image_url`` or ``file_id``; ``detail`` one of low, high, auto, original;
  ``image_url`` an http(s) URL or a base64 data URL of an image ("Invalid
  'input[0].content[1].image_url'. Expected a base64-encoded data URL with an image MIME type
  (e.g. 'data:image/png;base64,aGVsbG8='), but got an invalid base64-encoded value." / "empty
  base64-encoded bytes" / "unsupported MIME type 'x'" / "a value without the 'data:' prefix"),
  at most 20,971,520 characters ("Invalid '...image_url': string too long. Expected a string
  with maximum length 20971520, but got a string with length N instead."), whose bytes are PNG,
  JPEG, GIF or WebP ("You uploaded an unsupported image. ...");
- ``input_file``: one of ``file_id``, ``file_data``, ``file_url``; ``file_data`` needs a
  ``filename`` (missing parameter) and is a data URL whose bytes are what its type says
  (*ours*: a PDF's start with ``%PDF-``);
- by model (the twin's own table, not the adapter's profiles): a model without vision
  (gpt-3.5, gpt-4, o1-mini, o1-preview, o3-mini) answers an image or a file with "Invalid
  content type. image_url is only supported by certain models." (*ours* for files).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "CONTENT_TYPES",
    "IMAGE_URL_TEXT",
    "ONLY_CERTAIN_MODELS",
    "UNSUPPORTED_IMAGE_TEXT",
    "check_content",
]

CONTENT_TYPES = (
    "input_text",
    "input_image",
    "input_audio",
    "output_text",
    "refusal",
    "input_file",
    "computer_screenshot",
    "summary_text",
    "encrypted_content",
)
"""The content types OpenAI's refusal of an unknown one lists (in its order)."""
IMAGE_URL_TEXT = (
    "Invalid '{param}'. Expected a base64-encoded data URL with an image MIME type "
    "(e.g. 'data:image/png;base64,aGVsbG8='), but got {got}."
)
UNSUPPORTED_IMAGE_TEXT = (
    "You uploaded an unsupported image. Please make sure your image is below 20 MB in size and "
    "is of one the following formats: ['png', 'jpeg', 'gif', 'webp']."
)
ONLY_CERTAIN_MODELS = "Invalid content type. {kind} is only supported by certain models."

_INPUT = ("input_text", "input_image", "input_file")
_TEXT_ONLY = re.compile(
    r"gpt-3\.5.*|gpt-4(-\d{4}.*|-32k.*|-turbo-preview)?|o1-mini.*|o1-preview.*|o3-mini.*"
)
_DATA_URL = re.compile(r"data:([^;,]*);base64,(.*)", re.DOTALL)
_DETAILS = ("low", "high", "auto", "original")
_IMAGE_URL_MAX = 20_971_520
_SIGNATURES = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff",
    "image/gif": b"GIF8",
    "application/pdf": b"%PDF-",
}

Bad = Callable[[str, str | None, str | None], Exception]
"""Makes OpenAI's 400 ``invalid_request_error`` from a message, a param and a code."""


def check_content(path: str, content: object, model: str, bad: Bad) -> None:
    """Raise ``bad(...)`` for the first media rule a content list at ``path`` breaks."""
    if not isinstance(content, list):
        return
    for number, part in enumerate(content):
        at = f"{path}[{number}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind is None:
            raise _missing(f"{at}.type", bad)
        if kind not in CONTENT_TYPES:
            raise _invalid_value(kind, CONTENT_TYPES, f"{at}.type", bad)
        if kind == "input_audio":
            message = "input_audio is not supported in the Responses API input content."
            raise bad(message, f"{at}.type", "invalid_value")
        if kind not in _INPUT:
            raise _invalid_value(kind, _INPUT, f"{at}.type", bad)
        _CHECKS[kind](part, at, model, bad)


def _invalid_value(value: object, allowed: tuple[str, ...], param: str, bad: Bad) -> Exception:
    listed = ", ".join(f"'{a}'" for a in allowed[:-1])
    text = f"Invalid value: '{value}'. Supported values are: {listed}, and '{allowed[-1]}'."
    return bad(text, param, "invalid_value")


def _missing(param: str, bad: Bad) -> Exception:
    return bad(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


def _text(part: Mapping[str, Any], at: str, model: str, bad: Bad) -> None:
    if not isinstance(part.get("text"), str):
        raise _missing(f"{at}.text", bad)


def _decoded(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _data_url(url: object, param: str, wanted: str, bad: Bad) -> tuple[str, bytes]:
    """The MIME type and bytes of a base64 data URL, or OpenAI's refusal."""
    match = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    if match is None:
        got = "a value without the 'data:' prefix"
    elif not match[1].startswith(wanted):
        got = f"unsupported MIME type '{match[1]}'"
    else:
        raw = _decoded(match[2])
        if raw:
            return match[1], raw
        got = "an invalid base64-encoded value" if raw is None else "empty base64-encoded bytes"
    if wanted == "image/":
        raise bad(IMAGE_URL_TEXT.format(param=param, got=got), param, "invalid_value")
    raise bad(f"Invalid '{param}'. Expected a base64-encoded data URL, but got {got}.", param,
              "invalid_value")  # fmt: skip


def _image(part: Mapping[str, Any], at: str, model: str, bad: Bad) -> None:
    if _TEXT_ONLY.fullmatch(model):
        raise bad(ONLY_CERTAIN_MODELS.format(kind="image_url"), f"{at}.type", None)
    detail = part.get("detail")
    if detail is not None and detail not in _DETAILS:
        raise _invalid_value(detail, _DETAILS, f"{at}.detail", bad)
    url = part.get("image_url")
    if url is None and part.get("file_id") is None:
        raise _missing(f"{at}.image_url", bad)
    if url is None or (isinstance(url, str) and url.startswith(("http://", "https://"))):
        return
    param = f"{at}.image_url"
    if isinstance(url, str) and len(url) > _IMAGE_URL_MAX:
        raise bad(
            f"Invalid '{param}': string too long. Expected a string with maximum length "
            f"{_IMAGE_URL_MAX}, but got a string with length {len(url)} instead.",
            param,
            "string_above_max_length",
        )
    mime, raw = _data_url(url, param, "image/", bad)
    webp = mime == "image/webp" and raw[8:12] == b"WEBP"
    if not (webp or raw.startswith(_SIGNATURES.get(mime, b"\x00\x00\x00\x00"))):
        raise bad(UNSUPPORTED_IMAGE_TEXT, None, "invalid_image_format")


def _file(part: Mapping[str, Any], at: str, model: str, bad: Bad) -> None:
    if _TEXT_ONLY.fullmatch(model):
        raise bad(ONLY_CERTAIN_MODELS.format(kind="input_file"), f"{at}.type", None)
    if not any(part.get(key) for key in ("file_id", "file_data", "file_url")):
        raise _missing(f"{at}.file_data", bad)
    if part.get("file_data") is None:
        return
    if not part.get("filename"):
        raise _missing(f"{at}.filename", bad)
    param = f"{at}.file_data"
    mime, raw = _data_url(part["file_data"], param, "", bad)
    signature = _SIGNATURES.get(mime)
    if signature is not None and not raw.startswith(signature):
        raise bad(f"Invalid '{param}': the file is not a valid {mime} file.", param, None)


_CHECKS: Mapping[str, Callable[[Mapping[str, Any], str, str, Bad], None]] = {
    "input_text": _text,
    "input_image": _image,
    "input_file": _file,
}
