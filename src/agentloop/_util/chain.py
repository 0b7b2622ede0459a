"""Snapshots of a list that grows at its end, sharing what they have in common.

A session's runs each keep the history as it was at their end (``Run.conversation``). A copy
per run makes a session of N runs hold N growing lists, O(N²) in all. A **link** instead holds
only what was added since the snapshot before it, and points at that one: N snapshots cost
what the list gained, O(N). A chain's first link is a plain tuple of the items (``taken``: the
copy ``list(values)`` was, in one allocation); each later one is ``(LINK, previous, length,
*added)``: ``LINK`` marks it, ``previous`` is the link it grows, ``length`` how many items the
whole chain holds, then the items added. Tuples never change, so a link reads the same
forever, whatever becomes of the list it was taken of; ``items`` makes its list again, in
O(length).

Whoever keeps the list says when it changed other than at its end (``back_to``): a link is
only ever grown from one whose items are still the list's first ones.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, TypeAlias

__all__ = [
    "EMPTY",
    "LINK",
    "Link",
    "back_to",
    "grown",
    "is_link",
    "items",
    "length",
    "taken",
]


class _Mark:
    """The type of ``LINK`` (its repr names it)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "LINK"


LINK: Any = _Mark()
"""The first item of a grown link (a chain's items are never it)."""

Link: TypeAlias = tuple[Any, ...]
"""A chain's first link, ``(*items)``, or a later one, ``(LINK, previous, length, *added)``."""

EMPTY: Link = ()
"""The link of an empty list."""

_HEAD = 3
"""Where a grown link's own items start."""


def is_link(value: object) -> bool:
    """Whether ``value`` reads as a link: any tuple (a tuple of items is a first link)."""
    return type(value) is tuple


def length(link: Link) -> int:
    """How many items the chain up to ``link`` holds."""
    return link[2] if link and link[0] is LINK else len(link)


def taken(values: list[Any]) -> Link:
    """A new chain's first link of ``values``: a copy of them."""
    return tuple(values)


def grown(link: Link, values: list[Any]) -> Link:
    """The link of ``values``, whose first ``length(link)`` items are still ``link``'s.

    ``link`` itself when nothing was added; else a link holding only the added items. A list
    found shorter than ``link``, or whose item at its end moved, makes a new chain instead
    (its caller broke the promise above: correct, if not cheap).
    """
    held = length(link)
    size = len(values)
    if size < held or (held and values[held - 1] is not link[-1]):
        return tuple(values)
    if size == held:
        return link
    return (LINK, link, size, *islice(values, held, None))


def back_to(link: Link | None, index: int) -> Link | None:
    """The latest link of ``link``'s chain that holds no item from ``index`` on (None: none).

    The list changed from ``index`` on: links up to there still describe it.
    """
    while link is not None and length(link) > index:
        link = link[1] if link[0] is LINK else None
    return link


def items(link: Link) -> list[Any]:
    """The list ``link`` was taken of, as it was then (a new list)."""
    chain: list[Link] = []
    while link and link[0] is LINK:
        chain.append(link)
        link = link[1]
    made = list(link)  # the chain's first link: its items alone
    for each in reversed(chain):
        made += islice(each, _HEAD, None)
    return made
