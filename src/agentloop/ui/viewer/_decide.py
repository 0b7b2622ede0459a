"""The decisions form, read back: one ``Approve``, ``Deny`` or ``Answer`` per pending call.

The form names each field by the call it decides (``decision:<call id>``, with ``message:<id>``
for a denial's reason and ``answer:<id>`` for an external call's result). Only the calls the run
waits on are read, and the set is checked by ``agentloop.pausing.check_decisions`` before
anything runs: a forged or missing call id, or a decision that does not fit its call, is
``InvalidInput`` and changes nothing.

``refuse_unrunnable`` asks the continuer (``agent_continuer``'s has a ``check``) whether its
agent has each approved call's tool, before the run continues in the background: an approval is
never spent on nothing (SPEC 17), the page shows the refusal and the run stays paused.
``with_deps`` gives ``ViewerApp(deps=...)`` to that continuer.

``refuse_taken``: another face (the CLI, an API worker, a second click) may have decided the run
a moment ago and be running its calls now. The viewer's continuation runs after the redirect,
where a refusal would be seen by nobody, so the page refuses first, naming what happened: the
run's pending calls already have a recorded decision set, or a live process holds the session's
lease. (Two faces that pass this check at the same instant still meet at the lease: one runs,
the other's continuation is refused and logged.)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from agentloop.errors import ConfigurationError, InvalidInput
from agentloop.pausing import Answer, Approve, Decision, Deny, PendingCall, check_decisions

__all__ = [
    "already_decided",
    "decisions_from_form",
    "refuse_taken",
    "refuse_unrunnable",
    "with_deps",
]


def _one(fields: Mapping[str, Sequence[str]], name: str) -> str:
    values = fields.get(name) or [""]
    return values[0]


def decisions_from_form(
    pending: Sequence[PendingCall], fields: Mapping[str, Sequence[str]]
) -> dict[str, Decision]:
    """The decisions the form gives for ``pending``, checked as ``continue_run`` checks them."""
    decisions: dict[str, Decision] = {}
    for call in pending:
        choice = _one(fields, f"decision:{call.id}")
        if choice == "approve":
            decisions[call.id] = Approve()
        elif choice == "deny":
            reason = _one(fields, f"message:{call.id}") or _one(fields, f"answer:{call.id}")
            decisions[call.id] = Deny(reason.strip() or None)
        elif choice == "answer":
            decisions[call.id] = Answer(_one(fields, f"answer:{call.id}"))
        elif choice:
            raise InvalidInput(f"unknown decision {choice!r} for call {call.id}")
    forged = [name for name in fields if name.startswith("decision:") and name[9:] not in decisions]
    if forged:
        raise InvalidInput(f"no pending call {forged[0][9:]!r} in this run")
    check_decisions(tuple(pending), decisions)
    return decisions


def already_decided(run: Any) -> bool:
    """Whether the run's last recorded decision set answers its pending calls.

    A process continuing it recorded them before running any call (the store still says
    paused until it ends), or a continue that stopped did: the page asks nothing, ``decide``
    refuses, so a person's decision is never taken and then dropped.
    """
    if not run.decisions or not run.pending:
        return False
    last = run.decisions[-1]
    recorded = last.get("decisions", {}) if isinstance(last, Mapping) else {}
    return all(p.id in recorded for p in run.pending)


async def refuse_unrunnable(
    continuer: object,
    pending: Sequence[PendingCall],
    decisions: Mapping[str, Decision],
    last_agent: str | None = None,
    run: Any = None,
) -> None:
    """``InvalidInput`` when the continuer's agent lacks an approved call's tool (when known).

    ``last_agent``: the run's; a handoff receiver's call is judged by the receiver (SPEC 26).
    ``run``: the paused run, for ``agent_continuer``'s check of its staged memory writes (27).
    """
    check = getattr(continuer, "check", None)
    if getattr(continuer, "judges_turn_agent", False):  # agent_continuer's (no import: a circle)
        await check(tuple(pending), decisions, last_agent, run=run)  # type: ignore[misc]
        return
    if check is not None:
        await check(tuple(pending), decisions)


def refuse_taken(run: Any, lease: tuple[str, float] | None) -> None:
    """``InvalidInput`` when another face decided ``run`` already or is continuing it now."""
    from agentloop.store._session import _gone

    if already_decided(run):
        raise InvalidInput(
            f"run {run.id} is being continued elsewhere: its pending calls were already decided "
            "(by another page, the CLI or the API); this decision changes nothing. If that "
            f"continue crashed, `agentloop continue {run.id}` without decisions finishes it"
        )
    if lease is not None and lease[1] > time.time() and not _gone(lease[0]):
        raise InvalidInput(
            f"run {run.id} is being continued elsewhere (by {lease[0]}): this decision changes "
            "nothing; the page shows the run as it goes on"
        )


def with_deps(continuer: Any, deps: Any) -> Any:
    """``continuer`` continuing with ``deps`` (``ViewerApp(deps=...)``); None: unchanged."""
    if deps is None:
        return continuer
    give = getattr(continuer, "with_deps", None)
    if give is None:
        raise ConfigurationError(
            "ViewerApp(deps=...) is for continuer=agent_continuer(agent); a continuer of your "
            "own passes deps to continue_run(deps=...) itself",
            field="deps",
        )
    return give(deps)
