"""The run's context guard: its window estimate and its transcript checks, in the run's state.

``ContextGuard`` keeps a running estimate (O(1) per appended message, as ``ContextMeter``
does), checks the transcript incrementally (the transcript rules' ``_Rules``, which
``TranscriptChecker`` carries too) and says before each model call whether it can be sent as
it is (``ready``) or needs the compaction step (``engine.compaction``). It is the base class
of the run's state (``engine.state.RunState``, which the run's loop is): its fields are the
state's slots and ``state.guard`` is the state itself, so a run holds one record across its
model calls for its state, its estimate and its checks, not three. It runs alone as well
(``ContextGuard(config, system=..., observers=..., hooks=...)``: tests, tools).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from agentloop._wire_text import arguments_chars
from agentloop.config import RunConfig
from agentloop.context import WindowPolicy
from agentloop.engine.measured import CallIds, Measured
from agentloop.errors import ContextExceeded, ContextLengthExceeded
from agentloop.hooks import Hook, overrides
from agentloop.messages import Message, ProviderPart, TextPart, ToolCallPart, ToolResultPart
from agentloop.model import ToolSpec
from agentloop.observers import EventBus
from agentloop.tokens import (
    MEDIA_PROVIDER,
    HeuristicTokenCounter,
    RatioTokenCounter,
    count_messages,
    request_overhead,
)
from agentloop.transcript import _Rules

__all__ = ["ContextGuard", "quiet_line"]


def _policy_of(config: RunConfig) -> tuple[RunConfig, WindowPolicy, int]:
    """The config's window policy and its quiet line; cached, as every run asks (frozen both)."""
    found = _POLICIES.get(id(config))
    if found is not None and found[0] is config:
        return found
    policy = WindowPolicy(config.context_window, config.compact_threshold, config.auto_compact)
    if len(_POLICIES) >= 64:
        _POLICIES.clear()
    made = _POLICIES[id(config)] = (config, policy, quiet_line(policy))  # holds the config:
    return made  # its id stays its own


_POLICIES: dict[int, tuple[RunConfig, WindowPolicy, int]] = {}


def quiet_line(policy: WindowPolicy) -> int:
    """The largest estimate ``policy`` neither compacts at nor refuses (``ready``'s fast path).

    At or below it, ``policy.need`` is None and ``policy.fits`` is True, whatever else holds:
    two comparisons a turn instead of four calls. A disabled window has no line.
    """
    if not policy.enabled:
        return _NO_LINE
    quiet = min(policy.emergency_tokens - 1, policy.window)
    if policy.auto_compact and policy.threshold > 0:
        quiet = min(quiet, policy.threshold_tokens)
    return quiet


_RATIOS = frozenset({HeuristicTokenCounter, RatioTokenCounter})
"""This module's counters by exact type: ``added`` measures a one-part message as they do."""
_ceil = math.ceil

_NO_LINE = 2**62
"""No estimate comes near it (an estimate above it takes the exact path all the same)."""


class ContextGuard(_Rules):
    """Window estimate and transcript checks for one run: the base class of its state.

    The run's transcript checker itself (the rules of ``TranscriptChecker``, without unique
    ids), and its meter: ``counter``, ``overhead`` and ``total`` are a ``ContextMeter``'s, kept
    in the guard's own slots. Every run holds its state across each model call, and each
    object it holds there costs the collector at many runs in flight: one record, not four.
    Its names are its own on the state (``start``, ``added``, ``ready``, ``measure_of``...);
    ``guard`` is the object itself, the state a caller reads as its guard.
    """

    # one per run: slots are set faster than a dict's keys
    __slots__ = (
        "_force", "_overhead", "_quiet", "_salvaged_turn", "_tokens", "compact_hooks", "config",
        "counter", "in_transcript", "lead", "observers", "policy", "server_side", "system",
    )  # fmt: skip

    def __init__(
        self,
        config: RunConfig,
        *,
        system: str | None,
        observers: EventBus,
        hooks: Sequence[Hook],
    ) -> None:
        self.system = system
        self.arm_guard(config, observers, hooks)

    @property
    def guard(self) -> ContextGuard:
        """The guard: this object (a class-level property, never a slot: no cycle)."""
        return self

    def arm_guard(self, config: RunConfig, observers: EventBus, hooks: Sequence[Hook]) -> None:
        """Set the guard's fields for a run of ``config`` (``system``: the state's, set apart).

        ``observers``: the session's bus (compaction's events); ``hooks``: the agent's, of
        which those with a ``pre_compact`` are kept.
        """
        self.config = config
        self.observers = observers
        self.compact_hooks = (
            tuple(h for h in hooks if overrides(h, Hook, "pre_compact")) if hooks else ()
        )
        _, self.policy, self._quiet = _policy_of(config)
        self._open(False)
        self.counter = config.token_counter
        self._overhead = self._tokens = 0
        self._salvaged_turn: int | None = None
        self._force = False
        self.server_side = False
        """The provider compacts (SPEC 28's server-side compaction): the local compactor never
        runs and the estimate counts from the last ``compaction`` part."""
        self.in_transcript = False
        """The system prompt and tools travel in the transcript (an append-only conversation's
        base and entries, SPEC 28): they are counted there, not again as overhead."""
        self.lead: tuple[Message, ...] = ()
        """Checked before the messages, never measured: a filtered handoff's base on an
        append-only conversation (SPEC 26, 28), which travels as the view's system and tools."""

    def start(
        self,
        transcript: Sequence[Message],
        specs: Sequence[ToolSpec],
        known: Measured | None = None,
    ) -> None:
        """Measure and check the transcript once, at run start (with the tools offered).

        ``known``: what the session measured of the history the transcript starts with; then
        only the messages after it are measured and checked.
        """
        system, counter = self.system, self.counter
        if self.in_transcript:
            system, specs = None, ()
        self._overhead = request_overhead(system, specs, counter)
        if (
            known is None
            or known.counter is not counter
            or known.provider != MEDIA_PROVIDER.get()
            or self.server_side
        ):
            if type(counter) in _RATIOS and not self.server_side:  # each as ``added`` takes it
                self._tokens = 0
                self._reset()
                self._took(transcript)
                return
            self._tokens = count_messages(counter, transcript)
            self._reset(transcript)
            if self.server_side:
                self._tokens = count_messages(counter, transcript[_last_compaction(transcript) :])
            return
        new = transcript[known.length :]
        if type(counter) in _RATIOS:  # (never server-side here)
            self._tokens = known.tokens
            self._resume(*known.checker)
            self._took(new)
            return
        self._tokens = known.tokens + count_messages(counter, new)
        self._resume(*known.checker)
        self._extend(new)

    def _took(self, messages: Sequence[Message]) -> None:
        """Each message measured and checked as ``added`` takes it (this module's counters)."""
        for message in messages:
            self.added(message)

    def restart(
        self,
        messages: Sequence[Message],
        system: str | None,
        specs: Sequence[ToolSpec],
        lead: tuple[Message, ...] = (),
    ) -> None:
        """Measure and check ``messages`` afresh with this overhead (a filtered handoff's view).

        ``lead``: what the checker reads first (see ``self.lead``).
        """
        self.lead = lead
        counter = self.counter
        self._overhead = request_overhead(system, specs, counter)
        self._tokens = count_messages(counter, messages)
        self._reset([*lead, *messages])
        if self.server_side:
            self._tokens = count_messages(counter, messages[_last_compaction(messages) :])

    @property
    def overhead(self) -> int:
        """Tokens of the system prompt and tool schemas (``ContextMeter.overhead``)."""
        return self._overhead

    @property
    def total(self) -> int:
        """The estimate of the next request: messages plus overhead (``ContextMeter.total``)."""
        return self._tokens + self._overhead

    def measure_of(self, history: list[Message], call_ids: CallIds) -> Measured:
        """What this run's transcript, committed whole as ``history``, measured at the end."""
        return Measured(
            history, self._checkpoint(), self._tokens, self.counter, MEDIA_PROVIDER.get(), call_ids
        )

    def added(self, message: Message) -> None:
        """Account for one appended message: counted, then checked (``_take``).

        A one-text, call or result message (no media) under this module's ratio counters is
        measured here as ``count_message`` would, and checked as ``_one_part`` would (no calls).
        """
        parts, counter = message.parts, self.counter
        one = len(parts) == 1 and type(counter) in _RATIOS and not self.server_side
        part: Any = parts[0] if one else None
        kind = type(part)
        if kind is TextPart:  # ``part_chars``, written out for the three kinds (no call)
            chars = len(part.text)
        elif kind is ToolCallPart:
            chars = len(part.id) + len(part.name) + arguments_chars(part.arguments)
        elif kind is ToolResultPart and not part.media:  # (media: counted by the counter)
            chars = len(part.call_id) + len(part.name) + len(part.content)
        else:
            self._added(message)
            return
        ratio, framing = counter.chars_per_token, counter.per_message  # type: ignore[attr-defined]
        self._tokens += _ceil(chars / ratio) + framing
        index, role = self._count, message.role  # ``_take``, written out
        if (  # ``_one_part``'s text, written out: a user's or a reply's, while no call waits
            kind is TextPart
            and chars
            and not self._pending
            and (role == "user" or (role == "assistant" and self._started))
        ):
            self._pending_index, self._started, self._count = index, True, index + 1
        elif (  # ``_one_part``'s result, written out: the one answer to the one call just before
            kind is ToolResultPart
            and role == "tool"
            and self._started
            and len(pending := self._pending) == 1
            and self._pending_index == index - 1
            and pending[0].id == part.call_id
        ):
            self._pending = ()
            self._count = index + 1
        elif (  # ``_one_part``'s call, written out: a reply's one call while none waits
            kind is ToolCallPart
            and role == "assistant"
            and self._started
            and not self._pending
            and not self.unique_ids  # (a guard's: ``arm_guard`` opens its rules with False)
        ):
            self._pending = parts  # type: ignore[assignment]  # ``(part,)``: the message's own
            self._pending_index, self._count = index, index + 1
        elif not self._one_part(index, role, part):
            self._absorb(index, message)

    def _added(self, message: Message) -> None:
        """``added`` for any message: counted by the counter (and its cache), then checked."""
        if self.server_side and _compacts(message):  # the provider dropped what came before
            self._tokens = 0
        self._tokens += self.counter.count_message(message)
        index, parts = self._count, message.parts  # ``_take``, written out
        if len(parts) != 1 or not self._one_part(index, message.role, parts[0]):
            self._absorb(index, message)

    def compaction_reason(self) -> str | None:
        """Why the next request needs a compaction pass, if it does (a forced pass: once)."""
        reason = "emergency" if self._force else self.policy.need(self.total)
        if self.server_side and not self._force:
            reason = None  # the provider compacts past its trigger
        self._force = False
        return reason

    def compacted(self, messages: Sequence[Message]) -> None:
        """A pass left ``messages`` to send: measured and checked afresh (after ``lead``)."""
        self._tokens = count_messages(self.counter, messages)
        self._reset([*self.lead, *messages])

    def salvage(self, error: ContextLengthExceeded, turn_index: int, sending: int) -> None:
        """A provider rejected turn ``turn_index``'s context (``sending`` messages sent).

        The first rejection on a turn forces a pass before the retry (when there is more
        than one message to compact); a second one gives up.
        """
        window = self.config.context_window
        if not self.policy.enabled:
            raise error
        if self._salvaged_turn == turn_index:
            raise ContextExceeded(max(self.total, window + 1), window) from error
        self._salvaged_turn = turn_index
        self._force = sending > 1

    def ready(self) -> bool:
        """True when the next request needs no compaction and can be sent (then checked).

        The common turn's whole context step, with no coroutine; False: compaction's
        ``before_call`` next (``engine.compaction``).
        """
        total = self._tokens + self._overhead
        if total <= self._quiet and not self._force:  # below every line: nothing to decide
            if not self._count or self._pending:  # ``_check_sendable``, its call when it raises
                self._check_sendable()
            return True
        policy = self.policy
        if self._force or (not self.server_side and policy.need(total)):
            return False
        if not policy.fits(total):  # what _sendable checks, with the total read once
            raise ContextExceeded(total, self.config.context_window)
        self._check_sendable()
        return True


def _compacts(message: Message) -> bool:
    """Whether ``message`` carries a provider's ``compaction`` part (SPEC 28)."""
    return any(type(p) is ProviderPart and p.kind == "compaction" for p in message.parts)


def _last_compaction(transcript: Sequence[Message]) -> int:
    """The index of the last message with a ``compaction`` part (0: none)."""
    for index in range(len(transcript) - 1, -1, -1):
        if _compacts(transcript[index]):
            return index
    return 0
