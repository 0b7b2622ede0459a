"""Which session a UI request runs on: the application's choice, or one per thread by default.

An app takes ``session=``, the application's callable ``(request, thread_id) -> Session`` (sync
or async), where it authenticates the caller and picks or refuses the conversation: a thread id
sent by a client is never trusted by itself (SPEC 18). Without one, ``ThreadSessions`` keeps one
in-memory session per thread id for the app's lifetime, seeded from the client's message history
when new.

A client's history may hold calls without results: the user stopped the chat while a tool ran
(``chat.stop()``, ``abortRun()``), and the client keeps the call as it last saw it. That is a
state the protocols' own clients produce, not a hostile request, so ``close_stopped`` closes
each such call the way the engine closes an interrupted one (``close_interrupted``: the soft
``INTERRUPTED_TEXT``, ``is_error``) before the session checks the seed; a history that is
malformed otherwise (a result for no call, a call id twice, an assistant message first) is
left as it came and stays the protocol's 4xx.

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
from agentloop.transcript import close_interrupted

if TYPE_CHECKING:
    from agentloop.engine.agent import Agent

__all__ = [
    "AppFailed",
    "SessionPicker",
    "ThreadSessions",
    "call_app",
    "close_stopped",
    "pick_session",
    "refusal",
]

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
            history = close_stopped(seed())
            session = self.agent.session(history=history or None)
            self._sessions[thread_id] = session
        return session


def close_stopped(history: Sequence[Message]) -> list[Message]:
    """``history`` with each call the client stopped closed as interrupted (the module's docstring).

    A call is closed when the ``tool`` message right after its assistant message (or none) lacks
    its result and holds nothing but results of that message's calls, each once; anything else
    is left for the transcript check to refuse.
    """
    out: list[Message] = []
    index = 0
    while index < len(history):
        message = history[index]
        index += 1
        if message.role != "assistant" or not message.tool_calls:
            out.append(message)
            continue
        segment = [message]
        if index < len(history) and history[index].role == "tool":
            segment.append(history[index])
            index += 1
        out.extend(close_interrupted(segment) if _only_missing(segment) else segment)
    return out


def _only_missing(segment: Sequence[Message]) -> bool:
    """Whether the results after a message's calls miss some and hold no stranger or repeat."""
    calls = {call.id for call in segment[0].tool_calls}
    if len(segment) == 1:
        return True
    tool = segment[1]
    answered = [result.call_id for result in tool.tool_results_parts]
    if len(answered) != len(tool.parts) or len(set(answered)) != len(answered):
        return False
    return set(answered) < calls


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
