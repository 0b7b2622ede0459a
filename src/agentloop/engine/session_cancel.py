"""A session's own cancel signal, made when somebody asks for it, and joined to its running run.

``session.cancel_token``, ``session.cancel()`` (``agent.cancel()``) and a tool's ``ctx.cancel``
make it; until then a session has none, and a run nobody cancels holds no ``CancelToken`` and
no tuple of them across its model waits (each object a run holds costs the collector at many
runs in flight, about 2 us a run at N = 1,000). Once made it is the session's for good: every
later run watches it, and a fire while the session is idle cancels exactly the next run.

Made while a run is active, it joins that run at once: it goes first in the run's tokens (the
last one stays the tools' own beside a caller's token, ``RunLoop.__call__``), so every
checkpoint reads it, and the run's loop watches it on the loop's thread. Made on another thread
(a sync tool's, a UI's), the watch is handed to the loop there; a fire that came before the
watch interrupts the run as the watch starts. Made before the run drives (``stream()``'s task
not started yet), the drive's own watch of the run's tokens takes it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from agentloop.cancel import CancelToken

if TYPE_CHECKING:
    from agentloop.engine.state import RunState

__all__ = ["session_signal"]

# ``session``: a ``Conversation`` (typed ``Any``: that module imports this one, when asked)

_MAKING = threading.Lock()
"""Held while a session's signal is made: two threads asking at once get the same one."""


def session_signal(session: Any) -> CancelToken:
    """The session's cancel signal, made now if it has none (a running run watches it at once)."""
    with _MAKING:
        made: CancelToken | None = session._cancel
        if made is not None:  # another thread made it meanwhile
            return made
        token = CancelToken()
        state: RunState | None = session._active
        if state is not None:  # first: the last token is the tools' own (with a caller's)
            state.tokens = (token, *state.tokens)
            _bridged(state)
        session._cancel = token
    if state is not None:
        _watched(session, state, token)
    return token


def _bridged(state: RunState) -> None:
    """The run's client-event bridge reads the run's tokens too (a governor wait's checkpoint)."""
    events = state.events
    if events is not None and hasattr(events, "_tokens"):  # (``engine.turn.ClientEventBridge``)
        events._tokens = state.tokens


def _watched(session: Any, state: RunState, token: CancelToken) -> None:
    """``state``'s run watches ``token`` from now on, on its loop's thread."""
    watcher = session._watcher
    if watcher is None or watcher.state is not state:
        return  # not driving yet: its drive watches the run's tokens, this one among them
    task = watcher.task
    if task is None:
        return  # a fire interrupted the run already: its checkpoints read this one too
    loop = task.get_loop()
    if not _on(loop):  # another thread: handed to the run's loop
        try:
            loop.call_soon_threadsafe(_join, session, state, token, watcher, loop)
        except RuntimeError:  # its loop is closed: the run is over
            pass
        return
    _join(session, state, token, watcher, loop)


def _on(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread runs ``loop`` now."""
    return asyncio._get_running_loop() is loop


def _join(
    session: Any,
    state: RunState,
    token: CancelToken,
    watcher: Any,
    loop: asyncio.AbstractEventLoop,
) -> None:
    """On the run's loop: watch ``token`` unless the run ended; a fire already there interrupts."""
    if session._active is not state or watcher.finalizing:
        return
    token._watch_on(loop, watcher)
    if token._fired:
        watcher()
