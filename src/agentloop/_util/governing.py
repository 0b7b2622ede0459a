"""A model client under the rate governor another client waits for (SPEC 25), lazily.

A run's other model requests (a handoff receiver's, a guardrail's ``ctx.metered(client)``) wait
for the governor its own client waits for, unless that client has one of its own. No
``GovernedClient`` exists before ``agentloop.fleet`` is imported, so while it is not loaded
nothing is governed and the client is returned as it is: a run without a governor imports
nothing for this.
"""

from __future__ import annotations

import sys
from typing import Any, TypeVar, cast

__all__ = ["governed_as"]

_C = TypeVar("_C")
"""A model client (this room is below ``agentloop.model``: the protocol is not imported)."""


def governed_as(own: object, client: _C, counter: Any = None) -> _C:
    """``client`` under the governor of ``own`` (a client), if it has one and ``client`` none.

    ``counter`` estimates the governed requests' tokens (``govern``'s; None: its default).
    """
    fleet = sys.modules.get("agentloop.fleet._client")
    if fleet is None:
        return client
    governor = fleet.governor_of(own)
    if governor is None or fleet.governor_of(client) is not None:
        return client
    return cast(_C, fleet.govern(client, governor, counter))
