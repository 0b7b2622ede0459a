"""A remote A2A agent's answer as a tool's result: its text, and its files (SPEC 26 x 16).

An output artifact's parts are text, data (JSON) or files (``raw`` bytes or a ``url``, with a
``media_type``). Text and data become the result's text, as before; a file becomes the media
part SPEC 16 has for its type (``ImagePart``, ``DocumentPart``, ``AudioPart``: the result is then
its text and those parts, and the provider gets them in the tool result or right after it). A
file no part takes (another type, or bytes that are not what the type says) is a line naming it,
``[file <name or url> (<type>[, N bytes]) not shown]``: never dropped unseen, never the bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from agentloop.errors import InvalidInput
from agentloop.media import (
    AUDIO_TYPES,
    DOCUMENT_TYPES,
    IMAGE_TYPES,
    AudioPart,
    DocumentPart,
    ImagePart,
)

__all__ = ["answer", "text_of_part"]

_KINDS: tuple[tuple[tuple[str, ...], type[Any]], ...] = (
    (IMAGE_TYPES, ImagePart),
    (DOCUMENT_TYPES, DocumentPart),
    (AUDIO_TYPES, AudioPart),
)


def text_of_part(part: pb.Part) -> str:
    """A text or data part as text (data as JSON); '' for a file."""
    if part.WhichOneof("content") == "data":
        return json.dumps(json_format.MessageToDict(part.data), ensure_ascii=False)
    return part.text


def answer(parts: Sequence[pb.Part], sep: str = "\n") -> str | list[Any]:
    """The tool's result for ``parts``: their text, or the text and the files' media parts."""
    texts: list[str] = []
    media: list[Any] = []
    for part in parts:
        if part.WhichOneof("content") not in ("raw", "url"):
            texts.append(text_of_part(part))
            continue
        made = _media(part)
        if made is None:
            texts.append(_named(part))
        else:
            media.append(made)
    text = sep.join(t for t in texts if t) if media else sep.join(texts)
    return [text, *media] if media and text else media if media else text


def _media(part: pb.Part) -> Any | None:
    kind = part.media_type.split(";")[0].strip().lower()
    for types, made in _KINDS:
        if kind in types:
            try:
                if part.WhichOneof("content") == "raw":
                    return made(part.raw, media_type=kind)
                return made(url=part.url, media_type=kind)
            except InvalidInput:  # bytes that are not what the type says, a bad URL
                return None
    return None


def _named(part: pb.Part) -> str:
    kind = part.media_type or "unknown type"
    if part.WhichOneof("content") == "url":
        return f"[file {part.url} ({kind}) not shown]"
    name = part.filename or "without a name"
    return f"[file {name} ({kind}, {len(part.raw):,} bytes) not shown]"
