"""The transcript parts of provider-native tools (SPEC 24), re-exported by ``agentloop.messages``.

A provider that runs a tool itself (web search, code execution, web fetch, file search) reports
the call and its result inside the assistant message. They are kept as parts, in the order
received, each with ``raw``: the block or item exactly as it came (an Anthropic
``server_tool_use`` or ``web_search_tool_result`` with its ``encrypted_content``, a Responses
``web_search_call`` item, a Gemini ``executableCode`` part). The adapter that wrote a part sends
``raw`` back unchanged and in place on every later request (Anthropic rejects a turn that
altered them); another provider gets neither part.

``Citation`` is where a text part's words came from (a URL, a title, the cited text, where in
the text). ``raw`` keeps the provider's own citation object, which Anthropic wants back on its
text block. ``raw`` and a result's ``content`` take no part in ``hash`` (they are JSON values).

``ProviderPart`` is any other block only its provider reads (SPEC 28: Anthropic's server-side
``compaction`` block), kept in place and sent back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import field
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import InvalidInput

__all__ = [
    "NO_CALLS",
    "Citation",
    "ProviderPart",
    "ProviderToolCallPart",
    "ProviderToolResultPart",
    "citations_from",
    "counted_calls",
    "provider_part_from_dict",
    "tools_referenced",
]


class _NoCalls(Mapping[str, int]):
    """The empty ``Usage.provider_tool_calls``: one shared, immutable, hashable value.

    A default every ``Usage`` shares costs nothing to build (a ``default_factory`` dict would
    cost each of the engine's many ``Usage`` values a new dict).
    """

    __slots__ = ()

    def __getitem__(self, key: str) -> int:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and not other

    def __repr__(self) -> str:
        return "{}"


NO_CALLS: Mapping[str, int] = _NoCalls()
"""No provider tool calls (the default of ``Usage.provider_tool_calls``)."""


def _opt(data: Mapping[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise InvalidInput(f"part field {key!r} must be a {kind.__name__}, got {value!r:.60}")
    return value


@record
class Citation:
    """Where a piece of an answer's text came from.

    ``start``/``end`` are character offsets in the text part where the provider gives them
    (OpenAI annotations, Gemini grounding supports); ``raw`` is the provider's own object.
    """

    url: str
    title: str | None = None
    cited_text: str | None = None
    start: int | None = None
    end: int | None = None
    raw: Mapping[str, Any] | None = field(default=None, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (fields that are set)."""
        data: dict[str, Any] = {"url": self.url}
        for name in ("title", "cited_text", "start", "end"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.raw is not None:
            data["raw"] = dict(self.raw)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Citation:
        """Rebuild from ``to_dict`` output."""
        return cls(
            str(data.get("url", "")),
            _opt(data, "title", str),
            _opt(data, "cited_text", str),
            _opt(data, "start", int),
            _opt(data, "end", int),
            _opt(data, "raw", Mapping),
        )


def citations_from(items: object) -> tuple[Citation, ...]:
    """Citations from a stored list (``TextPart.to_dict``'s ``citations``)."""
    if not isinstance(items, list | tuple):
        raise InvalidInput(f"a text part's citations must be a list, got {items!r:.60}")
    return tuple(Citation.from_dict(c) for c in items if isinstance(c, Mapping))


@record
class ProviderToolCallPart:
    """A tool call the provider ran itself (``name``: ``web_search``, ``code_execution``...).

    ``raw`` is the block or item as received, sent back unchanged by the adapter of
    ``provider``; None where the wire has nothing to send back (Gemini's search queries).
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(hash=False)
    provider: str = field(kw_only=True)
    raw: Mapping[str, Any] | None = field(default=None, kw_only=True, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        data: dict[str, Any] = {
            "type": "provider_tool_call",
            "id": self.id,
            "name": self.name,
            "arguments": dict(self.arguments),
            "provider": self.provider,
        }
        if self.raw is not None:
            data["raw"] = dict(self.raw)
        return data


@record
class ProviderToolResultPart:
    """What a provider's own tool produced; ``is_error`` with ``error_code`` when it failed.

    A server tool's failure is soft (SPEC 24): the model reads it and the run goes on.
    ``content`` is a readable JSON value (results' URLs and titles, code output); ``raw`` the
    block as received, sent back unchanged.
    """

    call_id: str
    name: str
    content: Any = field(hash=False)
    provider: str = field(kw_only=True)
    raw: Mapping[str, Any] | None = field(default=None, kw_only=True, hash=False)
    is_error: bool = field(default=False, kw_only=True)
    error_code: str | None = field(default=None, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        data: dict[str, Any] = {
            "type": "provider_tool_result",
            "call_id": self.call_id,
            "name": self.name,
            "content": self.content,
            "provider": self.provider,
        }
        if self.raw is not None:
            data["raw"] = dict(self.raw)
        if self.is_error:
            data["is_error"] = True
        if self.error_code is not None:
            data["error_code"] = self.error_code
        return data


def provider_part_from_dict(
    data: Mapping[str, Any],
) -> ProviderToolCallPart | ProviderToolResultPart:
    """Rebuild a provider tool part from ``to_dict`` output."""
    provider = str(data.get("provider", ""))
    raw = _opt(data, "raw", Mapping)
    if data.get("type") == "provider_tool_call":
        arguments = _opt(data, "arguments", Mapping) or {}
        return ProviderToolCallPart(
            str(data["id"]), str(data["name"]), dict(arguments), provider=provider, raw=raw
        )
    return ProviderToolResultPart(
        str(data["call_id"]),
        str(data["name"]),
        data.get("content"),
        provider=provider,
        raw=raw,
        is_error=bool(data.get("is_error", False)),
        error_code=_opt(data, "error_code", str),
    )


def tools_referenced(part: ProviderToolResultPart) -> list[str]:
    """The tools a native tool search loaded (SPEC 22), by name.

    An Anthropic ``tool_search_tool_result`` block's ``tool_references``, a Responses
    ``tool_search_output`` item's loaded functions; none for any other part or a failed search.
    """
    raw = part.raw
    if part.is_error or raw is None:
        return []
    if raw.get("type") == "tool_search_output":
        refs, key = raw.get("tools"), "name"
    elif raw.get("type") == "tool_search_tool_result":
        content = raw.get("content")
        refs = content.get("tool_references") if isinstance(content, Mapping) else None
        key = "tool_name"
    else:
        return []
    return [
        str(ref[key])
        for ref in (refs if isinstance(refs, list) else ())
        if isinstance(ref, Mapping) and isinstance(ref.get(key), str)
    ]


def counted_calls(
    mine: Mapping[str, int], theirs: Mapping[str, int], sign: int
) -> Mapping[str, int]:
    """Two ``provider_tool_calls`` counts added (``sign`` 1) or subtracted (-1)."""
    if not theirs:
        return mine
    total = dict(mine)
    for kind, count in theirs.items():
        total[kind] = total.get(kind, 0) + sign * count
    return {k: v for k, v in total.items() if v}


@record
class ProviderPart:
    """A block only its provider reads, kept in place and sent back to it unchanged (SPEC 28).

    Anthropic's server-side ``compaction`` block is one: ``kind`` is the block's type and
    ``data`` the block as it came. Every other adapter leaves it out.
    """

    provider: str
    kind: str
    data: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return {"type": "provider", "provider": self.provider, "kind": self.kind,
                "data": dict(self.data)}  # fmt: skip
