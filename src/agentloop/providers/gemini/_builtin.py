"""Gemini's built-in tools (SPEC 24, provider-rules "Gemini generateContent: built-in tools").

Declarations are siblings in ``tools``: ``{"google_search": {}}``, ``{"code_execution": {}}``,
``{"url_context": {}}``; Gemini has no field for any option (``max_uses``, domains, a location)
and no file search: ``ConfigurationError`` before sending. Beside function tools, Gemini 3 needs
``toolConfig.includeServerSideToolInvocations: true``; Gemini 2.x refuses the combination
(profile ``provider_tools_with_functions``).

Replies: an ``executableCode`` part is a ``ProviderToolCallPart`` and a ``codeExecutionResult``
part its ``ProviderToolResultPart`` (an outcome other than ``OUTCOME_OK`` is ``is_error`` with
the outcome as ``error_code``); Gemini 3's ``toolCall``/``toolResponse`` parts likewise. Each
keeps the part raw and goes back unchanged, in place. A search is reported in the candidate's
``groundingMetadata``: each ``webSearchQueries`` entry is a call (nothing to send back), the
metadata itself one result (``raw``: the metadata, ``searchEntryPoint`` included, which Google
requires an app to show), and each ``groundingSupports`` entry a ``Citation`` on the reply's
last text part (``start``/``end`` from its segment).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentloop.messages import Citation, Part, ProviderToolCallPart, ProviderToolResultPart
from agentloop.provider_tools import ProviderTool
from agentloop.providers._provider_tools import Wire

__all__ = [
    "WIRE",
    "PART_KEYS",
    "counts",
    "decode_part",
    "encode_part",
    "encode_tools",
    "grounded",
]

PROVIDER = "gemini"
WIRE = Wire(
    "gemini (generateContent)",
    {"web_search": frozenset(), "code_execution": frozenset(), "web_fetch": frozenset()},
)
_ENTRIES = {"web_search": "google_search", "code_execution": "code_execution",
            "web_fetch": "url_context"}  # fmt: skip
_CALLS = ("executableCode", "toolCall")
_RESULTS = ("codeExecutionResult", "toolResponse")
PART_KEYS = frozenset((*_CALLS, *_RESULTS))
"""A content part holding one of these is a built-in tool's."""


def encode_tools(tools: Sequence[ProviderTool]) -> list[dict[str, Any]]:
    """The ``tools`` entries of the declarations."""
    return [{_ENTRIES[tool.kind]: {}} for tool in tools]


def encode_part(part: ProviderToolCallPart | ProviderToolResultPart) -> dict[str, Any] | None:
    """Our own content part, unchanged; grounding and another provider's parts: None."""
    raw = part.raw
    if part.provider != PROVIDER or raw is None or not PART_KEYS.intersection(raw):
        return None
    return dict(raw)


def decode_part(part: Mapping[str, Any], parts: Sequence[Part]) -> Part:
    """A built-in tool's content part; a result answers the last call before it."""
    raw = dict(part)
    for key in _CALLS:
        if key in part:
            body = part[key] if isinstance(part[key], Mapping) else {}
            number = sum(isinstance(p, ProviderToolCallPart) for p in parts)
            call_id = str(body.get("id") or f"gemini-code-{number}")
            return ProviderToolCallPart(call_id, "code_execution", dict(body),
                                        provider=PROVIDER, raw=raw)  # fmt: skip
    key = next(k for k in _RESULTS if k in part)
    body = part[key] if isinstance(part[key], Mapping) else {}
    calls = [p for p in parts if isinstance(p, ProviderToolCallPart)]
    call_id = str(body.get("id") or (calls[-1].id if calls else "gemini-code-0"))
    outcome = body.get("outcome")
    failed = isinstance(outcome, str) and outcome != "OUTCOME_OK"
    return ProviderToolResultPart(
        call_id, "code_execution", dict(body), provider=PROVIDER, raw=raw,
        is_error=failed, error_code=outcome if failed else None,
    )  # fmt: skip


def _chunks(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = []
    for chunk in metadata.get("groundingChunks") or ():
        web = chunk.get("web") if isinstance(chunk, Mapping) else None
        if isinstance(web, Mapping):
            found.append({"url": str(web.get("uri", "")), "title": web.get("title")})
    return found


def _citations(metadata: Mapping[str, Any], chunks: list[dict[str, Any]]) -> list[Citation]:
    cited = []
    for support in metadata.get("groundingSupports") or ():
        if not isinstance(support, Mapping):
            continue
        found = support.get("segment")
        segment: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        for index in support.get("groundingChunkIndices") or ():
            if isinstance(index, int) and 0 <= index < len(chunks):
                chunk = chunks[index]
                cited.append(
                    Citation(
                        chunk["url"],
                        chunk["title"] if isinstance(chunk["title"], str) else None,
                        segment.get("text"),
                        segment.get("startIndex"),
                        segment.get("endIndex"),
                        raw=dict(support),
                    )
                )
    return cited


def grounded(parts: list[Part], metadata: Mapping[str, Any]) -> list[Part]:
    """``parts`` with a search's calls and result first and citations on the last text part."""
    from agentloop.messages import TextPart

    queries = [q for q in metadata.get("webSearchQueries") or () if isinstance(q, str)]
    if not queries:
        return parts
    chunks = _chunks(metadata)
    found: list[Part] = [
        ProviderToolCallPart(f"gemini-search-{i}", "web_search", {"query": q}, provider=PROVIDER)
        for i, q in enumerate(queries)
    ]
    found.append(ProviderToolResultPart(f"gemini-search-{len(queries) - 1}", "web_search",
                                        chunks, provider=PROVIDER, raw=dict(metadata)))  # fmt: skip
    cited = _citations(metadata, chunks)
    out = [*found, *parts]
    last = max((i for i, p in enumerate(out) if isinstance(p, TextPart)), default=None)
    if cited and last is not None:
        text = out[last]
        assert isinstance(text, TextPart)
        out[last] = TextPart(text.text, citations=(*text.citations, *cited))
    return out


def counts(parts: Sequence[Part]) -> dict[str, int]:
    """``Usage.provider_tool_calls``: one per search query and per code execution."""
    found: dict[str, int] = {}
    for part in parts:
        if isinstance(part, ProviderToolCallPart):
            found[part.name] = found.get(part.name, 0) + 1
    return found
