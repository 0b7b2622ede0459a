"""Where an unexpected exception was raised, kept on the run's record (SPEC 18's viewer).

An exception the engine did not expect (a model client's ``KeyError``, a hook's bug) ends the
run as ``InternalError`` with the foreign exception as its ``__cause__``. Its class and message
are in the error's message; its traceback would be lost when the record is stored. When the run
is finalized, ``keep_frames`` gives the error a ``traceback`` attribute: the innermost
``MAX_FRAMES`` frames of the cause (or of the error itself when it has none), innermost last,
each ``{"file", "line", "function", "code"}``. It is plain data, so it is stored and read back
with the error's other attributes and shown by ``agentloop ui`` and ``agentloop runs show``.

Bounded and redacted: at most ``MAX_FRAMES`` frames, each text at most ``MAX_TEXT`` characters
(a long path keeps its end), every text through the package's one redactor; no locals, no
argument values, nothing of the frames' state but the source line the file already holds.

**A raised error holds nothing of its run** (``released``). The error that ends a run is raised
to the caller and kept on the record (``run.stop_reason``), and its ``__traceback__`` holds the
frames it came through, each with its locals: the run's state, the run loop, the session, the
error itself. Kept so, every failed run's working state lived as long as its record, and a
cycle (error → frame → state → record → error) waited for the collector's full pass. When the
run is finalized the engine lets go of the locals of agentloop's own frames the error (and its
cause and context) has left, as ``traceback.clear_frames`` does, but never a frame that may
belong to a coroutine or generator still waiting (clearing it would close it, on 3.11 and
3.12): of those, only the engine's own (``_clear``). An application's frames keep their locals
(a post-mortem debugger reads them). Each frame of the engine the error still passes on its way
to the caller drops its own references before the error goes through it. The traceback itself
stays whole: every file, line, function and source line, as printed.
"""

from __future__ import annotations

import inspect
import os
import traceback
from types import TracebackType
from typing import TypeVar

from agentloop.errors import AgentLoopError, InternalError
from agentloop.safety.redact import redact_secrets

__all__ = [
    "MAX_FRAMES",
    "MAX_TEXT",
    "innermost_frames",
    "internal_error",
    "keep_frames",
    "released",
]

E = TypeVar("E", bound=BaseException)

MAX_FRAMES = 6
"""How many of the innermost frames a record keeps."""
MAX_TEXT = 200
"""The longest file name, function name or source line a frame keeps."""


def _bounded(value: str, *, keep_end: bool = False) -> str:
    value = redact_secrets(value)
    if len(value) <= MAX_TEXT:
        return value
    return "…" + value[-(MAX_TEXT - 1) :] if keep_end else value[: MAX_TEXT - 1] + "…"


def innermost_frames(exc: BaseException) -> list[dict[str, str | int]]:
    """The innermost ``MAX_FRAMES`` frames of ``exc``'s traceback, innermost last, redacted."""
    frames = traceback.extract_tb(exc.__traceback__)[-MAX_FRAMES:]
    return [
        {
            "file": _bounded(frame.filename, keep_end=True),
            "line": frame.lineno or 0,
            "function": _bounded(frame.name),
            "code": _bounded((frame.line or "").strip()),
        }
        for frame in frames
    ]


def internal_error(exc: Exception) -> InternalError:
    """The ``InternalError`` an unexpected exception ends a run with (``exc`` its cause)."""
    error = InternalError(
        f"unexpected {type(exc).__name__} in the engine: {redact_secrets(str(exc))}"
    )
    error.__cause__ = exc
    return error


def keep_frames(error: AgentLoopError) -> None:
    """Give an unexpected exception's ``InternalError`` its ``traceback`` attribute (once)."""
    if not isinstance(error, InternalError) or "traceback" in error.__dict__:
        return
    cause = error.__cause__
    source = cause if cause is not None and cause.__traceback__ is not None else error
    frames = innermost_frames(source)
    if frames:
        error.traceback = frames  # type: ignore[attr-defined]  # data, like every attribute


def released(error: E) -> E:
    """``error``, its finished frames' locals let go (also its cause's and context's; see above).

    A frame still running (the caller's, the one that raises) is left as it is.
    """
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        exc = todo.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        _clear(exc.__traceback__)
        todo.extend(e for e in (exc.__cause__, exc.__context__) if e is not None)
        if isinstance(exc, BaseExceptionGroup):
            todo.extend(exc.exceptions)
    return error


def _clear(tb: TracebackType | None) -> None:
    """Clear the locals of every frame of ``tb`` that has finished and may safely be cleared.

    Only agentloop's own frames: an application's (its hook, its model client, its tool) keep
    their locals for a post-mortem debugger (``pdb.pm()``). Of agentloop's, a plain function's
    frame is cleared unless it still runs (it refuses: ``RuntimeError``). A coroutine's or
    generator's frame may belong to one that caught the error, kept it and waits on (a batch
    flush, a connection's reader): clearing it would close that coroutine, so only the engine's
    own are cleared, since the engine's coroutines that catch an error end before the run that
    gets it finishes (``released`` runs after ``finalize``).
    """
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        name = code.co_filename
        if name.startswith(_ENGINE) or (
            name.startswith(_PACKAGE) and not code.co_flags & _RESUMABLE
        ):
            try:
                frame.clear()
            except RuntimeError:  # still running: its locals are in use
                pass
        tb = tb.tb_next


_RESUMABLE = (
    inspect.CO_COROUTINE
    | inspect.CO_GENERATOR
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)
_ENGINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")
"""This package's folder: the engine's own frames."""
_PACKAGE = os.path.join(os.path.dirname(os.path.dirname(_ENGINE)), "")
"""agentloop's folder: its own frames (an application's are never cleared)."""
