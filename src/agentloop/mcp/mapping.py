"""An MCP server's tools as agentloop ``Tool`` objects: argument checks and result text.

Pure logic beside ``agentloop.mcp`` (which owns the connection): arguments are checked against
the JSON schema the server listed, before any request, so a bad argument is the usual soft
``Invalid arguments for tool 'x': <field>: <problem>; ...``; a ``CallToolResult`` becomes the
text the model reads (text, structured and resource content as text; images and audio as a
placeholder naming type and size); a result with ``isError`` is the server's own text, raised
as ``ToolError``. The schema itself is made safe in ``agentloop.mcp.arguments`` (no ``$ref`` is
ever fetched; patterns run with a time limit).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp.types as types

from agentloop.errors import InvalidInput, ToolError
from agentloop.mcp.arguments import argument_problems, schema_validator
from agentloop.media import AudioPart, DocumentPart, ImagePart, MediaPart
from agentloop.tools import Tool, ToolContext

__all__ = ["MCPTool", "argument_problems", "result_media", "result_text"]

CallTool = Callable[[str, Mapping[str, Any]], Awaitable[types.CallToolResult]]
"""How a tool reaches its server: ``(remote name, arguments) -> result``."""


class MCPTool(Tool):
    """One tool of an MCP server, named ``<prefix>_<name>`` when the server has a prefix."""

    def __init__(self, listed: types.Tool, *, prefix: str | None, call: CallTool) -> None:
        self.remote_name = listed.name
        self.name = f"{prefix}_{listed.name}" if prefix else listed.name
        self.description = listed.description or ""
        self.parameters = dict(listed.input_schema)
        self.timeout = None
        self._call = call
        self._validator = schema_validator(self.name, self.parameters)

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """Check the arguments against the server's schema; the text names each problem."""
        if self._validator is None:
            return arguments
        problems = argument_problems(self._validator, arguments)
        if problems:
            raise ToolError(f"Invalid arguments for tool '{self.name}': {problems}")
        return arguments

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Call the server; a result with ``isError`` is its own text, as a soft error.

        Images, audio and binary resources come back as media parts beside the text (SPEC 16).
        """
        result = await self._call(self.remote_name, arguments)
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"tool '{self.name}' failed (the server gave no text)")
        media = result_media(result)
        if not media:
            return text
        return [text, *media] if text else media


def result_text(result: types.CallToolResult) -> str:
    """The text the model reads for a tool result, one content block per line."""
    parts = [text for text in map(_block_text, result.content) if text]
    has_text = any(
        isinstance(block, types.TextContent)
        or (
            isinstance(block, types.EmbeddedResource)
            and isinstance(block.resource, types.TextResourceContents)
        )
        for block in result.content
    )
    if result.structured_content is not None and not has_text:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def result_media(result: types.CallToolResult) -> list[MediaPart]:
    """The media of a result: images, audio, and binary resources of a media type we carry.

    A block that does not decode, or whose bytes are not what it says, stays a text note (see
    ``result_text``): a server's bad bytes are never a reason to end a run.
    """
    media: list[MediaPart] = []
    for block in result.content:
        part = _media_of(block)
        if part is not None:
            media.append(part)
    return media


def _media_of(block: types.ContentBlock) -> MediaPart | None:
    if isinstance(block, types.ImageContent | types.AudioContent):
        data, mime = block.data, block.mime_type
    elif isinstance(block, types.EmbeddedResource) and isinstance(
        block.resource, types.BlobResourceContents
    ):
        data, mime = block.resource.blob, block.resource.mime_type or ""
    else:
        return None
    kind = (
        ImagePart
        if mime.startswith("image/")
        else AudioPart
        if mime.startswith("audio/")
        else DocumentPart
        if mime in ("application/pdf", "text/plain")
        else None
    )
    if kind is None:
        return None
    try:
        return kind(base64.b64decode(data, validate=False), mime)
    except (InvalidInput, ValueError):
        return None


def _block_text(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if _media_of(block) is not None:
        return ""  # it travels as a media part
    if isinstance(block, types.ImageContent):
        return f"[image: {block.mime_type}, {_decoded_size(block.data)} bytes, unreadable]"
    if isinstance(block, types.AudioContent):
        return f"[audio: {block.mime_type}, {_decoded_size(block.data)} bytes, unreadable]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        kind = resource.mime_type or "binary"
        return f"[resource {resource.uri}: {kind}, {_decoded_size(resource.blob)} bytes]"
    if isinstance(block, types.ResourceLink):
        about = f" ({block.description})" if block.description else ""
        return f"[resource link {block.uri}: {block.name}{about}]"
    return f"[{getattr(block, 'type', 'unknown')} content]"  # a content type added later


def _decoded_size(data: str) -> int:
    """Bytes in a base64 payload, without decoding it."""
    body = "".join(data.split())
    return len(body) * 3 // 4 - (len(body) - len(body.rstrip("=")))
