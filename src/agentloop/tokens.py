"""Token counting: a pluggable estimate of how much of the window a transcript uses."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agentloop.messages import Message, TextPart, ToolCallPart, ToolResultPart

__all__ = ["HeuristicTokenCounter", "TokenCounter"]


@runtime_checkable
class TokenCounter(Protocol):
    """Estimates tokens for messages and plain text."""

    def count_message(self, message: Message) -> int:
        """Tokens one message costs, including its framing."""
        ...

    def count_text(self, text: str) -> int:
        """Tokens a plain string costs."""
        ...


def _message_chars(message: Message) -> int:
    total = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            total += len(part.text)
        elif isinstance(part, ToolCallPart):
            total += len(part.name) + len(repr(dict(part.arguments)))
        elif isinstance(part, ToolResultPart):
            total += len(part.name) + len(part.content)
    return total


class HeuristicTokenCounter:
    """About ``chars_per_token`` characters a token plus ``per_message`` framing tokens.

    Messages are frozen, so each one's count is computed once and cached on the message.
    """

    def __init__(self, chars_per_token: float = 4.0, per_message: int = 4) -> None:
        if not chars_per_token > 0:
            chars_per_token = 4.0
        self.chars_per_token = chars_per_token
        self.per_message = per_message
        self._key = f"tokens:{chars_per_token}:{per_message}"

    def count_text(self, text: str) -> int:
        """Ceiling of characters over the ratio."""
        return -int(-len(text) // self.chars_per_token)

    def count_message(self, message: Message) -> int:
        """Cached per message."""
        count: int = message.encoded(self._key, self._count)
        return count

    def _count(self, message: Message) -> int:
        return -int(-_message_chars(message) // self.chars_per_token) + self.per_message

    def __repr__(self) -> str:
        return f"HeuristicTokenCounter({self.chars_per_token}, {self.per_message})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, HeuristicTokenCounter)
            and other.chars_per_token == self.chars_per_token
            and other.per_message == self.per_message
        )

    def __hash__(self) -> int:
        return hash((self.chars_per_token, self.per_message))
