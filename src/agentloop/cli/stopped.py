"""``agentloop runs show``'s table of a run's hard error: class, message and typed attributes.

Apart from ``agentloop.cli.runs`` (listing and turns) because an error has its own shapes: the
attempt log one line an attempt, an unexpected exception's innermost frames, seconds for a
person. Every value is stored text: secrets redacted, control characters shown, markup escaped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloop.cli.terminal import visible
from agentloop.errors import AgentLoopError, AttemptRecord
from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["escape_said", "show_error"]


def show_error(console: Console, error: AgentLoopError) -> None:
    """The table of ``error``: class, message, recoverability, then each typed attribute."""
    from rich.table import Table

    table = Table("attribute", "value", title=f"stop_reason: {type(error).__name__}")
    table.add_row("class", type(error).__name__)
    table.add_row("message", escape_said(str(error)))
    table.add_row("recoverability", error.recoverability)
    for name, value in sorted(error.attributes().items()):
        if name == "attempt_log":
            value = "\n".join(_attempt(record) for record in value) or "()"
        elif name == "traceback" and isinstance(value, list):
            value = _frames(value)
        elif isinstance(value, float):
            value = _seconds(value) if name.endswith(("_seconds", "_after")) else f"{value:g}"
        table.add_row(escape_said(name), escape_said(str(value)))
    console.print(table)


def _frames(frames: list[object]) -> str:
    """An unexpected exception's stored innermost frames, innermost last, one line each."""
    lines = [
        f"{frame.get('file', '?')}:{frame.get('line', '?')} in {frame.get('function', '?')}: "
        f"{frame.get('code', '')}"
        for frame in frames
        if isinstance(frame, dict)
    ]
    return redact_secrets("\n".join(lines)) or "()"


def _attempt(record: AttemptRecord) -> str:
    phase = "-" if record.phase is None else str(record.phase)
    wait = f", then waited {_seconds(record.wait_seconds)}" if record.wait_seconds > 0 else ""
    return (
        f"#{record.attempt} {record.error_type} status={record.status_code} phase={phase} "
        f"sent={record.request_sent} took {_seconds(record.duration_seconds)}{wait}"
    )


def _seconds(value: float) -> str:
    """Seconds rounded for reading: 0.25s, 3.1s, 42s."""
    if value >= 10:
        return f"{value:.0f}s"
    if value >= 1:
        return f"{value:.1f}s"
    return f"{value:.2f}s"


def escape_said(text: str) -> str:
    """Stored text for a markup string: rich markup escaped, secrets redacted, controls shown."""
    from rich.markup import escape

    return escape(visible(redact_secrets(text)))
