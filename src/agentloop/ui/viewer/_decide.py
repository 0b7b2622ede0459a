"""The decisions form, read back: one ``Approve``, ``Deny`` or ``Answer`` per pending call.

The form names each field by the call it decides (``decision:<call id>``, with ``message:<id>``
for a denial's reason and ``answer:<id>`` for an external call's result). Only the calls the run
waits on are read, and the set is checked by ``agentloop.pausing.check_decisions`` before
anything runs: a forged or missing call id, or a decision that does not fit its call, is
``InvalidInput`` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentloop.errors import InvalidInput
from agentloop.pausing import Answer, Approve, Decision, Deny, PendingCall, check_decisions

__all__ = ["decisions_from_form"]


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
