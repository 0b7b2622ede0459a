"""The Anthropic twin's media rules (provider-rules Anthropic 5), with the API's own texts.

``image`` and ``document`` blocks in a user message, or in a ``tool_result``'s ``content`` list
(text, image, search_result and document blocks only), each checked as the API checks it: the
source's discriminator (image: ``base64``/``url``; document: ``base64``/``text``/``content``/
``url``), required fields, no extra fields, the media types the spec lists (``Base64ImageSource``:
jpeg, png, gif, webp; ``Base64PDFSource``: ``application/pdf``; ``PlainTextSource``:
``text/plain``), base64 that decodes, bytes that are what the media type says, at most 5 MiB of
base64 per image, and no empty text block. A block type the API does not have (``audio``) and
media in an assistant message are refused. Field names and enums come from the Anthropic
OpenAPI spec (``shared/specs/anthropic-openapi.json``); the messages are the API's, as quoted in
public bug reports (anthropics/claude-code #2438, #5174, #12750, #15746, #19631;
anthropic-sdk-typescript #603; SEMOSS #2323 for the assistant-turn text, whose location prefix
follows the API's other messages).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any

MAX_IMAGE_BASE64 = 5 * 1024 * 1024
MAX_REQUEST_BYTES = 32 * 1024 * 1024
REQUEST_TOO_LARGE = "Request exceeds the maximum allowed number of bytes."

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
USER_TAGS = (
    "text", "image", "document", "search_result", "thinking", "redacted_thinking", "tool_use",
    "tool_result", "server_tool_use", "web_search_tool_result", "compaction",
    "tool_search_tool_result",
)  # fmt: skip
SYSTEM_TAGS = ("text", "tool_addition", "tool_removal")  # a mid-conversation system message
RESULT_TAGS = ("text", "image", "search_result", "document")
SOURCE_TAGS = {"image": ("base64", "url"), "document": ("base64", "text", "content", "url")}
SOURCE_FIELDS = {
    ("image", "base64"): ("type", "media_type", "data"),
    ("image", "url"): ("type", "url"),
    ("document", "base64"): ("type", "media_type", "data"),
    ("document", "text"): ("type", "media_type", "data"),
    ("document", "url"): ("type", "url"),
    ("document", "content"): ("type", "content"),
}
BLOCK_FIELDS = {
    "image": ("type", "source", "cache_control"),
    "document": ("type", "source", "cache_control", "citations", "context", "title"),
}

EMPTY_TEXT = "messages: text content blocks must be non-empty"
NOT_IN_ASSISTANT = "{loc}: '{kind}' blocks are not permitted within assistant turns"
REQUIRED = "{loc}: Field required"
EXTRA = "{loc}: Extra inputs are not permitted"
TAG = "{loc}: Input tag '{tag}' found using 'type' does not match any of the expected tags: {tags}"
IMAGE_TYPE = "{loc}: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
PDF_TYPE = "{loc}: Input should be 'application/pdf'"
TEXT_TYPE = "{loc}: Input should be 'text/plain'"
NOT_STRING = "{loc}: Input should be a valid string"
BAD_BASE64 = "{loc}: invalid base64 data"
EMPTY_IMAGE = "{loc}: image cannot be empty"
IMAGE_TOO_BIG = "{loc}: image exceeds 5 MB maximum: {n} bytes > 5242880 bytes"
WRONG_IMAGE = "{loc}: Image does not match the provided media type {media_type}"
BAD_PDF = "{loc}: The PDF specified was not valid."

_SIGNATURES = {
    "image/png": (b"\x89PNG\r\n\x1a\n", 0),
    "image/jpeg": (b"\xff\xd8\xff", 0),
    "image/gif": (b"GIF8", 0),
    "image/webp": (b"WEBP", 8),
}


def _tags(names: tuple[str, ...]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _decoded(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _image_data(loc: str, source: Mapping[str, Any]) -> str | None:
    media_type, data = source["media_type"], source["data"]
    if media_type not in IMAGE_TYPES:
        return IMAGE_TYPE.format(loc=f"{loc}.media_type")
    if not isinstance(data, str):
        return NOT_STRING.format(loc=f"{loc}.data")
    if not data:
        return EMPTY_IMAGE.format(loc=loc)
    raw = _decoded(data)
    if raw is None:
        return BAD_BASE64.format(loc=loc)
    if len(data) > MAX_IMAGE_BASE64:
        return IMAGE_TOO_BIG.format(loc=loc, n=len(data))
    magic, offset = _SIGNATURES[media_type]
    if raw[offset : offset + len(magic)] != magic:
        return WRONG_IMAGE.format(loc=f"{loc}.data", media_type=media_type)
    return None


def _document_data(loc: str, kind: str, source: Mapping[str, Any]) -> str | None:
    media_type, data = source["media_type"], source["data"]
    if kind == "text":
        if media_type != "text/plain":
            return TEXT_TYPE.format(loc=f"{loc}.media_type")
        return None if isinstance(data, str) else NOT_STRING.format(loc=f"{loc}.data")
    if media_type != "application/pdf":
        return PDF_TYPE.format(loc=f"{loc}.media_type")
    raw = _decoded(data) if isinstance(data, str) else None
    if raw is None:
        return BAD_BASE64.format(loc=loc)
    if not raw.startswith(b"%PDF-"):  # the API says "pdf" here, not "document"
        return BAD_PDF.format(loc=f"{loc.replace('.document.', '.pdf.')}.data")
    return None


def _fields(
    loc: str, value: Mapping[str, Any], allowed: tuple[str, ...], required: int
) -> str | None:
    """The first of ``allowed[:required]`` missing, or the first key not in ``allowed``."""
    for key in allowed[:required]:
        if key not in value:
            return REQUIRED.format(loc=f"{loc}.{key}")
    for key in value:
        if key not in allowed:
            return EXTRA.format(loc=f"{loc}.{key}")
    return None


def _source(loc: str, block: Mapping[str, Any]) -> str | None:
    """One image or document block: its fields, its source and the bytes in it."""
    kind = block["type"]
    found = _fields(loc, block, BLOCK_FIELDS[kind], 2)
    if found:
        return found
    source = block["source"]
    tag = source.get("type") if isinstance(source, Mapping) else None
    if tag not in SOURCE_TAGS[kind]:
        return TAG.format(loc=f"{loc}.source", tag=tag, tags=_tags(SOURCE_TAGS[kind]))
    loc = f"{loc}.source.{tag}"
    fields = SOURCE_FIELDS[(kind, tag)]
    found = _fields(loc, source, fields, len(fields))
    if found or tag in ("url", "content"):
        return found
    if kind == "image":
        return _image_data(loc, source)
    return _document_data(loc, tag, source)


def _result_content(loc: str, content: object) -> str | None:
    """A tool_result's content: a string, or text, image, search_result, document blocks."""
    if not isinstance(content, list):
        return None
    for k, item in enumerate(content):
        where = f"{loc}.content.{k}"
        tag = item.get("type") if isinstance(item, Mapping) else None
        if tag not in RESULT_TAGS:
            return TAG.format(loc=where, tag=tag, tags=_tags(RESULT_TAGS))
        assert isinstance(item, Mapping)
        if tag == "text" and not item.get("text"):
            return EMPTY_TEXT
        if tag in ("image", "document"):
            found = _source(f"{where}.{tag}", item)
            if found:
                return found
    return None


def _blocks(body: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, list):
            for j, block in enumerate(content):
                yield f"messages.{i}.content.{j}", str(message.get("role")), block


def media_violation(body: Mapping[str, Any]) -> str | None:
    """The API's message for the first media rule ``body`` breaks, or None."""
    for loc, role, block in _blocks(body):
        tag = block.get("type")
        tags = SYSTEM_TAGS if role == "system" else USER_TAGS
        if tag not in tags:
            return TAG.format(loc=loc, tag=tag, tags=_tags(tags))
        if tag == "text" and not block.get("text"):
            return EMPTY_TEXT
        if tag in ("image", "document"):
            if role == "assistant":
                return NOT_IN_ASSISTANT.format(loc=loc, kind=tag)
            found = _source(f"{loc}.{tag}", block)
        elif tag == "tool_result":
            found = _result_content(f"{loc}.tool_result", block.get("content"))
        else:
            continue
        if found:
            return found
    return None


def nested_breakpoints(body: Mapping[str, Any]) -> int:
    """``cache_control`` on blocks inside tool results (rule 6 counts them too)."""
    return sum(
        "cache_control" in item
        for _, _, block in _blocks(body)
        if block.get("type") == "tool_result" and isinstance(block.get("content"), list)
        for item in block["content"]
    )
