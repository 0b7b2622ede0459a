"""Putting a stored session's state back into a live ``Session``: its safety state, or all of it.

``restore_safety`` puts back what ``SafetyState.snapshot`` stored at the last commit point
(``Agent.resume``, ``agent.session(id)`` and ``continue_run``). ``refreshed`` reloads a live
session whose store another process (or another ``Agent`` of this one) changed since this
process's last commit (``agentloop.store._freshness``): a web app's workers share one store.
``synced`` is that check for a face that reads a live session's state before it starts or
continues a run (the UI apps read ``current_run`` to tell a new message from an answer).

Apart from ``agentloop.engine.resume`` (which rebuilds a crashed run) so that the session can call
it before a run starts without an import circle: the session is typed loosely here.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from agentloop.errors import MemoryBackendError
from agentloop.run import Run
from agentloop.store import Store
from agentloop.store._session import Closing, load_safety, restore

__all__ = ["closing", "refreshed", "restore_safety", "synced"]


def refreshed(session: Any) -> None:
    """Reload ``session`` (a ``Conversation``) from its store: another process ran it since.

    A web app's workers share the store and each keeps its live ``Session``: the run about to
    start must send, and its end append to, what the store holds, not the cached history. The
    history, the runs and the session's own safety state come back as ``agent.session(id)``
    restores them (the agent's shared breakers and model health stay as they are).
    """
    recorder = session._recorder
    store, agent = recorder.store, session.agent
    history, runs = restore(store, session.id, owner=recorder.owner, closing=closing(agent))
    session._history = history
    session._set_runs(runs)
    session._measured = None
    session._drop_block = any(r.thinking_prefix_mismatch for r in runs)
    recorder.reloaded(len(history))
    restore_safety(session, recorder.store, continuing=None, shared=False)


def synced(session: Any) -> None:
    """Reload an idle live ``session`` whose store another process has moved on since.

    A UI app keeps one live session per thread and reads its ``current_run`` to tell a new
    message from an answer to its pending calls; when the CLI, the run viewer or another worker
    decided, cancelled, paused or ran the thread meanwhile, that cached run is stale and would
    refuse the client wrongly ("waits for answers", "no run waits"). One indexed read of the
    store (the check every run start makes anyway); a running session, a session without a
    store, or a store that cannot tell is left as it is.
    """
    recorder = getattr(session, "_recorder", None)
    if recorder is None or session._active is not None or recorder.fresh():
        return
    refreshed(session)


def closing(agent: Any) -> Closing | None:
    """How a restore closes a crashed run of ``agent``'s: its filtered handoff's view ends."""
    if not getattr(agent, "_handoffs", None):
        return None
    from agentloop.engine.handoffs import views_closed

    return partial(views_closed, agent)


def restore_safety(
    session: Any,
    store: Store,
    *,
    continuing: Run[Any] | None,
    shared: bool = True,
) -> None:
    """Put back the stored safety state; a resumed session drops unfired stop patterns.

    ``session`` is a ``Conversation``. ``shared=False`` (a session restored on a live agent)
    leaves the agent's tool breakers and model health as its other sessions made them.
    """
    data = load_safety(store, session.id)
    if data is None:
        return
    try:
        session.safety.restore(data, session.agent.client, continuing=continuing, shared=shared)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MemoryBackendError(
            f"session {session.id!r}: the stored safety state is unreadable: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if data.get("drop_block") is True:  # SPEC 28's escape hatch, stored with the session
        session._drop_block = True
    if continuing is None:
        session.safety.end_run()
