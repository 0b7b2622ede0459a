"""The words a served run's client reads for a failure of the app's own parts (SPEC 18, 26).

Every face that serves an agent to someone else's software (the AG-UI and Vercel apps, the A2A
server, the MCP server) keeps a hard error's class and redacts its message; some messages are
the app's internals by design and are replaced, whichever face shows them:

- an ``InternalError`` (a raising hook, instructions function or model client) and any
  exception that is no ``AgentLoopError`` (a bug): ``INTERNAL_MESSAGE``; their text names a
  host, a query, a path;
- a ``MemoryBackendError`` (the app's store failed, or another worker runs the conversation
  now: a file, a host, a process id): ``STORE_MESSAGE``;
- a ``GovernorUnavailable`` (the rate governor's database: a path, a user, a host):
  ``GOVERNOR_MESSAGE``.

The whole text stays in the log, the store and the viewer.
"""

from __future__ import annotations

from agentloop.errors import AgentLoopError, GovernorUnavailable, InternalError, MemoryBackendError
from agentloop.safety.redact import redact_secrets

__all__ = ["GOVERNOR_MESSAGE", "INTERNAL_MESSAGE", "STORE_MESSAGE", "served_message"]

INTERNAL_MESSAGE = "The server failed while running the agent."
"""The message of an unexpected exception (not an ``AgentLoopError``) for a client."""
STORE_MESSAGE = (
    "The server could not record this conversation now (another request may be running it); "
    "try again."
)
"""A ``MemoryBackendError``'s message for a client: its own names the server's file or host."""
GOVERNOR_MESSAGE = "The server could not check its rate limits now; nothing was sent. Try again."
"""A ``GovernorUnavailable``'s message for a client: its own names the governor's database."""


def served_message(error: BaseException) -> str:
    """``error``'s message for a client: one of the words above, else redacted ('' if none)."""
    if not isinstance(error, AgentLoopError) or isinstance(error, InternalError):
        return INTERNAL_MESSAGE
    if isinstance(error, MemoryBackendError):
        return STORE_MESSAGE
    if isinstance(error, GovernorUnavailable):
        return GOVERNOR_MESSAGE
    return redact_secrets(str(error))
