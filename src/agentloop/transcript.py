"""Transcript rules: what a sequence of messages must look like before it is sent.

Providers reject transcripts with dangling tool calls, results without calls, duplicate call ids,
empty messages or odd role orders, usually with an opaque 400. We check locally first and name
the offending message (``TranscriptError.index``), its role and the call id.

The rules, in the order a message is checked:

1. a ``system`` message (an append-only conversation's base or entry, SPEC 28, or an
   application's own instructions mid-history, SPEC 12) may stand anywhere except between a
   tool call and its results, and carries text and ``ToolChangePart`` only; each provider
   adapter sends it as SPEC 28 says (in place, or joined to the top-level system prompt);
2. no empty message (no parts, or only empty text);
3. the first message other than ``system`` is a ``user`` message;
4. tool calls appear only in ``assistant`` messages, results only in ``tool`` messages, a
   ``ToolChangePart`` only in ``system`` messages, and a ``tool`` message carries nothing but
   results;
5. a ``tool`` message comes directly after an ``assistant`` message with calls and answers every
   one of them exactly once (pairing is per occurrence: the results answer the calls just before);
6. call ids are unique in the transcript (``unique_ids=False`` relaxes this to unique per turn, for
   providers that tolerate reuse);
7. a transcript ready to send does not end with unanswered calls.

``TranscriptChecker`` applies the rules incrementally, so a turn costs the size of its new
messages, not of the whole history. ``close_interrupted`` repairs the one shape a cancel or a
crash leaves behind: calls whose results never came.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentloop.errors import TranscriptError
from agentloop.messages import (
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolChangePart,
    ToolResultPart,
)

__all__ = [
    "INTERRUPTED_TEXT",
    "TranscriptChecker",
    "close_interrupted",
    "validate_transcript",
]

_NO_IDS: set[str] = set()  # never added to: a checker without unique ids keeps none

INTERRUPTED_TEXT = "The tool call was interrupted before a result was produced."
"""The synthetic result text (``is_error=True``) for a call whose result never came."""


def _is_empty(message: Message) -> bool:
    return all(isinstance(p, TextPart) and not p.text for p in message.parts)


def _fail(index: int, message: Message, problem: str) -> TranscriptError:
    return TranscriptError(f"message {index} ({message.role}): {problem}", index=index)


class _Rules:
    """The rules' incremental state and steps, under names a run's state can carry as its own.

    ``TranscriptChecker``'s engine: the run's context guard (``engine.guard.ContextGuard``),
    which is the run's state, inherits these without the checker's public ``append``,
    ``extend``, ``state()`` and ``__len__`` (a run's state has its own ``append`` and
    ``state``, and a state with no messages must not be falsy).
    """

    __slots__ = ("_count", "_ids", "_pending", "_pending_index", "_started", "unique_ids")

    def _open(self, unique_ids: bool) -> None:
        """Start with nothing absorbed (``unique_ids``: see ``TranscriptChecker``)."""
        self.unique_ids = unique_ids
        self._count = 0
        self._ids: set[str] = set() if unique_ids else _NO_IDS  # kept only when unique
        self._pending: tuple[ToolCallPart, ...] = ()
        self._pending_index = -1
        self._started = False  # a message other than system was absorbed (rule 3 is behind us)

    def _reset(self, messages: Iterable[Message] = ()) -> None:
        """``TranscriptChecker.reset``."""
        self._count = 0
        self._pending = ()
        self._pending_index = -1
        self._started = False
        if self.unique_ids:
            self._ids.clear()
        self._extend(messages)

    def _checkpoint(self) -> tuple[int, tuple[ToolCallPart, ...], int, bool]:
        """``TranscriptChecker.state``."""
        if self.unique_ids:
            raise ValueError("a checker of unique ids keeps every id: it cannot be resumed")
        return self._count, self._pending, self._pending_index, self._started

    def _resume(
        self,
        count: int,
        pending: tuple[ToolCallPart, ...],
        pending_index: int,
        started: bool = False,
    ) -> None:
        """``TranscriptChecker.resume``."""
        self._count, self._pending, self._pending_index = count, pending, pending_index
        self._started = started

    def _extend(self, messages: Iterable[Message]) -> None:
        """``TranscriptChecker.extend``."""
        for message in messages:
            self._take(message)

    def _take(self, message: Message) -> None:
        """``TranscriptChecker.append``."""
        index = self._count
        parts = message.parts
        if len(parts) != 1 or not self._one_part(index, message.role, parts[0]):
            self._absorb(index, message)

    def _absorb(self, index: int, message: Message) -> None:
        """``append`` for any message ``_one_part`` did not take."""
        if message.role == "system":
            self._check_system(index, message)
            self._count += 1
            return
        self._check_shape(index, message)
        if message.role == "tool":
            self._check_results(index, message)
            self._pending = ()
        else:
            self._check_answered()
            self._pending = self._check_calls(index, message)
            self._pending_index = index
        self._started = True
        self._count += 1

    def _one_part(self, index: int, role: str, part: Part) -> bool:
        """The common turn's messages, checked and absorbed at once: False for any other.

        A reply with one call while no call waits (its id new where ids must be unique), one
        result answering the one call just before, or a user's or a reply's one non-empty text
        while no call waits (a user's may open the transcript); what ``append`` would conclude,
        in one call.
        """
        if type(part) is TextPart and role in _TEXT_ROLES:
            if self._pending or not part.text or not (self._started or role == "user"):
                return False
            self._pending_index = index
            self._started = True
        elif not self._started:
            return False
        elif type(part) is ToolResultPart and role == "tool":
            pending = self._pending
            if len(pending) != 1 or self._pending_index != index - 1:
                return False
            if pending[0].id != part.call_id:
                return False
            self._pending = ()
        elif type(part) is ToolCallPart and role == "assistant" and not self._pending:
            if self.unique_ids:
                ids = self._ids
                if ids is _NO_IDS or part.id in ids:
                    return False
                ids.add(part.id)
            self._pending = (part,)
            self._pending_index = index
        else:
            return False
        self._count = index + 1
        return True

    def _check_sendable(self) -> None:
        """``TranscriptChecker.check_sendable``."""
        if self._count == 0:
            raise TranscriptError("the transcript is empty", index=None)
        if self._pending:
            self._check_answered()

    def _check_shape(self, index: int, message: Message) -> None:
        parts = message.parts
        if self._started and len(parts) == 1:  # the common message: one part its role takes
            part, role = parts[0], message.role
            kind = type(part)
            if (
                (kind is ToolCallPart and role == "assistant")
                or (kind is ToolResultPart and role == "tool")
                or (kind is TextPart and role in _TEXT_ROLES and part.text)  # type: ignore[union-attr]
            ):
                return
        if _is_empty(message):
            raise _fail(index, message, "the message is empty")
        if not self._started and message.role != "user":  # system messages may come before
            raise _fail(index, message, "the first message must be a user message")
        for part in message.parts:
            if not _part_allowed(message.role, part):
                raise _fail(index, message, f"a {message.role} message cannot carry {_kind(part)}")

    def _check_system(self, index: int, message: Message) -> None:
        """Rule 1: anywhere but between a tool call and its results; text and tool changes."""
        if self._pending:
            call = self._pending[0]
            raise _fail(
                index,
                message,
                f"a system message cannot come between tool call {call.id!r} ({call.name}) of "
                f"message {self._pending_index} and its results",
            )
        if _is_empty(message):
            raise _fail(index, message, "the message is empty")
        for part in message.parts:
            if not isinstance(part, TextPart | ToolChangePart):
                raise _fail(index, message, f"a system message cannot carry {_kind(part)}")

    def _check_answered(self) -> None:
        if self._pending:
            call = self._pending[0]
            raise TranscriptError(
                f"message {self._pending_index} (assistant): tool call {call.id!r} ({call.name})"
                " has no result in the next tool message",
                index=self._pending_index,
            )

    def _check_calls(self, index: int, message: Message) -> tuple[ToolCallPart, ...]:
        calls = message.tool_calls
        seen: set[str] = set()
        for call in calls:
            if call.id in seen or (self.unique_ids and call.id in self._ids):
                raise _fail(index, message, f"duplicate tool call id {call.id!r} ({call.name})")
            seen.add(call.id)
        if self.unique_ids:
            if self._ids is _NO_IDS:  # made without unique ids, asked for them since
                self._ids = set()
            self._ids.update(seen)
        return calls

    def _check_results(self, index: int, message: Message) -> None:
        if not self._pending or self._pending_index != index - 1:
            raise _fail(index, message, "a tool message must follow an assistant message's calls")
        pending, results = self._pending, message.tool_results_parts
        if len(pending) == 1 and len(results) == 1 and results[0].call_id == pending[0].id:
            return  # the common turn: one call, its one result
        waiting: dict[str, int] = {}
        for call in pending:
            waiting[call.id] = waiting.get(call.id, 0) + 1
        for result in results:
            left = waiting.get(result.call_id, 0)
            if left <= 0:
                raise _fail(index, message, _unmatched(result, pending))
            waiting[result.call_id] = left - 1
        for call in pending:
            if waiting[call.id] > 0:
                raise TranscriptError(
                    f"message {index - 1} (assistant): tool call {call.id!r} ({call.name})"
                    f" has no result in the next tool message (message {index})",
                    index=index - 1,
                )


class TranscriptChecker(_Rules):
    """Checks a transcript message by message; each check costs only the new messages.

    ``extend`` raises ``TranscriptError`` on the first offending message among the new ones; the
    valid prefix stays absorbed. Unanswered calls at the end are allowed while the transcript is
    being built (the tools are still running); ``check_sendable`` refuses them.

    Args:
        unique_ids: Require call ids unique across the whole transcript (default), not only
            within one turn.
    """

    __slots__ = ()

    def __init__(self, *, unique_ids: bool = True) -> None:
        self._open(unique_ids)

    def __len__(self) -> int:
        return self._count

    @property
    def pending_calls(self) -> tuple[ToolCallPart, ...]:
        """Calls of the last message still waiting for their results."""
        return self._pending

    def reset(self, messages: Iterable[Message] = ()) -> None:
        """Forget everything and check ``messages`` afresh (after compaction replaced history)."""
        self._reset(messages)

    def state(self) -> tuple[int, tuple[ToolCallPart, ...], int, bool]:
        """What ``resume`` needs to go on from here (with ``unique_ids=False`` only)."""
        return self._checkpoint()

    def resume(
        self,
        count: int,
        pending: tuple[ToolCallPart, ...],
        pending_index: int,
        started: bool = False,
    ) -> None:
        """Go on from a ``state()``: as if the same messages had been absorbed again."""
        self._resume(count, pending, pending_index, started)

    def extend(self, messages: Iterable[Message]) -> None:
        """Check and absorb new messages appended to the transcript.

        Raises:
            TranscriptError: A new message breaks a rule; ``index`` is its position in the
                whole transcript (or the position of the call left unanswered).
        """
        self._extend(messages)

    def append(self, message: Message) -> None:
        """Check and absorb one appended message (see ``extend``)."""
        self._take(message)

    def check_sendable(self) -> None:
        """Raise unless the transcript absorbed so far can be sent as a request.

        Raises:
            TranscriptError: The transcript is empty or ends with unanswered calls.
        """
        self._check_sendable()


_TEXT_ROLES = ("user", "assistant")


def _part_allowed(role: str, part: Part) -> bool:
    if isinstance(part, ToolChangePart):
        return role == "system"
    if isinstance(part, ToolCallPart):
        return role == "assistant"
    if isinstance(part, ToolResultPart):
        return role == "tool"
    return role != "tool"


def _kind(part: Part) -> str:
    if isinstance(part, ToolCallPart):
        return f"a tool call ({part.id!r})"
    if isinstance(part, ToolResultPart):
        return f"a tool result ({part.call_id!r})"
    if isinstance(part, ToolChangePart):
        return "a ToolChangePart (tool changes travel in system messages)"
    if isinstance(part, TextPart):
        return "text"
    return type(part).__name__


def _unmatched(result: ToolResultPart, calls: Sequence[ToolCallPart]) -> str:
    if any(call.id == result.call_id for call in calls):
        return f"duplicate result for tool call {result.call_id!r} ({result.name})"
    return f"result for tool call {result.call_id!r} ({result.name}) has no matching call"


def validate_transcript(
    messages: Sequence[Message], *, allow_pending: bool = False, unique_ids: bool = True
) -> None:
    """Check a whole transcript against the rules in this module's docstring, in O(n).

    Args:
        messages: The transcript, without the system prompt.
        allow_pending: Accept unanswered calls in the last message (a transcript being built).
        unique_ids: Require call ids unique across the transcript, not only within a turn.

    Raises:
        TranscriptError: The first offending message, with ``index``, role and call id.
    """
    checker = TranscriptChecker(unique_ids=unique_ids)
    checker.extend(messages)
    if allow_pending:
        if not messages:
            raise TranscriptError("the transcript is empty", index=None)
    else:
        checker.check_sendable()


def close_interrupted(messages: Sequence[Message]) -> list[Message]:
    """Give the last assistant message's unanswered calls a synthetic result.

    A cancel or a crash mid-tool leaves calls without results. Each missing result becomes
    ``ToolResultPart(call.id, call.name, INTERRUPTED_TEXT, is_error=True)``; the ``tool`` message
    after the calls is completed (results in the calls' order, results matching no call
    dropped) or inserted. A transcript with nothing missing comes back as an equal copy.
    """
    out = list(messages)
    last = next((i for i in range(len(out) - 1, -1, -1) if out[i].role == "assistant"), None)
    if last is None or not out[last].tool_calls:
        return out
    following = out[last + 1] if last + 1 < len(out) else None
    existing = following.tool_results_parts if following and following.role == "tool" else ()
    results = _complete_results(out[last].tool_calls, existing)
    if results is None:
        return out
    if following is not None and following.role == "tool":
        out[last + 1] = Message.tool_results(results)
    else:
        out.insert(last + 1, Message.tool_results(results))
    return out


def _complete_results(
    calls: Sequence[ToolCallPart], existing: Sequence[ToolResultPart]
) -> list[ToolResultPart] | None:
    """The results for ``calls`` in order, synthetic where missing; None when none is missing."""
    available: dict[str, list[ToolResultPart]] = {}
    for result in existing:
        available.setdefault(result.call_id, []).append(result)
    results: list[ToolResultPart] = []
    missing = False
    for call in calls:
        queue = available.get(call.id)
        if queue:
            results.append(queue.pop(0))
        else:
            missing = True
            results.append(ToolResultPart(call.id, call.name, INTERRUPTED_TEXT, is_error=True))
    extra = any(available.values())
    return results if missing or extra else None
