"""Window policy and compactors: keep every request inside the model's context window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentloop.errors import ConfigurationError
from agentloop.messages import Message
from agentloop.tokens import HeuristicTokenCounter, TokenCounter

__all__ = ["Compactor", "HeuristicTokenCounter", "TokenCounter", "TruncatingCompactor"]


@runtime_checkable
class Compactor(Protocol):
    """Shrinks a transcript towards ``target_tokens``; must keep tool calls with their results."""

    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        """Return the compacted transcript (never empty)."""
        ...


@dataclass(frozen=True, slots=True)
class TruncatingCompactor:
    """Keep the first message and the most recent ``preserve_recent``; drop the middle."""

    preserve_recent: int = 4
    min_messages: int = 6

    def __post_init__(self) -> None:
        if self.preserve_recent < 1:
            raise ConfigurationError(
                "TruncatingCompactor.preserve_recent must be >= 1", field="preserve_recent"
            )
        if self.min_messages < 2:
            raise ConfigurationError(
                "TruncatingCompactor.min_messages must be >= 2", field="min_messages"
            )

    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        """Pair-safe truncation of the middle of the transcript."""
        return list(messages)  # replaced by the pair-safe algorithm (issue 5)
