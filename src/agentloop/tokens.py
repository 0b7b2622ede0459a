"""Token counting: a pluggable estimate of how much of the window a request uses.

The window policy needs an estimate before every request, so counting must be cheap and must not
grow with the conversation. Messages are frozen: each message's count is computed once and cached
on the message (``Message.encoded``). The fixed part of a request (system prompt and tool schemas)
is measured once per ``(system, tools)`` and cached, and ``ContextMeter`` keeps a running total so
adding a message costs O(1).

Counters:

- ``HeuristicTokenCounter``: about 4 characters a token plus 4 framing tokens a message (default).
- ``RatioTokenCounter``: the same rule with per-provider presets (``for_provider``).
- ``TiktokenCounter``: exact BPE counts when ``tiktoken`` is installed (never required).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, ClassVar, Protocol, runtime_checkable

from agentloop._util.numbers import is_finite
from agentloop._wire_text import arguments_chars as arguments_chars  # re-exported
from agentloop._wire_text import arguments_json as arguments_json  # re-exported
from agentloop._wire_text import compact_json, message_text_pieces
from agentloop._wire_text import message_chars as message_chars  # re-exported
from agentloop.errors import ConfigurationError
from agentloop.media import AudioPart, DocumentPart, ImagePart, media_tokens
from agentloop.messages import (
    Message,
    ProviderPart,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolChangePart,
    ToolResultPart,
)
from agentloop.model import ToolSpec

__all__ = [
    "ContextMeter",
    "HeuristicTokenCounter",
    "RatioTokenCounter",
    "TiktokenCounter",
    "TokenCounter",
    "estimate_request",
    "request_overhead",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Estimates tokens for messages and plain text."""

    def count_message(self, message: Message) -> int:
        """Tokens one message costs, including its framing."""
        ...

    def count_text(self, text: str) -> int:
        """Tokens a plain string costs."""
        ...


MEDIA_PARTS = (ImagePart, DocumentPart, AudioPart)


MEDIA_PROVIDER: ContextVar[str | None] = ContextVar("agentloop_media_provider", default=None)
"""The provider whose formula counts media (``agentloop.media.media_tokens``); the engine sets it
to the run's client's provider at run start. None: the largest of the formulas."""


def media_cost(message: Message, provider: str | None = None) -> int:
    """The tokens of a message's media by ``provider``'s formula (0 without any)."""
    total = 0
    for part in message.parts:
        if isinstance(part, MEDIA_PARTS):
            total += media_tokens(part, provider)
        elif isinstance(part, ToolResultPart) and part.media:
            total += sum(media_tokens(m, provider) for m in part.media)
    return total


def counted_media(message: Message) -> int:
    """A message's media cost for the current ``MEDIA_PROVIDER``, cached per message.

    A message whose parts cannot hold media costs one look at their types; one with media is
    counted once per provider (a fallback to another provider counts it by that provider's
    formula).
    """
    for part in message.parts:
        kind = type(part)
        if kind not in _NO_MEDIA and (kind is not ToolResultPart or part.media):  # type: ignore[union-attr]
            break
    else:
        return 0
    if not message.encoded(":has_media", _has_media):
        return 0
    provider = MEDIA_PROVIDER.get()
    cost: int = message.encoded(f":media:{provider}", lambda m: media_cost(m, provider))
    return cost


_NO_MEDIA = frozenset(
    {TextPart, ThinkingPart, ToolCallPart, ToolChangePart, ProviderToolCallPart,
     ProviderToolResultPart, ProviderPart}
)  # fmt: skip
"""Part types that never hold media (exact types: a subclass takes the cached path)."""


def _has_media(message: Message) -> bool:
    for part in message.parts:  # a loop, not any() over a generator: two calls fewer a message
        if isinstance(part, MEDIA_PARTS) or (isinstance(part, ToolResultPart) and part.media):
            return True
    return False


_ceil = math.ceil


def _valid_ratio(chars_per_token: object) -> float:
    if isinstance(chars_per_token, bool) or not isinstance(chars_per_token, int | float):
        raise ConfigurationError(
            f"chars_per_token must be a number, got {chars_per_token!r}", field="chars_per_token"
        )
    if not is_finite(chars_per_token) or chars_per_token <= 0:
        warnings.warn(
            f"chars_per_token {chars_per_token!r} is not a positive finite number; using 4.0",
            RuntimeWarning,
            stacklevel=3,
        )
        return 4.0
    return float(chars_per_token)


class RatioTokenCounter:
    """``ceil(characters / chars_per_token)`` plus ``per_message`` framing tokens a message.

    A NaN, infinite or non-positive ratio warns (``RuntimeWarning``) and falls back to 4.0.
    Each message's count is cached on the message, so re-counting a history is cheap.

    Args:
        chars_per_token: Average characters per token.
        per_message: Framing tokens added for every message (role markers, separators).
    """

    PRESETS: ClassVar[Mapping[str, tuple[float, int]]] = {
        "openai": (4.30, 4),
        "anthropic": (3.60, 5),
        "gemini": (4.05, 4),
        "local": (3.80, 4),
    }
    """Calibrated ratios per provider family: ``(chars_per_token, per_message)``."""

    ALIASES: ClassVar[Mapping[str, str]] = {"openrouter": "openai", "ollama": "local"}
    """Providers that share a preset with another family."""

    __slots__ = ("__weakref__", "_key", "chars_per_token", "per_message")

    def __init__(self, chars_per_token: float, per_message: int = 4) -> None:
        if isinstance(per_message, bool) or not isinstance(per_message, int) or per_message < 0:
            raise ConfigurationError(
                f"per_message must be an int >= 0, got {per_message!r}", field="per_message"
            )
        self.chars_per_token = _valid_ratio(chars_per_token)
        self.per_message = per_message
        self._key = f"tokens:ratio:{self.chars_per_token!r}:{per_message}"

    @classmethod
    def for_provider(cls, provider: str) -> RatioTokenCounter:
        """The preset for ``openai``, ``anthropic``, ``gemini`` or ``local``.

        ``openrouter`` maps to ``openai`` and ``ollama`` to ``local``.

        Raises:
            ConfigurationError: The provider has no preset.
        """
        name = cls.ALIASES.get(provider, provider)
        try:
            ratio, per_message = cls.PRESETS[name]
        except KeyError:
            known = ", ".join(sorted([*cls.PRESETS, *cls.ALIASES]))
            raise ConfigurationError(
                f"no token-ratio preset for provider {provider!r}; known: {known}",
                field="provider",
            ) from None
        return cls(ratio, per_message)

    def count_text(self, text: str) -> int:
        """Ceiling of characters over the ratio."""
        return math.ceil(len(text) / self.chars_per_token)

    def count_message(self, message: Message) -> int:
        """Characters of every wire string over the ratio, plus framing; cached per message."""
        cache = message._wire  # Message.encoded's cache, read without its call (every message)
        count: int | None = cache.get(self._key)
        parts = message.parts
        if count is None:  # ``_count``, written out for this module's own counters
            own = type(self)
            if own is HeuristicTokenCounter or own is RatioTokenCounter:
                text = parts[0] if len(parts) == 1 else None  # one text: its length, no call
                chars = len(text.text) if type(text) is TextPart else message_chars(message)
                count = cache[self._key] = _ceil(chars / self.chars_per_token) + self.per_message
            else:
                count = cache[self._key] = self._count(message)
        if len(parts) == 1:  # the common message: one part; its media cost without a call
            kind = type(parts[0])
            if kind in _NO_MEDIA or (kind is ToolResultPart and not parts[0].media):  # type: ignore[union-attr]
                return count
        return count + counted_media(message)

    def _count(self, message: Message) -> int:
        return _ceil(message_chars(message) / self.chars_per_token) + self.per_message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.chars_per_token!r}, {self.per_message!r})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, RatioTokenCounter)
            and other.chars_per_token == self.chars_per_token
            and other.per_message == self.per_message
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.chars_per_token, self.per_message))


class HeuristicTokenCounter(RatioTokenCounter):
    """The default counter: about 4 characters a token plus 4 framing tokens a message."""

    __slots__ = ()

    def __init__(self, chars_per_token: float = 4.0, per_message: int = 4) -> None:
        super().__init__(chars_per_token, per_message)


class TiktokenCounter:
    """Exact BPE counts through ``tiktoken`` (optional; imported lazily at construction).

    Args:
        encoding: A tiktoken encoding name (``cl100k_base``, ``o200k_base``...).
        per_message: Framing tokens added for every message.

    Raises:
        ConfigurationError: ``tiktoken`` is not installed or the encoding is unknown.
    """

    __slots__ = ("__weakref__", "_encoding", "_key", "encoding_name", "per_message")
    _encoding: Any

    def __init__(self, encoding: str = "o200k_base", per_message: int = 4) -> None:
        try:
            tiktoken = importlib.import_module("tiktoken")
        except ImportError as exc:
            raise ConfigurationError(
                "TiktokenCounter needs the optional 'tiktoken' package", field="token_counter"
            ) from exc
        try:
            self._encoding = tiktoken.get_encoding(encoding)
        except (KeyError, ValueError) as exc:
            raise ConfigurationError(
                f"unknown tiktoken encoding {encoding!r}", field="encoding"
            ) from exc
        self.encoding_name = encoding
        self.per_message = per_message
        self._key = f"tokens:tiktoken:{encoding}:{per_message}"

    @staticmethod
    def available() -> bool:
        """True when ``tiktoken`` can be imported."""
        return importlib.util.find_spec("tiktoken") is not None

    def count_text(self, text: str) -> int:
        """BPE tokens of ``text`` (special-token text counts as ordinary text)."""
        return len(self._encoding.encode(text, disallowed_special=()))

    def count_message(self, message: Message) -> int:
        """BPE tokens of every wire string plus framing; cached per message."""
        count: int = message.encoded(self._key, self._count)
        return count + counted_media(message)

    def _count(self, message: Message) -> int:
        texts = sum(self.count_text(p) for p in message_text_pieces(message))
        return texts + self.per_message

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding_name!r}, {self.per_message!r})"


def _tool_schema_json(spec: ToolSpec) -> str:
    schema = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
    return compact_json(schema)


def _measure_overhead(system: str | None, tools: Sequence[ToolSpec], counter: TokenCounter) -> int:
    total = counter.count_message(Message.system(system)) if system else 0
    return total + sum(counter.count_text(_tool_schema_json(spec)) for spec in tools)


def _reference(counter: TokenCounter) -> Callable[[], object]:
    """A weak reference to ``counter``, or a strong one when it cannot be weakly referenced."""
    try:
        return weakref.ref(counter)
    except TypeError:  # a user's counter with __slots__ and no __weakref__
        return lambda: counter


class _OverheadCache:
    """A small LRU keyed by counter identity, system text and tool identities.

    An ``id`` names an object only while it lives: CPython gives a dead object's id to the next
    object of its size. Each entry holds its tools (specs are small and cannot be weakly
    referenced), so their ids stay theirs while it lives. The counter is held weakly, so the
    cache never keeps a counter (and the tokenizer it may own) alive, and a hit checks that the
    entry's counter *is* the one asked about: a new counter that inherits a dead one's id
    measures afresh. A counter that cannot be weakly referenced is held strongly, like a tool.
    """

    def __init__(self, size: int = 128) -> None:
        self._size = size
        self._entries: OrderedDict[
            tuple[Any, ...], tuple[Callable[[], object], tuple[ToolSpec, ...], int]
        ]
        self._entries = OrderedDict()
        self._lock = threading.Lock()
        self._last: tuple[Callable[[], object], str | None, tuple[ToolSpec, ...], int] | None
        self._last = None
        """The last answer: asked again with the same tuple of tools (an agent's offer, every
        run), it is the answer without a key, a lock or the LRU (held as an entry holds it)."""

    def get(self, system: str | None, tools: Sequence[ToolSpec], counter: TokenCounter) -> int:
        last = self._last
        if last is not None and last[2] is tools and last[1] == system and last[0]() is counter:
            return last[3]  # the same tuple (its tools cannot change), text and counter
        specs = tuple(tools)  # a tuple is itself: the next ask with it is the fast one
        key = (id(counter), system, tuple(id(s) for s in specs))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0]() is counter:
                self._entries.move_to_end(key)
                self._last = (entry[0], system, specs, entry[2])
                return entry[2]
        value = _measure_overhead(system, specs, counter)
        reference = _reference(counter)
        self._last = (reference, system, specs, value)
        with self._lock:
            self._entries[key] = (reference, specs, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value


_OVERHEAD = _OverheadCache()


def request_overhead(system: str | None, tools: Sequence[ToolSpec], counter: TokenCounter) -> int:
    """Tokens of the fixed part of a request: the system prompt and the tool schemas.

    Measured once per ``(counter, system, tools)`` and cached (tools by identity).
    """
    return _OVERHEAD.get(system, tools, counter)


def estimate_request(
    messages: Sequence[Message],
    *,
    system: str | None,
    tools: Sequence[ToolSpec],
    counter: TokenCounter,
) -> int:
    """Tokens a request costs: every message plus the system prompt plus the tool schemas.

    Message counts are cached per message by the built-in counters, so re-estimating a long
    history only sums integers; prefer ``ContextMeter`` for a running total.
    """
    total = sum(counter.count_message(m) for m in messages)
    return total + request_overhead(system, tools, counter)


class ContextMeter:
    """A running estimate of the next request's size; O(1) per added message.

    Call ``reset`` at run start (history plus the new input, system prompt, tools), ``add`` for
    every message appended afterwards, and ``replace`` when compaction swaps the history.
    ``total`` is what ``WindowPolicy.need`` takes.

    Args:
        counter: The counter every measurement uses.
    """

    __slots__ = ("_messages_tokens", "_overhead", "counter")

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._overhead = 0
        self._messages_tokens = 0

    def reset(
        self,
        messages: Iterable[Message],
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> None:
        """Measure a whole request afresh (O(n) once, cheap when messages are cached)."""
        self._overhead = request_overhead(system, tools, self.counter)
        self._messages_tokens = count_messages(self.counter, messages)

    def add(self, message: Message) -> int:
        """Count one appended message; returns its tokens."""
        tokens = self.counter.count_message(message)
        self._messages_tokens += tokens
        return tokens

    def extend(self, messages: Iterable[Message]) -> None:
        """Count several appended messages."""
        for message in messages:
            self.add(message)

    def add_counted(self, tokens: int) -> None:
        """Add messages counted before (a session's history, counted by its last run)."""
        self._messages_tokens += tokens

    def replace(self, messages: Iterable[Message]) -> None:
        """Re-measure the messages (after compaction); the overhead is kept."""
        self._messages_tokens = count_messages(self.counter, messages)

    @property
    def overhead(self) -> int:
        """Tokens of the system prompt and tool schemas."""
        return self._overhead

    @property
    def messages_tokens(self) -> int:
        """Tokens of the messages alone."""
        return self._messages_tokens

    @property
    def total(self) -> int:
        """The estimate of the next request: messages plus overhead."""
        return self._messages_tokens + self._overhead

    def __repr__(self) -> str:
        return f"ContextMeter(total={self.total}, overhead={self._overhead})"


def count_messages(counter: TokenCounter, messages: Iterable[Message]) -> int:
    """The tokens of ``messages`` by ``counter`` (``ContextMeter``'s and the engine's guard's).

    A loop, not ``sum`` over a generator: every run starts here.
    """
    count, total = counter.count_message, 0
    for message in messages:
        total += count(message)
    return total
