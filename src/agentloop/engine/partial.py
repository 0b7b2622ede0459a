"""Partial typed output (SPEC 18): the answer parsed so far, while it streams.

A typed answer streams as the arguments of the ``final_result`` call (``"tool"`` mode, in
``ToolCallDelta`` fragments) or as JSON in the reply's text (``"native"`` and ``"text"`` mode,
in ``TextDelta`` fragments). ``PartialJson`` follows one such text and parses it with jiter's
partial mode (``pydantic_core.from_json(..., allow_partial="trailing-strings")``); ``Partials``
drives it from a model call's stream events and emits ``PartialOutput`` each time the value grew.

What a partial value looks like, so that the sequence only grows:

- an object's keys only grow (a key appears when its value starts), an array only lengthens,
  a string being written grows by its end, and a value before the last never changes again;
- a number at the very end of the text is held back until something follows it (``1`` could
  still become ``12``), and a partial ``true``/``false``/``null`` is left out;
- for a type the engine wraps in one field (``int``, ``list[str]``: ``{"result": ...}`` in tool
  mode) the value is the unwrapped one.

Cost: jiter has no resumable parser, so each parse reads the whole text so far; parsing on every
fragment would cost O(n^2) on a long answer. A parse runs when the text grew by at least
``1/GROWTH`` of its length since the last one (always while it is under ``EAGER_CHARS``), so
the parses of an answer of n characters read at most about ``(GROWTH + 1) * n`` characters
together, past its eager start: linear (measured in ``bench/partial_output.py``: 10 ms for a
100 KB answer in 8-character fragments, where a parse per fragment takes 1.5 s). A short
answer gets a partial for every fragment; a long one every few hundred characters. A fragment
between parses is only appended; a parse reads the quotes that arrived since the last one (to
know whether the text ends inside a string), once each.

When the stream ends, the reply is validated as the run will validate it; an answer that will be
accepted gets a last ``PartialOutput`` equal to the validated output (``model_dump()`` of a
pydantic model, the plain dict of a dataclass or TypedDict) unless the last one already was.
A run that does not stream, or an untyped one, builds none of this.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final

from pydantic_core import from_json

from agentloop import events as ev
from agentloop.engine.output import FINAL_RESULT, InvalidOutput, OutputType
from agentloop.model import ModelResponse, StreamEvent
from agentloop.observers import EventBus
from agentloop.run import TRUNCATION_REASONS

__all__ = ["EAGER_CHARS", "GROWTH", "UNCHANGED", "PartialJson", "Partials"]

EAGER_CHARS: Final = 2048
"""Below this length the text is parsed after every fragment."""
GROWTH: Final = 16
"""Above ``EAGER_CHARS``, a parse waits until the text grew by 1/GROWTH of its length."""

UNCHANGED: Final[Any] = object()
"""What ``PartialJson.feed`` returns when the value did not grow (or was not parsed)."""

logger = logging.getLogger("agentloop")

_QUOTE_OR_ESCAPE = re.compile(r'["\\]')
_NUMBER_TAIL = "0123456789+-.eE"


class PartialJson:
    """The JSON value of a text that arrives in fragments, parsed so far.

    ``fenced``: the text may open with a Markdown fence (```` ```json ````), as a JSON answer
    in a reply's text may; it is skipped.
    """

    __slots__ = (
        "_chunks",
        "_fenced",
        "_in_string",
        "_last",
        "_length",
        "_parsed_at",
        "_scanned",
        "_start",
    )

    def __init__(self, *, fenced: bool = False) -> None:
        self._fenced = fenced
        self.reset()

    def reset(self) -> None:
        """Forget everything (the stream started over)."""
        self._chunks: list[str] = []
        self._length = 0
        self._parsed_at = 0
        self._start: int | None = None if self._fenced else 0
        self._scanned = 0
        self._in_string = False
        self._last: Any = UNCHANGED

    def feed(self, fragment: str) -> Any:
        """Take one fragment: the value when it grew, else ``UNCHANGED``."""
        if not fragment:
            return UNCHANGED
        self._chunks.append(fragment)
        length = self._length = self._length + len(fragment)
        if length > EAGER_CHARS and (length - self._parsed_at) * GROWTH < length:
            return UNCHANGED
        return self._parse()

    def flush(self) -> Any:
        """Parse what arrived since the last parse: the value when it grew, else ``UNCHANGED``."""
        if self._parsed_at == self._length:
            return UNCHANGED
        return self._parse()

    def _text(self) -> str:
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    def _find_start(self, text: str) -> bool:
        """Skip leading space and an opening fence; True once the JSON has begun."""
        body = text.lstrip()
        if not body or ("```".startswith(body) and len(body) < 3):
            return False
        start = len(text) - len(body)
        if body.startswith("```"):
            newline = text.find("\n", start)
            if newline < 0:
                return False
            start = newline + 1
        self._start = self._scanned = start
        return True

    def _follow_quotes(self, text: str) -> None:
        """Read the quotes after ``_scanned``: does the text end inside a string?"""
        at, end, inside = self._scanned, len(text), self._in_string
        while True:
            if not inside:
                quote = text.find('"', at)
                if quote < 0:
                    at = end
                    break
                inside, at = True, quote + 1
                continue
            found = _QUOTE_OR_ESCAPE.search(text, at)
            if found is None:
                at = end
                break
            if found.group() == '"':
                inside, at = False, found.end()
            elif found.end() == end:  # an escape not complete yet: read it again next time
                at = found.start()
                break
            else:
                at = found.end() + 1
        self._scanned, self._in_string = at, inside

    def _parse(self) -> Any:
        self._parsed_at = self._length
        text = self._text()
        if self._start is None and not self._find_start(text):
            return UNCHANGED
        self._follow_quotes(text)
        body = text[self._start :] if self._start else text
        if not self._in_string:
            cut = body.rstrip(_NUMBER_TAIL)
            if len(cut) < len(body) and not cut[-1:].isalpha():  # a number still being written
                body = cut
        if not body.strip():
            return UNCHANGED
        try:
            value = from_json(body, allow_partial="trailing-strings")
        except ValueError:  # not JSON (prose, a closing fence after the value): keep the last
            return UNCHANGED
        if self._last is not UNCHANGED and value == self._last:
            return UNCHANGED
        self._last = value
        return value


class Partials:
    """A streamed model call's ``PartialOutput`` events for one typed answer.

    ``tool``: the answer is the ``final_result`` call's arguments (``"tool"`` mode); else the
    reply's text (``"native"``/``"text"`` mode).
    """

    __slots__ = ("_bus", "_index", "_json", "_output", "_run_id", "_sent", "_tool", "_turn")

    def __init__(
        self, output: OutputType[Any], tool: bool, bus: EventBus, run_id: str, turn: int
    ) -> None:
        self._output = output
        self._tool = tool
        self._bus = bus
        self._run_id = run_id
        self._turn = turn
        self._json = PartialJson(fenced=not tool)
        self._index: int | None = None
        self._sent: Any = UNCHANGED

    def on_event(self, event: StreamEvent) -> None:
        """One stream event (already forwarded as the engine's event)."""
        kind = event.kind
        if kind == "tool_call_delta":
            if not self._tool:
                return
            if self._index is None and event.name == FINAL_RESULT:
                self._index = event.index
            if event.index == self._index:
                self._grew(self._json.feed(event.arguments))
        elif kind == "text_delta":
            if not self._tool and not self._output.is_text:  # str: the text is the answer
                self._grew(self._json.feed(event.text))
        elif kind == "attempt_reset":
            self._json.reset()
            self._index = None
            self._sent = UNCHANGED

    def finish(self, response: ModelResponse) -> None:
        """The stream ended with ``response``: the last partial, then the accepted answer."""
        self._grew(self._json.flush())
        value = self._accepted(response)
        if value is not UNCHANGED and (self._sent is UNCHANGED or value != self._sent):
            self._emit(value)

    def _grew(self, value: Any) -> None:
        if value is UNCHANGED or (self._tool and not isinstance(value, dict)):
            return  # the arguments of a call are an object: anything else is no answer
        if self._tool and self._output.wrapped:
            if "result" not in value:
                return
            value = value["result"]
            if self._sent is not UNCHANGED and value == self._sent:
                return
        self._emit(value)

    def _emit(self, value: Any) -> None:
        self._sent = value
        if self._bus.active:
            self._bus.emit(ev.PartialOutput(self._run_id, self._turn, value))

    def _accepted(self, response: ModelResponse) -> Any:
        """The validated answer as plain data, as the run will read it; else ``UNCHANGED``."""
        if response.stop_reason in TRUNCATION_REASONS:
            return UNCHANGED
        output = self._output
        try:
            if self._tool:
                finals = [c for c in response.tool_calls if c.name == FINAL_RESULT]
                if not finals:
                    return UNCHANGED
                value = output.from_arguments(finals[0].arguments)
            elif response.tool_calls:  # calls to run: this reply is not the answer
                return UNCHANGED
            else:
                value = output.from_text(response.text)
        except InvalidOutput:
            return UNCHANGED
        try:
            return output.adapter.dump_python(value)
        except Exception as exc:  # a serializer's own bug: the run goes on without this event
            logger.warning(
                "the output type's serializer raised; no final PartialOutput", exc_info=exc
            )
            return UNCHANGED
