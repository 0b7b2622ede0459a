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
"""

from __future__ import annotations

import traceback

from agentloop.errors import AgentLoopError, InternalError
from agentloop.safety.redact import redact_secrets

__all__ = ["MAX_FRAMES", "MAX_TEXT", "innermost_frames", "keep_frames"]

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


def keep_frames(error: AgentLoopError) -> None:
    """Give an unexpected exception's ``InternalError`` its ``traceback`` attribute (once)."""
    if not isinstance(error, InternalError) or "traceback" in error.__dict__:
        return
    cause = error.__cause__
    source = cause if cause is not None and cause.__traceback__ is not None else error
    frames = innermost_frames(source)
    if frames:
        error.traceback = frames  # type: ignore[attr-defined]  # data, like every attribute
