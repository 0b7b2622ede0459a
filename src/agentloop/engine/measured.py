"""What a session knows of its committed history: the next run's context guard starts from it.

Below both the run's state (``engine.state``) and its context guard (``engine.context_guard``,
the state's base class), which each read it: its own module, so neither imports the other.
"""

from __future__ import annotations

from typing import Any

from agentloop.messages import Message

__all__ = ["NO_CALL_IDS", "CallIds", "Measured"]

NO_CALL_IDS: frozenset[str] = frozenset()
"""A run's ``call_ids`` while its transcript has no tool call (shared: it cannot be added to)."""

CallIds = set[str] | frozenset[str]
"""A run's tool-call ids: its own set, or ``NO_CALL_IDS``."""


class Measured:
    """What a session knows of its committed history, so the next run need not redo it.

    Left by a run that committed all it made (``RunLoop.finalize``): the history list and its
    length then, the transcript checker's state at its end, the tokens of its messages (by
    ``counter``, media by ``provider``'s formula) and its tool-call ids. A run whose history is
    still that list at that length starts from it and measures only its input, so a long
    conversation costs each run its new messages, not its whole history. Anything else (another
    list, another length, another counter or provider) measures afresh.
    """

    __slots__ = ("call_ids", "checker", "counter", "history", "length", "provider", "tokens")

    def __init__(
        self,
        history: list[Message],
        checker: tuple[int, tuple[Any, ...], int, bool],
        tokens: int,
        counter: object,
        provider: str | None,
        call_ids: CallIds,
    ) -> None:
        self.history = history
        self.length = len(history)
        self.checker = checker
        self.tokens = tokens
        self.counter = counter
        self.provider = provider
        self.call_ids = call_ids

    def holds(self, history: list[Message]) -> bool:
        """Whether ``history`` is still the list this was taken of, unchanged in length."""
        return history is self.history and len(history) == self.length
