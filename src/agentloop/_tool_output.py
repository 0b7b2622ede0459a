"""A tool's return value as what the model reads: its text and the media it returned.

``render_content`` serialises a value (JSON for dicts, lists, pydantic models and dataclasses,
never a ``repr`` dump); ``split_output`` separates the media parts (SPEC 16). Its own module,
beside ``agentloop.tools`` (which re-exports both), so the tool module stays within its size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pydantic_core
from pydantic import BaseModel

from agentloop.media import AudioPart, DocumentPart, ImagePart, MediaPart

__all__ = ["MEDIA_TYPES", "render_content", "split_output"]

MEDIA_TYPES = (ImagePart, DocumentPart, AudioPart)


def split_output(value: Any) -> tuple[str, tuple[MediaPart, ...]]:
    """A tool's return value as the text the model reads and the media it returned (SPEC 16).

    A media part, or a list holding at least one media part among text (each non-media item
    rendered as ``render_content`` renders it, joined by newlines), gives its media; anything
    else is text only (a list of plain values stays JSON, as before).
    """
    if type(value) is str:  # the common return value, at once
        return value, ()
    if isinstance(value, MEDIA_TYPES):
        return "", (value,)
    if isinstance(value, list | tuple) and any(isinstance(v, MEDIA_TYPES) for v in value):
        media = tuple(v for v in value if isinstance(v, MEDIA_TYPES))
        text = "\n".join(render_content(v) for v in value if not isinstance(v, MEDIA_TYPES))
        return text, media
    return render_content(value), ()


def render_content(value: Any) -> str:
    """Serialise a tool's return value into the text the model reads."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict | list | tuple | int | float | bool):
        try:
            return _RENDER(value)
        except (TypeError, ValueError):
            pass
    return pydantic_core.to_json(value, fallback=str).decode()


def _json_default(value: Any) -> Any:
    return pydantic_core.to_jsonable_python(value, fallback=str)


def _first_render(value: Any) -> str:
    """Builds ``_RENDER`` (and imports ``json``) on the first call, not at import."""
    global _RENDER
    import json

    _RENDER = json.JSONEncoder(ensure_ascii=False, default=_json_default).encode
    return _RENDER(value)


_RENDER: Callable[[Any], str] = _first_render
"""``json.dumps(value, ensure_ascii=False, default=_json_default)`` with one encoder."""
