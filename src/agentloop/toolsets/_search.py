"""Local tool search: a BM25 index over deferred tools, and the ``search_tools`` tool's texts.

Pure Python and built once per set of deferred tools: a query looks up its terms' postings only,
so 10,000 tools answer in well under a millisecond or two (``bench/toolsets.py``). A document is a
tool's name (split on ``_ - .`` and case), its description and its parameters' names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from agentloop.model import ToolSpec

__all__ = [
    "SEARCH_TOOLS",
    "SearchIndex",
    "found_text",
    "index_of",
    "search_description",
    "tokens",
]

SEARCH_TOOLS = "search_tools"

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_K1 = 1.2
_B = 0.75


def tokens(text: str) -> list[str]:
    """Lowercase words of ``text``, split on punctuation, ``_ - .`` and case changes."""
    return [w.lower() for w in _WORDS.findall(text)]


def _document(spec: ToolSpec) -> list[str]:
    props = spec.parameters.get("properties")
    params = " ".join(props) if isinstance(props, dict) else ""
    name = tokens(spec.name)
    return name + name + tokens(spec.description) + tokens(params)  # a name counts twice


class SearchIndex:
    """BM25 over tool specs (the order of ``specs`` breaks ties)."""

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        self.specs = tuple(specs)
        self._postings: dict[str, list[tuple[int, int]]] = {}
        lengths: list[int] = []
        for index, spec in enumerate(self.specs):
            words = _document(spec)
            lengths.append(len(words))
            counts: dict[str, int] = {}
            for word in words:
                counts[word] = counts.get(word, 0) + 1
            for word, count in counts.items():
                self._postings.setdefault(word, []).append((index, count))
        self._norms = _norms(lengths)

    def search(self, query: str, limit: int = 5) -> list[ToolSpec]:
        """The best ``limit`` matches of ``query`` (none when no word of it matches)."""
        total = len(self.specs)
        scores: dict[int, float] = {}
        norms = self._norms
        for word in set(tokens(query)):
            postings = self._postings.get(word)
            if not postings:
                continue
            idf = math.log(1.0 + (total - len(postings) + 0.5) / (len(postings) + 0.5))
            for index, count in postings:
                gain = idf * count * (_K1 + 1) / (count + norms[index])
                scores[index] = scores.get(index, 0.0) + gain
        best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
        return [self.specs[index] for index, _ in best]


_CACHE: dict[tuple[object, ...], SearchIndex] = {}
_CACHE_SIZE = 4


def index_of(specs: Sequence[ToolSpec]) -> SearchIndex:
    """The index of ``specs``, shared by runs over the same tools (a few kept, newest last).

    Keyed by each tool's name, description and parameter names: a catalogue of 10,000 tools is
    indexed once per process, not once per run.
    """
    key = tuple((s.name, s.description, tuple(s.parameters.get("properties") or ())) for s in specs)
    found = _CACHE.pop(key, None)
    if found is None:
        found = SearchIndex(specs)
        if len(_CACHE) >= _CACHE_SIZE:
            del _CACHE[next(iter(_CACHE))]
    _CACHE[key] = found
    return found


def _norms(lengths: list[int]) -> list[float]:
    average = sum(lengths) / len(lengths) if lengths else 1.0
    return [_K1 * (1 - _B + _B * length / (average or 1.0)) for length in lengths]


def search_description(count: int, toolsets: Sequence[str]) -> str:
    """``search_tools``' description: the deferred count and toolsets, never a tool's name."""
    names = ", ".join(dict.fromkeys(toolsets))
    return (
        f"Search {count} more tools that are not sent until found (from: {names}). Describe what "
        "you need in a few words; the tools found become callable from your next step."
    )


def found_text(query: str, specs: Sequence[ToolSpec]) -> str:
    """What ``search_tools`` answers: the tools found and their first description lines."""
    if not specs:
        return f"no tool matches '{query}'"
    lines = [f"tools found: {len(specs)}; callable from your next step:"]
    for spec in specs:
        first = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
        lines.append(f"- {spec.name}: {first}")
    return "\n".join(lines)
