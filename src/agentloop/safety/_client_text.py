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
  ``GOVERNOR_MESSAGE``;
- an error that wraps what the app's own code raised (``wraps_app_failure``: a
  ``CompactionFailed`` whose compactor raised, a ``ConfigurationError`` a memory namespace
  function's exception, a tool server that could not start (its stderr) or a remote agent's
  unreadable card ended the run with, SPEC 7, 13, 26, 27): ``INTERNAL_MESSAGE``, as for the
  bug itself;
- a ``GuardrailTripped`` whose check raised (SPEC 19: ``the check raised <ExcType>: <text>``):
  its reason without the exception's text (``served_reason``), where a face shows reasons;
- a ``ProviderError`` says what failed, not where: without the transport's own text when no
  reply came (``openai: connect failed``, not the host, port and OS error that follow it), a
  5xx without its body (a gateway's or an inference server's diagnostics: a backend's URL, a
  traceback), a 404 without the URL it was sent to, a refused redirect without its target host.
  A 4xx reply's own words (``Incorrect API key provided``) stay: they say what the request got
  wrong, written for reading.

``served_error`` is the same for an error an event carries (``RetryScheduled``, ``FellBack``):
a copy of it whose text is ``served_message``'s.

The whole text stays in the store and the viewer, and in the log: ``served_failure`` (a hard
error that ends a served run) logs it once, redacted of secrets, at WARNING on the
``agentloop`` logger, whenever the client's words hide part of it. An operator whose customer
read ``The server failed while running the agent.`` finds the cause without a store.
"""

from __future__ import annotations

import copy
import logging
import re

from agentloop.errors import (
    AgentLoopError,
    CompactionFailed,
    ConfigurationError,
    GovernorUnavailable,
    GuardrailTripped,
    InternalError,
    MemoryBackendError,
    ProviderError,
)
from agentloop.safety.redact import redact_secrets

__all__ = [
    "GOVERNOR_MESSAGE",
    "INTERNAL_MESSAGE",
    "STORE_MESSAGE",
    "served_compaction_failure",
    "served_error",
    "served_failure",
    "served_message",
    "served_reason",
    "wraps_app_failure",
]

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
    if wraps_app_failure(error):
        return INTERNAL_MESSAGE
    text = str(error)
    if isinstance(error, GuardrailTripped) and error.reason:
        text = text.replace(error.reason, served_reason(error.reason))
    elif isinstance(error, ProviderError):
        text = _provider_words(error, text)
    return redact_secrets(text)


_log = logging.getLogger("agentloop")


def served_failure(error: BaseException, face: str) -> str:
    """``served_message`` for the hard error that ends a run ``face`` serves, logged if it hides.

    When the client's words are not the error's whole (redacted) text, the whole text is logged
    once for the operator. A bug (no ``AgentLoopError``) is the face's to log, with its
    traceback; a cancellation hides nothing worth a line.
    """
    said = served_message(error)
    if isinstance(error, AgentLoopError) and not error.is_cancelled():
        whole = redact_secrets(str(error))
        if whole != said:
            name = type(error).__name__
            _log.warning("%s: a served run ended in %s: %s", face, name, whole)
    return said


def served_error(error: BaseException) -> AgentLoopError:
    """``error`` as a client may read it in an event: a copy of it with ``served_message``'s text.

    A bug (no ``AgentLoopError``) and an ``InternalError`` are an ``InternalError`` reading
    ``INTERNAL_MESSAGE``; an error whose text needs no change is itself.
    """
    said = served_message(error)
    if not isinstance(error, AgentLoopError) or isinstance(error, InternalError):
        return InternalError(said)
    if said == error.message:
        return error
    shown = copy.copy(error)
    shown.message = said  # ``str()`` reads it; ``args`` rebuild the copy, whatever they hold
    return shown


_SENT_TO = re.compile(r"^(\S+ HTTP 404) for POST \S+:")
"""A 404's ``for POST <url>`` (``providers/_classify.error_for_status``)."""
_SERVER_FAILED = re.compile(r"^(\S+ HTTP 5\d\d)\b.*", re.S)
"""A 5xx's ``<provider> HTTP <status>: <its body's text>`` (``error_for_status``)."""


def _provider_words(error: ProviderError, text: str) -> str:
    """What failed at the provider, without where: no host, port, URL or OS error."""
    status = error.status_code
    if status is None:  # no reply: ``<provider>: <what> (<the transport's text>)``
        return text.split(" (", 1)[0]
    if status >= 500:
        return _SERVER_FAILED.sub(r"\1", text, count=1)
    if error.redirect_host:
        text = text.replace(f" to {error.redirect_host} ", " ", 1)
    return _SENT_TO.sub(r"\1:", text, count=1)


_CRASHED = "the check raised "
"""How a guardrail's reason starts when its check raised (``agentloop.guardrails``, SPEC 19)."""


def served_reason(reason: str) -> str:
    """A guardrail's reason for a client: a crashed check's without its exception's text.

    ``the check raised ConnectionError: <host> refused`` is ``the check raised
    ConnectionError``; a policy's own reason (anything else) is the reason.
    """
    return reason.split(":", 1)[0] if reason.startswith(_CRASHED) else reason


def wraps_app_failure(error: AgentLoopError) -> bool:
    """Whether ``error``'s text holds an exception the app's own code raised (a bug's text).

    A ``CompactionFailed`` names its compactor's exception (``cause``); a ``ConfigurationError``
    raised during a run chains the exception of the app's part it called (a memory namespace
    function, an MCP server's start, an A2A card's read). An agentloop error inside (a
    summariser's ``ProviderError``, a bad namespace's ``InvalidInput``) is ours, worded for
    reading: not this.
    """
    if isinstance(error, CompactionFailed):
        cause = error.cause
    elif isinstance(error, ConfigurationError):
        cause = error.__cause__
    else:
        return False
    if not isinstance(cause, BaseException):
        return False
    return not isinstance(cause, AgentLoopError) or isinstance(cause, InternalError)


def served_compaction_failure(error: AgentLoopError) -> AgentLoopError:
    """A ``CompactionFailed`` event's error as a client may read it.

    Its sizes, and its cause as ``served_message`` words; any other error (``ContextExceeded``:
    two sizes) as it is.
    """
    if not isinstance(error, CompactionFailed):
        return error
    cause = error.cause
    if wraps_app_failure(error):
        said = INTERNAL_MESSAGE
    elif isinstance(cause, BaseException):
        said = served_message(cause)
    else:
        said = redact_secrets(str(cause))
    return CompactionFailed(error.used, error.limit, said)
