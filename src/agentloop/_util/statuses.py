"""The five words a stored run's status is (SPEC 9), where the CLI can read them cheaply.

``agentloop runs --status`` offers them before anything of the store is imported; the store
(``agentloop.store._status``) writes them and the viewer filters by them.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

__all__ = ["STATUSES", "RunStatus"]

RunStatus: TypeAlias = Literal["running", "waiting", "paused", "completed", "failed"]
STATUSES: tuple[RunStatus, ...] = ("running", "waiting", "paused", "completed", "failed")
"""A stored run's statuses, in the order a run can reach them."""
