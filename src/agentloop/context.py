"""Window policy and compactors: keep every request inside the model's context window.

``WindowPolicy`` decides *when* to compact (a pure function of the estimate); a ``Compactor``
decides *how*. The engine measures, runs the pass and applies the no-progress guard.

The lines, for ``window`` W and ``threshold`` T (exact integer arithmetic, no float off-by-one):

- emergency: ``estimate >= 95 % of W`` (inclusive), even with ``auto_compact=False``;
- threshold: ``auto_compact`` and ``estimate > W * T`` (strict);
- target: 70 % of the threshold line (200,000 x 0.8 x 0.7 = 112,000);
- ``W == 0`` disables all of it.

Both compactors keep the first message and the most recent ones, never separate a tool call from
its results, never return an empty transcript and never return more messages than they got.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import field
from fractions import Fraction
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError, ResponseInvalid
from agentloop.messages import (
    AudioPart,
    DocumentPart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ToolResultPart,
)
from agentloop.model import ModelClient, ModelRequest, ModelSettings
from agentloop.tokens import (
    ContextMeter,
    HeuristicTokenCounter,
    RatioTokenCounter,
    TiktokenCounter,
    TokenCounter,
    arguments_json,
    estimate_request,
    request_overhead,
)

__all__ = [
    "EMERGENCY_FRACTION",
    "SUMMARY_INSTRUCTIONS",
    "SUMMARY_PREFIX",
    "TARGET_FRACTION",
    "CompactionReason",
    "Compactor",
    "ContextMeter",
    "HeuristicTokenCounter",
    "RatioTokenCounter",
    "SummarizingCompactor",
    "TiktokenCounter",
    "TokenCounter",
    "TruncatingCompactor",
    "WindowPolicy",
    "estimate_request",
    "request_overhead",
    "without_old_media",
]

CompactionReason: TypeAlias = Literal["emergency", "threshold"]

EMERGENCY_FRACTION = Fraction(95, 100)
"""Compact at or above this share of the window, whatever ``auto_compact`` says."""

TARGET_FRACTION = Fraction(70, 100)
"""A compaction aims at this share of the threshold line."""

SUMMARY_PREFIX = "Summary of earlier conversation: "
"""How the summary message of ``SummarizingCompactor`` begins."""


def _exact(value: float) -> Fraction:
    """The decimal the user wrote (``0.7`` is 7/10, not the binary float just below it)."""
    return Fraction(repr(float(value)))


@functools.lru_cache(maxsize=64)
def _lines(window: int, threshold: float) -> tuple[int, int, int]:
    """(threshold, emergency, target) tokens: exact, and cached (every run builds a policy)."""
    line = window * _exact(threshold)
    base = line if threshold > 0 else Fraction(window)
    return (
        math.floor(line),
        math.ceil(window * EMERGENCY_FRACTION),
        math.floor(base * TARGET_FRACTION),
    )


@record
class WindowPolicy:
    """When to compact: a pure function of the request estimate.

    Attributes:
        window: The model's context window in tokens; ``0`` disables the whole policy.
        threshold: Compact above this share of the window when ``auto_compact``; ``0`` disables
            the threshold line (the emergency line still applies).
        auto_compact: Compact at the threshold line; the emergency line ignores this flag.

    Raises:
        ConfigurationError: ``window`` is negative or ``threshold`` is outside ``[0, 1]``.
    """

    window: int = 200_000
    threshold: float = 0.8
    auto_compact: bool = True
    _threshold_tokens: int = field(init=False, repr=False, compare=False)
    _emergency_tokens: int = field(init=False, repr=False, compare=False)
    _target: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        window, threshold = self.window, self.threshold
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise ConfigurationError(f"window must be an int >= 0, got {window!r}", field="window")
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise ConfigurationError(
                f"threshold must be a number, got {threshold!r}", field="threshold"
            )
        if not 0.0 <= threshold <= 1.0:
            raise ConfigurationError(
                f"threshold must be in [0, 1], got {threshold!r}", field="threshold"
            )
        threshold_tokens, emergency_tokens, target = _lines(window, threshold)
        object.__setattr__(self, "_threshold_tokens", threshold_tokens)
        object.__setattr__(self, "_emergency_tokens", emergency_tokens)
        object.__setattr__(self, "_target", target)

    @property
    def enabled(self) -> bool:
        """False when ``window`` is 0."""
        return self.window > 0

    @property
    def threshold_tokens(self) -> int:
        """The threshold line: compaction starts at one token above it."""
        return self._threshold_tokens

    @property
    def emergency_tokens(self) -> int:
        """The emergency line: compaction is forced at this estimate and above."""
        return self._emergency_tokens

    @property
    def target(self) -> int:
        """Where a pass aims: 70 % of the threshold line (of the window when it is disabled)."""
        return self._target

    def need(self, estimate: int) -> CompactionReason | None:
        """Whether the next request needs a compaction pass first, and why.

        Returns:
            ``"emergency"`` at or above 95 % of the window; ``"threshold"`` above the threshold
            line with ``auto_compact``; None otherwise, and always None when the window is 0.
        """
        if not self.enabled:
            return None
        if estimate >= self._emergency_tokens:
            return "emergency"
        if self.auto_compact and self.threshold > 0 and estimate > self._threshold_tokens:
            return "threshold"
        return None

    def fits(self, estimate: int) -> bool:
        """True when a request of ``estimate`` tokens may be sent (always, with window 0)."""
        return not self.enabled or estimate <= self.window


@runtime_checkable
class Compactor(Protocol):
    """Shrinks a transcript towards ``target_tokens``; must keep tool calls with their results."""

    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        """Return the compacted transcript (never empty)."""
        ...


@record
class _Cut:
    head: list[Message]
    dropped: list[Message]
    tail: list[Message]


def _head_end(messages: Sequence[Message], budget: int, counter: TokenCounter | None) -> int:
    """The end of the kept head: the first message, or the longest prefix within ``budget``.

    An append-only conversation's base (SPEC 28) keeps the message after it (the first input).

    The head never ends between a call and its results. Compaction only ever drops messages
    after the head, so the next pass finds the same head (or a longer one): the request prefix
    the provider cached survives the pass.
    """
    end = 2 if messages[0].role == "system" and len(messages) > 1 else 1  # a base: its input too
    used = 0
    if counter is not None:
        used = sum(counter.count_message(m) for m in messages[:end])
        while end < len(messages) and used + counter.count_message(messages[end]) <= budget:
            used += counter.count_message(messages[end])
            end += 1
        if end < len(messages) and messages[end].role == "tool" and end > 1:
            end -= 1  # the last head message's results did not fit: it goes too
    if end == 1 and messages[0].tool_calls and len(messages) > 1 and messages[1].role == "tool":
        end = 2  # the first message's results stay attached to it
    return end


def _plan_cut(
    messages: Sequence[Message],
    preserve_recent: int,
    min_messages: int,
    head_budget: int = 0,
    counter: TokenCounter | None = None,
) -> _Cut | None:
    """Where to cut: keep the head and a pair-safe tail; None when nothing can be dropped."""
    n = len(messages)
    if n <= min_messages:
        return None
    head_end = _head_end(messages, head_budget, counter if head_budget > 0 else None)
    split = n - preserve_recent
    while split > head_end and messages[split].role == "tool":
        split -= 1  # never start the tail with results whose calls would be dropped
    if split <= head_end:
        return None
    return _Cut(list(messages[:head_end]), list(messages[head_end:split]), list(messages[split:]))


def _drop_orphans(messages: Sequence[Message]) -> list[Message]:
    """Drop results that do not answer a call of the message just before (per occurrence)."""
    out: list[Message] = []
    for message in messages:
        if message.role != "tool":
            out.append(message)
            continue
        previous = out[-1] if out and out[-1].role == "assistant" else None
        waiting = Counter(c.id for c in previous.tool_calls) if previous else Counter[str]()
        kept: list[ToolResultPart] = []
        for part in message.parts:
            if isinstance(part, ToolResultPart) and waiting[part.call_id] > 0:
                waiting[part.call_id] -= 1
                kept.append(part)
        if len(kept) == len(message.parts):
            out.append(message)
        elif kept:
            out.append(Message.tool_results(kept))
    return out


def without_old_media(messages: Sequence[Message], keep_recent: int = 2) -> list[Message] | None:
    """The transcript with old media replaced by a note naming each; None when there is none.

    The media of all but the last ``keep_recent`` messages become their ``describe()`` text.
    Compaction's first step (SPEC 16: old media go before old text): an image costs up to
    1,600 tokens, a PDF 2,000 a page, while the words around them are what the model needs next.
    """
    cut = max(0, len(messages) - keep_recent)
    out: list[Message] = []
    changed = False
    for index, message in enumerate(messages):
        if index < cut and (light := _media_dropped(message)) is not message:
            out.append(light)
            changed = True
        else:
            out.append(message)
    return out if changed else None


def _media_dropped(message: Message) -> Message:
    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, ImagePart | DocumentPart | AudioPart):
            parts.append(TextPart(f"{part.describe()} (removed to fit the context)"))
        elif isinstance(part, ToolResultPart) and part.media:
            notes = " ".join(m.describe() for m in part.media)
            content = f"{part.content}\n{notes} (removed to fit the context)".lstrip()
            parts.append(ToolResultPart(part.call_id, part.name, content, part.is_error))
        else:
            parts.append(part)
    if all(a is b for a, b in zip(parts, message.parts, strict=True)):
        return message
    return Message(message.role, tuple(parts))


def _validate_sizes(owner: str, preserve_recent: int, min_messages: int) -> None:
    if preserve_recent < 1:
        raise ConfigurationError(f"{owner}.preserve_recent must be >= 1", field="preserve_recent")
    if min_messages < 2:
        raise ConfigurationError(f"{owner}.min_messages must be >= 2", field="min_messages")


@record
class TruncatingCompactor:
    """Keep the first message and the most recent ``preserve_recent``; drop the middle.

    Positional: it ignores ``target_tokens`` (the engine checks whether the result fits). The
    tail never starts with results whose calls were dropped; results of a tool call in the first
    message stay with it; results that answer no call are dropped; a conversation of at most
    ``min_messages`` messages comes back unchanged.

    ``head_share`` (0 by default) keeps a stable head for the prompt cache: the longest prefix
    of the transcript within ``head_share * target_tokens`` stays, byte for byte, pass after
    pass, so the provider's cached prefix survives compaction (docs/cost.md measures it:
    ``head_share=0.7, preserve_recent=2`` keeps 90 % of an 8k-window run cacheable).
    """

    preserve_recent: int = 4
    min_messages: int = 6
    head_share: float = 0.0

    def __post_init__(self) -> None:
        _validate_sizes("TruncatingCompactor", self.preserve_recent, self.min_messages)
        if not 0.0 <= self.head_share < 1.0:
            raise ConfigurationError(
                f"TruncatingCompactor.head_share must be in [0, 1), got {self.head_share!r}",
                field="head_share",
            )

    def truncate(
        self,
        messages: Sequence[Message],
        target_tokens: int = 0,
        counter: TokenCounter | None = None,
    ) -> list[Message]:
        """The pure, synchronous pass ``compact`` runs (the head needs the target and counter)."""
        budget = math.floor(target_tokens * self.head_share)
        cut = _plan_cut(messages, self.preserve_recent, self.min_messages, budget, counter)
        if cut is None:
            return list(messages)
        return _drop_orphans(cut.head + cut.tail) or list(messages)

    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        """Pair-safe truncation of the middle of the transcript."""
        return self.truncate(messages, target_tokens, counter)


SUMMARY_INSTRUCTIONS = (
    "You compress the middle of a conversation between a user and an AI agent that uses tools. "
    "Write a concise summary that keeps every fact, decision, file name, identifier, number and "
    "open question the agent needs to continue; drop chit-chat and repeated tool output. "
    "Answer with the summary only."
)
"""The system prompt of the summarisation request."""

_PROMPT_PREFIX = "Summarise this part of the conversation:\n\n"
_OMITTED_NOTE = "[{} earlier messages omitted]"


def _render(message: Message) -> str:
    lines: list[str] = []
    if message.role == "tool":
        for r in message.tool_results_parts:
            flag = " (error)" if r.is_error else ""
            lines.append(f"Tool result from {r.name}{flag}: {r.content}")
        return "\n".join(lines)
    if message.text:
        lines.append(f"{message.role.capitalize()}: {message.text}")
    for call in message.tool_calls:
        lines.append(f"Assistant called {call.name}({arguments_json(call.arguments)})")
    return "\n".join(lines)


def _clip(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest prefix of ``text`` (plus a marker when cut) within ``max_tokens``."""
    if counter.count_text(text) <= max_tokens:
        return text
    marker = " [...truncated]"
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if counter.count_text(text[:mid] + marker) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return text[:low] + marker if low else ""


def _fit_transcript(lines: list[str], room: int, counter: TokenCounter) -> str:
    """The most recent lines that fit ``room`` tokens, oldest dropped (and noted) first."""
    chosen: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = counter.count_text(line) + 1
        if used + cost > room:
            clipped = _clip(line, room - used - 1, counter) if not chosen else ""
            if clipped:
                chosen.append(clipped)
            break
        chosen.append(line)
        used += cost
    omitted = len(lines) - len(chosen)
    if omitted:
        chosen.append(_OMITTED_NOTE.format(omitted))
    return "\n".join(reversed(chosen))


@record(eq=False)
class SummarizingCompactor:
    """Replace the dropped middle with a model-written summary.

    The cut is the one ``TruncatingCompactor`` makes; the middle is rendered as text and sent in
    one request (system ``instructions``, no tools, ``max_tokens=max_summary_tokens``). The
    summary becomes a ``user`` message starting ``"Summary of earlier conversation: "`` placed
    after the first message.

    The request never exceeds its budget: ``max_request_tokens`` when given, else the pass's
    ``target_tokens`` (always below the window), minus ``max_summary_tokens`` for the answer.
    When the middle is bigger, its oldest messages are left out (and the summary told how many);
    when not even the instructions fit, or the summary would cost more than what it replaces,
    the pass falls back to plain truncation. A failing or empty reply raises (the engine turns a
    raising compactor into ``CompactionFailed``).

    Attributes:
        client: The model that writes the summary (any ``ModelClient``).
        preserve_recent: Recent messages kept verbatim.
        min_messages: Conversations this short pass through unchanged.
        max_summary_tokens: The summary's length limit (asked for, and enforced by clipping).
        max_request_tokens: The summariser's own request budget; None uses ``target_tokens``.
        instructions: The system prompt of the summarisation request.
    """

    client: ModelClient
    preserve_recent: int = 4
    min_messages: int = 6
    max_summary_tokens: int = 1024
    max_request_tokens: int | None = None
    instructions: str = SUMMARY_INSTRUCTIONS

    def __post_init__(self) -> None:
        _validate_sizes("SummarizingCompactor", self.preserve_recent, self.min_messages)
        if self.max_summary_tokens < 1:
            raise ConfigurationError(
                "SummarizingCompactor.max_summary_tokens must be >= 1", field="max_summary_tokens"
            )

    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        """Summarise the middle; see the class docstring for the budget and fallbacks."""
        cut = _plan_cut(messages, self.preserve_recent, self.min_messages)
        if cut is None:
            return list(messages)
        truncated = _drop_orphans(cut.head + cut.tail) or list(messages)
        request = self._request(cut.dropped, target_tokens, counter)
        if request is None:
            return truncated
        summary = await self._summarise(request, counter)
        note = Message.user(SUMMARY_PREFIX + summary)
        if counter.count_message(note) >= sum(counter.count_message(m) for m in cut.dropped):
            return truncated
        return _drop_orphans([*cut.head, note, *cut.tail])

    def _request(
        self, dropped: Sequence[Message], target_tokens: int, counter: TokenCounter
    ) -> ModelRequest | None:
        budget = self.max_request_tokens if self.max_request_tokens is not None else target_tokens
        framing = request_overhead(self.instructions, (), counter)
        framing += counter.count_message(Message.user(_PROMPT_PREFIX))
        framing += counter.count_text(_OMITTED_NOTE.format(len(dropped))) + 1
        room = budget - self.max_summary_tokens - framing
        if room <= 0:
            return None
        lines = [text for text in (_render(m) for m in dropped) if text]
        transcript = _fit_transcript(lines, room, counter)
        if not transcript:
            return None
        prompt = Message.user(_PROMPT_PREFIX + transcript)
        size = estimate_request([prompt], system=self.instructions, tools=(), counter=counter)
        if size + self.max_summary_tokens > budget:
            return None  # a counter whose counts are not additive; never send over the budget
        settings = ModelSettings(max_tokens=self.max_summary_tokens)
        return ModelRequest(messages=[prompt], system=self.instructions, settings=settings)

    async def _summarise(self, request: ModelRequest, counter: TokenCounter) -> str:
        response = await self.client.complete(request)
        summary = _clip(response.text.strip(), self.max_summary_tokens, counter)
        if not summary:
            raise ResponseInvalid(
                "the summariser returned an empty summary", provider=self.client.provider
            )
        return summary
