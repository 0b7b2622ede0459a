"""The text a message puts on the wire, and its length: what the token counters measure.

Every string a provider sends for a message (texts, names, ids, a tool call's arguments as
compact JSON, a tool change's specs, a provider tool's raw block), as pieces
(``message_text_pieces``, for a tokenizer) or as one count of characters (``message_chars``, for
the ratio counters in ``agentloop.tokens``, which re-exports these). Each new message of a run
is measured once, so the JSON is written by encoders built once, and a flat dict of strings is
measured without writing it (``arguments_chars``). ``json`` is imported by the first encoding,
never by ``import agentloop``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from agentloop._tool_parts import spec_key
from agentloop._util.jsontext import encoder, unchecked
from agentloop.messages import (
    Message,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
    ToolCallPart,
    ToolChangePart,
    ToolResultPart,
)

__all__ = [
    "arguments_chars",
    "arguments_json",
    "compact_json",
    "message_chars",
    "message_text_pieces",
    "part_chars",
]


def _first_compact(value: Any) -> str:
    """Builds the encoders (and imports ``json``) on the first call, not at import."""
    global _COMPACT, _QUOTE, _UNCHECKED
    _COMPACT = encoder(ensure_ascii=False, separators=(",", ":"), default=str)
    _UNCHECKED = unchecked(ensure_ascii=False, sort_keys=False, default=str)
    from json import encoder as stdlib

    _QUOTE = stdlib.encode_basestring
    return _COMPACT(value)


_COMPACT: Callable[[Any], str] = _first_compact
"""``json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)``, one encoder
built once and called without ``json.dumps``' set-up (``_util.jsontext``)."""
_UNCHECKED: Callable[[Any, int], Sequence[str]] | None = None
"""``_COMPACT``'s C encoder made once, without the circular-reference check (no ``markers``):
the same text, without the encoder object ``_COMPACT`` makes per call (about half its cost). A
circular value recurses until ``RecursionError``, and then ``_COMPACT`` says what it is."""


_QUOTE: Callable[[str], str] | None = None
"""How ``_COMPACT`` writes a string (``json.encoder.encode_basestring``), once it is built."""


def arguments_chars(arguments: Mapping[str, Any]) -> int:
    """``len(arguments_json(arguments))``; a flat dict of strings is measured, not written.

    Its text is ``{``, each ``"key":"value"`` (each string as the encoder writes it) with commas
    between them, and ``}``: two brackets, a colon a pair and a comma between pairs, and the
    strings as written. Any other value takes the encoder.
    """
    quote = _QUOTE
    if type(arguments) is dict and quote is not None:
        chars = 2 * len(arguments) + 1 if arguments else 2
        for key, value in arguments.items():
            if type(key) is not str or type(value) is not str:
                break
            chars += len(quote(key)) + len(quote(value))
        else:
            return chars
    return len(arguments_json(arguments))


def arguments_json(arguments: Mapping[str, Any]) -> str:
    """The JSON a provider sends for tool-call arguments (compact, non-ASCII kept)."""
    value = arguments if type(arguments) is dict else dict(arguments)
    if _UNCHECKED is not None:
        try:
            return "".join(_UNCHECKED(value, 0))
        except RecursionError:
            pass  # circular (or deeper than the stack): the checking encoder decides
    return _COMPACT(value)


def message_text_pieces(message: Message) -> Iterable[str]:
    """Every string of a message that travels on the wire (texts, names, ids, argument JSON)."""
    for part in message.parts:
        if isinstance(part, TextPart):
            yield part.text
        elif isinstance(part, ToolCallPart):
            yield part.id
            yield part.name
            yield arguments_json(part.arguments)
        elif isinstance(part, ToolResultPart):
            yield part.call_id
            yield part.name
            yield part.content
        elif isinstance(part, ToolChangePart):  # an append-only conversation's tools (SPEC 28)
            yield from map(spec_key, part.added)
            yield from part.removed
        elif isinstance(part, ProviderToolCallPart | ProviderToolResultPart):
            yield _provider_json(part)


def _provider_json(part: ProviderToolCallPart | ProviderToolResultPart) -> str:
    """What a provider tool part sends back (its raw block; SPEC 24), as JSON text."""
    if part.raw is not None:
        return _COMPACT(dict(part.raw))
    return _COMPACT({"content": part.content} if isinstance(part, ProviderToolResultPart) else {})


def part_chars(part: Any) -> int:
    """The characters of one part's ``message_text_pieces`` (0 for a part with none)."""
    if isinstance(part, TextPart):
        return len(part.text)
    if isinstance(part, ToolCallPart):
        return len(part.id) + len(part.name) + arguments_chars(part.arguments)
    if isinstance(part, ToolResultPart):
        return len(part.call_id) + len(part.name) + len(part.content)
    if isinstance(part, ToolChangePart):  # an append-only conversation's tools (SPEC 28)
        return sum(len(spec_key(s)) for s in part.added) + sum(map(len, part.removed))
    if isinstance(part, ProviderToolCallPart | ProviderToolResultPart):
        return len(_provider_json(part))
    return 0


def message_chars(message: Message) -> int:
    """The characters of ``message_text_pieces``: its parts' ``part_chars`` (no generator)."""
    chars = 0
    for part in message.parts:
        chars += part_chars(part)
    return chars


def compact_json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)``."""
    return _COMPACT(value)
