"""What the shared SQL needs from a driver: a row, and the three calls of one transaction.

Its own module so that ``_sql`` (the statements) and ``_listing`` (the pages) both type their
transactions without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["Row", "Transaction"]

Row = tuple[Any, ...]


class Transaction(Protocol):
    """The three things the shared SQL needs from a driver, inside one transaction."""

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Execute one statement."""
        ...

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute one statement for each parameter row."""
        ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Execute a query and fetch every row."""
        ...
