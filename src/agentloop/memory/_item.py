"""What every memory store shares: the item, the argument checks, the words of a query.

Every backend checks its arguments here, before touching its storage, so bad input is the
same ``InvalidInput`` (naming the argument) everywhere and nothing is written. A query is plain
words, never index syntax: ``words`` keeps the letters and digits of each word, lowercased, so
``"``, ``*``, ``OR`` and ``NEAR(`` can never reach FTS5 or ``tsquery`` as operators (each
backend then quotes every word as a literal term).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentloop.errors import InvalidInput

__all__ = [
    "MAX_K",
    "MAX_WORD",
    "WORD",
    "MemoryItem",
    "Namespace",
    "SearchFilter",
    "check_filter",
    "check_id",
    "check_k",
    "check_namespace",
    "all_words",
    "check_tags",
    "check_text",
    "utc",
    "words",
]

Namespace = tuple[str, ...]
"""A namespace: 1-8 non-empty strings of at most 256 characters, none holding ``/``."""

MAX_K = 100
MAX_WORD = 200
MAX_PARTS = 8
MAX_PART = 256
WORD = re.compile(r"[^\W_]+")
_FILTER_KEYS = frozenset({"tags", "updated_after"})


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One memory: its id (unique in its namespace), text, tags and UTC times.

    ``score`` is the backend's relevance for a ``search`` with words (higher is better); None
    for ``get`` and for a search without words.
    """

    id: str
    namespace: Namespace
    text: str
    tags: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """A checked ``filter``: tags an item must all hold, and a time it must be updated after."""

    tags: tuple[str, ...] = ()
    updated_after: datetime | None = None


def check_namespace(namespace: object, argument: str = "namespace") -> Namespace:
    """``namespace`` as a tuple of strings, or ``InvalidInput`` saying what a namespace is."""
    rule = (
        f"{argument} must be a tuple of 1-{MAX_PARTS} non-empty strings of at most {MAX_PART} "
        "characters without '/', e.g. ('user', '42')"
    )
    if not isinstance(namespace, tuple | list) or not 1 <= len(namespace) <= MAX_PARTS:
        raise InvalidInput(f"{rule}; got {namespace!r}")
    for part in namespace:
        if not isinstance(part, str) or not part or len(part) > MAX_PART or "/" in part:
            raise InvalidInput(f"{rule}; got {namespace!r}")
    return tuple(namespace)


def check_prefix(prefix: object) -> Namespace:
    """A ``namespaces(prefix=...)`` prefix: a namespace, or ``()`` for every namespace."""
    if isinstance(prefix, tuple | list) and not prefix:
        return ()
    return check_namespace(prefix, "prefix")


def check_text(text: object) -> str:
    """A memory's text: a string with something in it."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"text must be a non-empty string, got {text!r}")
    return text


def check_tags(tags: object) -> tuple[str, ...]:
    """Tags: a sequence of non-empty strings (a bare string is one mistake away from letters)."""
    if isinstance(tags, str) or not isinstance(tags, Sequence):
        raise InvalidInput(f"tags must be a list of strings, e.g. ['preference'], got {tags!r}")
    if not all(isinstance(t, str) and t for t in tags):
        raise InvalidInput(f"tags must be non-empty strings, got {tags!r}")
    return tuple(dict.fromkeys(tags))


def check_id(item_id: object) -> str:
    """An item id: a non-empty string."""
    if not isinstance(item_id, str) or not item_id:
        raise InvalidInput(f"id must be a non-empty string, got {item_id!r}")
    return item_id


def check_k(k: object) -> int:
    """How many items a search returns: an int in 1..100."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be an int from 1 to {MAX_K}, got {k!r}")
    return k


def check_query(query: object) -> str:
    """A query: plain words in a string (``""`` for the newest items)."""
    if not isinstance(query, str):
        raise InvalidInput(f"query must be a string of plain words, got {query!r}")
    return query


def check_filter(filter: object) -> SearchFilter:
    """A search filter: ``{"tags": [...]}`` and/or ``{"updated_after": datetime}``."""
    if filter is None:
        return SearchFilter()
    if not isinstance(filter, Mapping):
        raise InvalidInput(
            f"filter must be a dict with 'tags' and/or 'updated_after', got {filter!r}"
        )
    unknown = sorted(str(k) for k in filter if k not in _FILTER_KEYS)
    if unknown:
        raise InvalidInput(
            f"filter has unknown key(s) {', '.join(unknown)}; it takes 'tags' (items holding "
            "all of them) and 'updated_after' (a datetime)"
        )
    tags = check_tags(filter.get("tags", ()))
    after = filter.get("updated_after")
    if after is not None and not isinstance(after, datetime):
        raise InvalidInput(f"filter['updated_after'] must be a datetime, got {after!r}")
    return SearchFilter(tags, None if after is None else utc(after))


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is taken as UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def words(text: str) -> list[str]:
    """The distinct words of a text, lowercased, in order: letters and digits only.

    A word over ``MAX_WORD`` characters is no word (PostgreSQL refuses lexemes over 2 KiB;
    every backend drops them alike, so a query matches the same items everywhere).
    """
    return list(dict.fromkeys(all_words(text)))


def all_words(text: str) -> list[str]:
    """Every word of a text, lowercased, in order (repeats kept, for positions)."""
    return [w for w in (m.lower() for m in WORD.findall(text)) if len(w) <= MAX_WORD]


def timestamp(moment: datetime) -> float:
    """Seconds since the epoch of a UTC datetime (what SQLite stores)."""
    return utc(moment).timestamp()


def from_timestamp(seconds: float) -> datetime:
    """A stored epoch time as a UTC datetime."""
    return datetime.fromtimestamp(seconds, UTC)


def new_item(
    namespace: Namespace, item_id: str, text: str, tags: tuple[str, ...], now: datetime
) -> MemoryItem:
    """An item written now (``created_at`` = ``updated_at``)."""
    return MemoryItem(item_id, namespace, text, tags, now, now)


def as_json_tags(tags: tuple[str, ...]) -> list[Any]:
    """Tags as a JSON list."""
    return list(tags)
