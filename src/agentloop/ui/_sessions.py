"""Which session a UI request runs on: the application's choice, or one per thread by default.

An app takes ``session=``, the application's callable ``(request, thread_id) -> Session`` (sync
or async), where it authenticates the caller and picks or refuses the conversation: a thread id
sent by a client is never trusted by itself (SPEC 18). Without one, ``ThreadSessions`` keeps one
in-memory session per thread id for the app's lifetime, seeded from the client's message history
when new.

The app's own callables (``session=``, ``deps=``) are called through ``call_app``, which sorts
what they raise (SPEC 18, hostile requests)::

    PermissionError (raised by the app, no errno)   a refusal: 403 with its text (redacted)
    InvalidInput, TranscriptError                    the client's data does not fit: 4xx
    anything else, or a session= that returns        the app failed: ``AppFailed``, a 500 whose
    something other than a Session                   message names the callable and the class,
                                                     logged once (the traceback, redacted)
"""

from __future__ import annotations

import inspect
import logging
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from agentloop.engine.session import Session
from agentloop.errors import InvalidInput, TranscriptError
from agentloop.messages import Message
from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:
    from agentloop.engine.agent import Agent

__all__ = ["AppFailed", "SessionPicker", "ThreadSessions", "call_app", "pick_session", "refusal"]

_log = logging.getLogger("agentloop")

SessionPicker: TypeAlias = Callable[[Any, str], "Session[Any] | Awaitable[Session[Any]]"]
"""``session(request, thread_id) -> Session``: authenticate, then pick (or raise to refuse)."""


class ThreadSessions:
    """The default picker: one in-memory session per thread id, seeded when new."""

    def __init__(self, agent: Agent[Any]) -> None:
        self.agent = agent
        self._sessions: dict[str, Session[Any]] = {}

    def get(self, thread_id: str, seed: Callable[[], Sequence[Message]]) -> Session[Any]:
        """The thread's session; a new one starts from ``seed()`` (the client's history)."""
        session = self._sessions.get(thread_id)
        if session is None:
            history = list(seed())
            session = self.agent.session(history=history or None)
            self._sessions[thread_id] = session
        return session


async def pick_session(
    picker: SessionPicker | None,
    default: ThreadSessions,
    request: Any,
    thread_id: str,
    seed: Callable[[], Sequence[Message]],
) -> Session[Any]:
    """The session a request runs on: the app's ``picker``, else the default per-thread one."""
    if picker is None:
        return default.get(thread_id, seed)
    chosen = await call_app("session", picker, request, thread_id)
    if not isinstance(chosen, Session):
        got = type(chosen).__name__
        _log.error("the application's session= callable returned %s, not a Session", got)
        raise AppFailed(f"the application's session= callable returned {got}, not a Session")
    return chosen


class AppFailed(Exception):
    """The app's own ``session=`` or ``deps=`` callable failed: a 500 (already logged)."""


async def call_app(
    hook: str, function: Callable[..., Any], *args: Any, passes: tuple[type[Exception], ...] = ()
) -> Any:
    """``function(*args)``, awaited when it gives an awaitable; what it raises sorted (module).

    ``passes``: exceptions the caller gives a meaning of its own, raised as they are.

    Raises:
        PermissionError: The app refused the caller (``refusal`` gives its text).
        InvalidInput: The client's data does not fit (``TranscriptError`` too).
        AppFailed: Anything else; logged here, once, redacted.
    """
    failed: Exception
    try:
        value = function(*args)
        return await value if inspect.isawaitable(value) else value
    except PermissionError as exc:
        if exc.errno is None:  # the app's own refusal, not a file it could not open
            raise
        failed = exc
    except (InvalidInput, TranscriptError):
        raise
    except passes:
        raise
    except Exception as exc:
        failed = exc
    trace = "".join(traceback.format_exception(failed))
    _log.error("the application's %s= callable failed:\n%s", hook, redact_secrets(trace))
    message = f"the application's {hook}= callable failed ({type(failed).__name__})"
    raise AppFailed(message) from failed


def refusal(exc: PermissionError) -> str:
    """The text of an app's refusal for the client (redacted: it is the app's own words)."""
    return redact_secrets(str(exc)) or "Forbidden"
