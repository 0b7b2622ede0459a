"""Where a caller collects the runs started in its context (``agentloop.evals``: a case's runs).

The engine appends each new ``Run`` to the list in ``RUN_SINK`` when one is set (one
``ContextVar.get`` per run, nothing per turn); the evaluation of a case sets a fresh list, so the
runs its task makes, in its task or the tasks and threads it starts, are the case's runs.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

__all__ = ["RUN_SINK"]

RUN_SINK: ContextVar[list[Any] | None] = ContextVar("agentloop_run_sink", default=None)
