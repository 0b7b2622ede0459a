"""JSON text by the standard library's C encoder, without ``json.dumps``' set-up on every call.

``json.dumps(value)`` runs three Python functions (``dumps``, ``encode``, ``iterencode``, which
defines a closure) before the C encoder starts, and with options it builds a new
``JSONEncoder`` first: for a message of a turn that is most of its cost (about 33,000
instructions for an assistant message with a tool call; 26,000 this way, and 8,700 instead of
21,700 for a tool call's arguments with ``ensure_ascii=False``). The provider adapters and the
token counters encode every new message, so ``encoder`` makes one function per set of options
that calls the C encoder directly, with what ``json.dumps`` would pass it: the same text byte
for byte, and the same exceptions (a circular reference, a value that is not JSON, too deep).
``json`` is imported by the first ``encoder`` call, never by ``import agentloop``.

The C encoder still costs about 12,000 instructions for the smallest object (it builds an
encoder and a markers dict, and checks each key and value by type), where the text of a flat
object written from its escaped strings costs about 2,000: ``flat_object`` writes a tool call's
arguments (a dict of strings and numbers, nearly always) that way, and says None for any other
value, which the caller then encodes as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["encoder", "flat_object", "unchecked"]


def encoder(
    *,
    ensure_ascii: bool = True,
    separators: tuple[str, str] = (", ", ": "),
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """``lambda value: json.dumps(value, <these options>)``, the same text, made faster.

    On an interpreter without the C accelerator it is a ``JSONEncoder``'s ``encode``, made once.
    """
    import json
    from json import encoder as stdlib

    plain = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators, default=default)
    make = getattr(stdlib, "c_make_encoder", None)  # _json's make_encoder (None: no _json)
    if make is None:  # pragma: no cover - CPython always has _json
        return plain.encode
    quote = stdlib.encode_basestring_ascii if ensure_ascii else stdlib.encode_basestring
    fallback, key_sep, item_sep = plain.default, plain.key_separator, plain.item_separator
    join = "".join

    def encode(value: Any) -> str:
        # a new markers dict each call: the circular-reference check json.dumps makes
        chunks = make({}, fallback, quote, None, key_sep, item_sep, False, False, True)(value, 0)
        return join(chunks)

    return encode


def unchecked(
    *, ensure_ascii: bool, sort_keys: bool, default: Callable[[Any], Any]
) -> Callable[[Any, int], Sequence[str]] | None:
    """The C encoder with compact separators, made once and without the circular-reference check.

    ``"".join(it(value, 0))`` is the text ``json.dumps`` writes with these options, without the
    encoder and markers dict ``encode()`` builds per call (about half its cost). A circular
    value recurses until ``RecursionError``: the caller then asks a checking encoder. None
    without the C accelerator.
    """
    from json import encoder as stdlib

    make = getattr(stdlib, "c_make_encoder", None)  # _json's make_encoder (None: no _json)
    if make is None:  # pragma: no cover - CPython always has _json
        return None
    quote = stdlib.encode_basestring_ascii if ensure_ascii else stdlib.encode_basestring
    made: Callable[[Any, int], Sequence[str]] = make(
        None, default, quote, None, ":", ",", sort_keys, False, True
    )
    return made


def flat_object(value: dict[str, Any], quote: Callable[[str], str]) -> str | None:
    """``json.dumps(value)``'s text for a dict of scalars, or None for any other dict.

    Keys must be ``str``; values ``str``, ``int``, ``bool`` or None (exact types: a subclass, a
    float or a container is None, left to the encoder). ``quote`` is the string encoder the
    ``json.dumps`` call would use (``json.encoder.encode_basestring_ascii`` for the default
    ``ensure_ascii=True``, ``encode_basestring`` for False); the separators are the defaults.
    """
    items = []
    for key, item in value.items():
        kind = type(item)
        if kind is str:
            text = quote(item)
        elif kind is int:
            text = int.__repr__(item)  # what the encoder writes (a too long int raises alike)
        elif item is None:
            text = "null"
        elif kind is bool:
            text = "true" if item else "false"
        else:
            return None
        if type(key) is not str:
            return None
        items.append(f"{quote(key)}: {text}")
    return "{" + ", ".join(items) + "}"
