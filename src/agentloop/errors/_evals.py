"""The errors of section 23: a cassette that does not match, an eval dataset that is malformed.

Kept apart from ``_base`` so the evals and cassettes family stays in one place; like the other
rooms of this package it imports nothing of ours outside ``agentloop.errors``.
"""

from __future__ import annotations

from agentloop.errors._base import AgentLoopError, InvalidInput

__all__ = ["CassetteMismatch", "DatasetError"]


class CassetteMismatch(AgentLoopError):
    """A replayed request differs from the cassette's recording (never retried or fallen back).

    ``path`` is the cassette file, ``index`` the 0-based number of the request in the block,
    ``difference`` the JSON path of the first difference (None when nothing was left to play).
    """

    recoverability = "config"

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        index: int | None = None,
        difference: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.index = index
        self.difference = difference


class DatasetError(InvalidInput):
    """An eval dataset file or one of its cases is malformed; ``case`` names the case."""

    recoverability = "no"

    def __init__(self, message: str, *, path: str | None = None, case: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.case = case
