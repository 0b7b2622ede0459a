"""The fleet's one hard error: the shared rate governor could not be read or written (SPEC 25).

A governor that cannot count must not let requests through uncounted (that is how a fleet of
processes floods a provider), so its failure is hard, never a soft result and never retried.
"""

from __future__ import annotations

from agentloop.errors._base import AgentLoopError

__all__ = ["GovernorUnavailable"]


class GovernorUnavailable(AgentLoopError):
    """The rate governor's backend failed; nothing was sent (never unlimited sending).

    ``backend`` names the backend with any password removed; ``cause`` is what failed (the
    driver's exception, or its description); the message names its type only.
    """

    recoverability = "wait"

    def __init__(self, backend: str, cause: BaseException | str) -> None:
        name = cause if isinstance(cause, str) else type(cause).__name__
        super().__init__(f"rate governor backend {backend} unavailable: {name}")
        self.args = (backend, cause)
        self.backend = backend
        self.cause = cause
