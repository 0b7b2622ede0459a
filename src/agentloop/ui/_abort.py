"""A client that aborts while its thread's run is paused ends that run (SPEC 17, 18).

A UI app cancels a running run when its client goes away (the request's cancel token). A run
that has already paused is no longer running: the token finds nothing to stop, and the thread
would wait on interrupts (approval requests) the client may never have shown. So when the
client left during the response and the response's run ended paused, the app ends the run with
``session.cancel_run()`` (finalized as ``Cancelled``; the pending calls never run), and the next
request on the thread is an ordinary new run. A run decided or cancelled meanwhile is left as it is.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agentloop.errors import AgentLoopError

if TYPE_CHECKING:
    from agentloop.engine.session import Session
    from agentloop.run import Run

__all__ = ["cancel_abandoned"]

_log = logging.getLogger("agentloop")


async def cancel_abandoned(session: Session[Any], run: Run[Any] | None) -> None:
    """End ``run`` as ``Cancelled`` when it is its session's paused run (the client left)."""
    if run is None or not run.paused or session.current_run is not run:
        return
    try:
        await session.cancel_run()
    except AgentLoopError as error:  # decided meanwhile, or another process holds the session
        _log.warning("could not cancel the abandoned paused run %s: %s", run.id, error)
