r"""The terminal boundary: text from outside never reaches the screen as a control sequence.

Model replies, files a tool read, tool arguments, a provider's error message and stored runs can
hold escape sequences: a window title, clear screen, OSC 8 hyperlinks, OSC 52 clipboard writes,
colours. A terminal obeys them, so a model could wipe the tool calls a person is reviewing or
fill their clipboard. ``visible`` shows every C0 and C1 control character (and DEL) except
newline and tab as text, ``\x1b``; a CR/LF line end is a newline.

``TerminalConsole`` is the one console the command line draws with: it passes every text
segment rich renders through ``visible``, whatever path the text took (a table cell, markdown,
a log line, an error paragraph). Rich's own styling and cursor movement are not text segments
(styles are written when the buffer is flushed; cursor moves are control segments), so they
pass. Callers also apply ``visible`` to text before rich lays it out, where the layout must be
exact (the live area's height): the console's pass is the guarantee, not the only use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

__all__ = ["TerminalConsole", "visible"]

_CONTROL = re.compile("\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    return "\n" if char == "\r\n" else f"\\x{ord(char):02x}"


def visible(text: str) -> str:
    r"""``text`` with each control character but newline and tab shown as ``\xNN``."""
    return _CONTROL.sub(_shown, text)


class TerminalConsole(Console):
    """A rich console whose every text segment is made ``visible`` before it is written."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        """Rich's rendering, with control characters in text segments shown, not obeyed."""
        for segment in super().render(renderable, options):
            text, style, control = segment
            if control is None and _CONTROL.search(text):
                yield Segment(visible(text), style)
            else:
                yield segment
