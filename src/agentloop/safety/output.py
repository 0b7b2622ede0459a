"""Output limits: keep a tool result's head within a character budget.

A tool that dumps a megabyte into the transcript costs every later turn. ``limit_output`` keeps
the head and marks the cut *inside* the budget, so the result never exceeds ``max_chars``.
"""

from __future__ import annotations

import unicodedata

from agentloop.errors import InvalidInput

__all__ = ["TRUNCATION_MARKER", "cut_to_fit", "limit_output", "storable"]

TRUNCATION_MARKER = "\n[truncated]"

_JOINERS = frozenset("\u200c\u200d")
"""Zero-width (non-)joiners glue the characters around them into one visible symbol."""


def _joins_previous(char: str) -> bool:
    """Whether ``char`` belongs to the symbol before it (combining mark, selector, joiner)."""
    return (
        unicodedata.combining(char) != 0
        or "\ufe00" <= char <= "\ufe0f"
        or char in _JOINERS
        or unicodedata.category(char) == "Me"
    )


def _cut(text: str, end: int) -> str:
    """``text[:end]``, moved left so a combining sequence is never split."""
    start = end
    while end > 0 and _joins_previous(text[end]):
        end -= 1
    if end > 0 and text[end - 1] in _JOINERS:
        end -= 1
    return text[:end] if end or start == 0 else text[:start]


def cut_to_fit(text: str, max_chars: int) -> str:
    """The automatic cut of a result too large for the context window, saying how much was cut.

    Unlike ``limit_output`` (the explicit ``max_tool_output_chars``), the marker tells the model
    the size it did not see, so it can ask for less (a range, a filter).
    """
    if len(text) <= max_chars:
        return text
    marker = (
        f"\n[cut: {len(text) - max_chars:,} of {len(text):,} characters not shown; the result "
        "is larger than the context window allows]"
    )
    head = _cut(text, max(0, max_chars - len(marker)))
    return head + marker


def storable(text: str) -> str:
    r"""``text`` as valid UTF-8: lone surrogates (``os.listdir`` of a non-UTF-8 name) escaped.

    A surrogate cannot be encoded, sent or stored; it becomes its ``\udcxx`` escape, so
    nothing is lost and the model can still read which bytes were there.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def limit_output(text: str, max_chars: int) -> str:
    """Keep at most ``max_chars`` characters of ``text``, marking a cut with ``TRUNCATION_MARKER``.

    Args:
        text: the output.
        max_chars: the budget in characters (code points); ``0`` turns the limit off.

    Returns:
        ``text`` unchanged when it fits (or the limit is off); otherwise its head followed by
        the marker, ``len(result) <= max_chars``. When the budget leaves no room for the
        marker and at least one character of head, the head alone is returned. A combining
        sequence (base character plus marks) is never split.

    Raises:
        InvalidInput: ``max_chars`` is negative.
    """
    if max_chars < 0:
        raise InvalidInput(f"max_chars must be >= 0 (0 = no limit), got {max_chars}")
    if max_chars == 0 or len(text) <= max_chars:
        return text
    room = max_chars - len(TRUNCATION_MARKER)
    if room <= 0:
        return _cut(text, max_chars)
    return _cut(text, room) + TRUNCATION_MARKER
