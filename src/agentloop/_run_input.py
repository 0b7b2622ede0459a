"""A run's input: what ``run()`` takes (a ``str``, or text and media in order) and its one line.

Kept apart from ``messages`` (the records): the checks that refuse an input with the fix, and
``input_text``, the line stores, exports and traces show for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from agentloop.media import AudioPart, DocumentPart, ImagePart

__all__ = ["INPUT_HELP", "input_text", "refused_input"]

INPUT_HELP = (
    "run() input must be a str or a sequence of str and media parts (ImagePart, DocumentPart, "
    "AudioPart), got {got}; earlier messages go in history="
)
_NOT_A_SEQUENCE = (
    (str, ""),
    (bytes | bytearray | memoryview, " (media bytes go in a part: ImagePart(data), "
     "DocumentPart(data) or AudioPart(data), inside a list)"),
    (Mapping, " (a dict would run its keys: pass the text, or a list of text and parts)"),
    (frozenset | set, " (a set has no order: pass a list)"),
    (ImagePart | DocumentPart | AudioPart, " (put the part in a list: ['what is this?', part])"),
)  # fmt: skip


def refused_input(input: object) -> str | None:
    """Why ``input`` is not a ``str`` or a sequence of parts (None: it is one).

    A ``list`` or a ``tuple`` (any ``Sequence``) fits. Anything else is refused with the fix:
    bytes (which iterate as numbers), a dict (whose keys would be the prompt), a set (no
    order), a lone media part, and a one-shot iterator or generator, which the checks before a
    run would consume, leaving the run nothing to keep in ``run.input``.
    """
    for kind, fix in _NOT_A_SEQUENCE:
        if isinstance(input, kind):
            return None if kind is str else INPUT_HELP.format(got=type(input).__name__ + fix)
    if isinstance(input, Sequence):
        return None
    got = type(input).__name__
    if isinstance(input, Iterable):
        return INPUT_HELP.format(got=f"a one-shot {got}: pass list(...) of it")
    return INPUT_HELP.format(got=got)


def input_text(input: object) -> str:
    """A run's input as one line of text: media shown by ``describe()``, never their bytes."""
    if isinstance(input, str):
        return input
    if isinstance(input, tuple | list):
        return " ".join(i if isinstance(i, str) else _described(i) for i in input)
    return str(input)


def _described(item: object) -> str:
    describe = getattr(item, "describe", None)
    return str(describe()) if callable(describe) else repr(item)
