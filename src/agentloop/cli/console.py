"""What the command line draws: a run's events as terminal output, and a failure as advice.

One interpreter, ``RunView``, turns events into a few screen operations (a finished line, a
text fragment, a finished reply, a discarded attempt, a status); two screens perform them:

- ``LineScreen`` writes lines and nothing else: streamed text goes out line by line as each
  line completes, there is no spinner and no cursor movement. ``agentloop run --plain`` and any
  output that is not a terminal (a pipe, a log file, a test) get this one, and so does the demo.
- ``LiveScreen`` (a terminal) keeps a rich ``Live`` area at the bottom: the reply being
  streamed, rendered as markdown (its last screenful), and a spinner while the model is awaited
  or tools run. Everything finished is printed above that area and the area is transient, so
  the scrollback holds each line, and the reply, exactly once.

Everything that came from a user or a model is printed as ``rich.text.Text`` (never parsed as
markup) and never as a Python ``repr``. ``failure_paragraph`` says what failed, in which phase,
whether the request was sent and what to try; ``ConsoleLogHandler`` prints the ``agentloop``
logger's warnings as one line each (tracebacks only when asked).
"""

from __future__ import annotations

import json
import logging
import traceback
from asyncio import CancelledError
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markdown import Markdown
from rich.segment import Segment
from rich.spinner import Spinner
from rich.text import Text

from agentloop import events as ev
from agentloop.cli import server_tools
from agentloop.cli.terminal import visible
from agentloop.messages import ToolCallPart, ToolResultPart, Usage
from agentloop.model import INVALID_JSON_KEY
from agentloop.observers import Observer
from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:
    from rich.live import Live

__all__ = [
    "ConsoleLogHandler",
    "ConsoleObserver",
    "LineScreen",
    "LiveScreen",
    "RunView",
    "Screen",
    "call_summary",
    "logs_shown",
]

_ARGS_LIMIT = 70
_PREVIEW_LIMIT = 100


class Screen(Protocol):
    """Where a ``RunView`` draws; each method is one finished thing, or the live state."""

    def line(self, text: Text) -> None:
        """A finished line (a tool call, a result, a retry)."""

    def fragment(self, text: str) -> None:
        """A streamed piece of the reply being written."""

    def reply(self, text: str) -> None:
        """A model reply is complete (whether or not it was streamed)."""

    def discard(self) -> None:
        """The streamed attempt failed: forget the fragments since the last reply."""

    def status(self, label: str | None) -> None:
        """What the run is waiting for (None: nothing, the text is flowing)."""


def _ending(exc_type: object, cancelled: bool) -> Text:
    """The note under a reply the run never finished: interrupted (Ctrl-C, a cancel) or cut."""
    stopped = cancelled or (
        isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt | CancelledError)
    )
    return Text("(interrupted)" if stopped else "(the reply was cut off)", "dim")


def call_summary(call: ToolCallPart) -> str:
    """``read_file(path="src/main.rs")``: the name and the arguments, cut to a short line.

    Arguments that were not a JSON object are shown as the model sent them, marked invalid.
    """
    raw = call.arguments.get(INVALID_JSON_KEY)
    if len(call.arguments) == 1 and isinstance(raw, str):
        args = f"invalid JSON: {raw}"
    else:
        args = ", ".join(
            f"{key}={json.dumps(value, ensure_ascii=False, default=str)}"
            for key, value in call.arguments.items()
        )
    args = visible(redact_secrets(args))  # a key the model put in an argument is never shown
    if len(args) > _ARGS_LIMIT:
        args = args[: _ARGS_LIMIT - 1] + "…"
    return visible(call.name) + f"({args})"


def binary_placeholder(content: str, call: ToolCallPart | None = None) -> str | None:
    """``(binary content: 2,048 characters, image/png)`` for text that is not text, else None.

    A tool that decoded a binary file with replacement characters returns mojibake; a person
    sees its size and type instead (the type guessed from a path among the call's arguments).
    """
    bad = content.count("\ufffd") + content.count("\x00")
    if not bad or (bad * 100 < len(content) and "\x00" not in content):
        return None
    import mimetypes

    paths = [v for v in (call.arguments.values() if call else ()) if isinstance(v, str)]
    kinds = [mimetypes.guess_type(path)[0] for path in paths]
    kind = next((k for k in kinds if k), "unknown type")
    return f"(binary content: {len(content):,} characters, {kind})"


def usage_summary(usage: Usage, cost: float | None) -> str:
    """``1200 in (1000 cache read, 150 cache write), 40 out, cost ~$0.0021`` (or unknown)."""
    cached = [
        f"{count} {label}"
        for count, label in (
            (usage.cache_read_tokens, "cache read"),
            (usage.cache_write_tokens, "cache write"),
        )
        if count
    ]
    inputs = f"{usage.input_tokens} in" + (f" ({', '.join(cached)})" if cached else "")
    price = "unknown" if cost is None else f"~${cost:.4f}"
    return f"{inputs}, {usage.output_tokens} out, cost {price}"


def _result_line(result: ToolResultPart, call: ToolCallPart | None = None) -> Text:
    """A soft error whole (it is what the model read); a success as its first line (redacted)."""
    if result.is_error:
        said = visible(redact_secrets(result.content))
        return Text.assemble("    ", ("soft error", "yellow"), ": ", said)
    body = binary_placeholder(result.content, call) or redact_secrets(result.content.strip())
    body = visible(body)
    if result.media:  # a placeholder: type, size, sha256, never the bytes
        body = " ".join([body, *(m.describe() for m in result.media)]).strip()
    first = body.splitlines()[0] if body else "(empty)"
    cut = len(first) > _PREVIEW_LIMIT or first != body
    return Text.assemble("    ", ("ok", "green"), ": ", first[:_PREVIEW_LIMIT] + " …" * cut)


def _note(label: str, style: str, rest: str) -> Text:
    return Text.assemble("  ", (label, style), " ", rest)


class RunView:
    """Turns a run's events into screen operations; the same for ``run``, the demo and tests."""

    def __init__(self, screen: Screen, *, thinking: str = "brief") -> None:
        self.screen = screen
        self.thinking = thinking  # "brief" (a dimmed first line), "full" or "off"
        self._thought = ""  # this turn's reasoning, drawn before its first reply text or call
        self._streamed_thought = False  # this turn's reasoning came as deltas (drawn from them)
        self._finished: set[str] = set()  # call ids whose result was drawn
        self._fell_to: str | None = None
        self._handlers: dict[type[ev.Event], Callable[[Any], None]] = {
            ev.TurnStarted: lambda e: screen.status("waiting for the model"),
            ev.TextDelta: self._text,
            ev.ThinkingDelta: self._thinking,
            ev.ToolCallDelta: self._call_delta,
            ev.AttemptReset: lambda e: screen.discard(),
            ev.ModelResponded: self._responded,
            ev.ProviderToolCalled: lambda e: screen.line(server_tools.call_line(e.call)),
            ev.ProviderToolReturned: lambda e: screen.line(server_tools.result_line(e.result)),
            ev.ToolCallStarted: self._call_started,
            ev.ToolCallFinished: self._call_finished,
            ev.RetryScheduled: self._retry,
            ev.FellBack: self._fell_back,
            ev.ModelSwitched: self._switched,
            ev.LoopWarning: self._loop,
            ev.BudgetWarning: self._budget,
            ev.Compacted: self._compacted,
            ev.GuardrailChecked: self._guardrail,
            ev.TurnFinished: self._turn_finished,
            ev.RunFinished: lambda e: screen.status(None),
        }

    def apply(self, event: ev.Event) -> None:
        """Draw ``event`` (events of agents run as tools are drawn too; nothing is dropped)."""
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def _text(self, event: ev.TextDelta) -> None:
        self._draw_thought()
        self.screen.status(None)
        self.screen.fragment(event.text)

    def _thinking(self, event: ev.ThinkingDelta) -> None:
        self._thought += event.text
        self._streamed_thought = True
        self.screen.status("the model is thinking")

    def _draw_thought(self, thought: str | None = None) -> None:
        """The turn's reasoning, dimmed: its first line (``brief``), all of it, or nothing."""
        text = (self._thought if thought is None else thought).strip()
        self._thought = ""
        if not text or self.thinking == "off":
            return
        if self.thinking == "brief":
            first = text.splitlines()[0]
            cut = len(first) > _PREVIEW_LIMIT or first != text
            text = first[:_PREVIEW_LIMIT] + " …" * cut
        self.screen.line(Text.assemble(("  thinking: ", "dim italic"), (visible(text), "dim")))

    def _call_delta(self, event: ev.ToolCallDelta) -> None:
        self._draw_thought()
        if event.name:
            self.screen.status(f"the model is calling {event.name}")

    def _responded(self, event: ev.ModelResponded) -> None:
        message = event.response.message
        if self._streamed_thought or not message.thinking:
            self._draw_thought()  # what is left of the deltas (nothing if a call drew them)
        else:  # not streamed: the reasoning arrives with the reply
            self._draw_thought("".join(p.text for p in message.thinking))
        self._streamed_thought = False
        if event.response.text:
            self.screen.reply(event.response.text)
        for line in server_tools.citation_lines(message):  # links to the sources (SPEC 24)
            self.screen.line(line)

    def _call_started(self, event: ev.ToolCallStarted) -> None:
        again = f" (attempt {event.attempt + 1})" if event.attempt else ""
        self.screen.line(_note("→", "cyan", call_summary(event.call) + again))
        self.screen.status(f"running {event.call.name}")

    def _call_finished(self, event: ev.ToolCallFinished) -> None:
        self._finished.add(event.call.id)
        self.screen.line(_result_line(event.result, event.call))
        self.screen.status(None)

    def _turn_finished(self, event: ev.TurnFinished) -> None:
        """Draw the results no attempt reported (a tool name the model was never offered)."""
        turn = event.turn
        for call, result in zip(turn.tool_calls, turn.tool_results, strict=False):
            if call.id not in self._finished:
                self.screen.line(_note("→", "cyan", call_summary(call)))
                self.screen.line(_result_line(result, call))
        self._finished.clear()

    def _retry(self, event: ev.RetryScheduled) -> None:
        what = type(event.error).__name__
        text = f"after {what} (attempt {event.attempt}), waiting {event.wait_seconds:.2f}s"
        self.screen.line(_note("retry", "magenta", text))
        self.screen.status(f"waiting to retry ({what})")

    def _fell_back(self, event: ev.FellBack) -> None:
        self._fell_to = event.to_model
        text = f"{event.from_model} -> {event.to_model} ({type(event.error).__name__})"
        self.screen.line(_note("fallback", "magenta", text))

    def _switched(self, event: ev.ModelSwitched) -> None:
        if event.to_model == self._fell_to:
            return  # the fallback line said it
        self.screen.line(_note("model", "magenta", f"{event.from_model} -> {event.to_model}"))

    def _loop(self, event: ev.LoopWarning) -> None:
        self.screen.line(_note("loop warning", "red", f"{event.pattern} x{event.repetitions}"))

    def _budget(self, event: ev.BudgetWarning) -> None:
        text = f"{event.dimension}: {event.spent:g} of {event.limit:g} spent"
        self.screen.line(_note("budget warning", "red", text))

    def _compacted(self, event: ev.Compacted) -> None:
        text = f"{event.before} -> {event.after} tokens"
        self.screen.line(_note("compacted", "magenta", text))

    def _guardrail(self, event: ev.GuardrailChecked) -> None:
        """One line per trip (a pass says nothing); a rejection the model answers again too."""
        if event.tripped:
            what = "rejected the answer" if event.soft else "tripped"
            text = visible(f"{event.guardrail} {what}: {event.reason or 'no reason given'}")
            self.screen.line(_note("guardrail", "red", text))


class ConsoleObserver(Observer):
    """An observer that draws every event of an agent's runs through a ``RunView``."""

    def __init__(self, screen: Screen) -> None:
        self.view = RunView(screen)

    def on_event(self, event: ev.Event) -> None:
        """Draw the event."""
        self.view.apply(event)


class LineScreen:
    """Lines only: for ``--plain``, pipes and logs; the text streams out line by line.

    ``reply_label`` prefixes each reply that was not streamed (the demo labels its replies).
    """

    def __init__(self, console: Console, *, reply_label: str | None = None) -> None:
        self.console = console
        self.reply_label = reply_label
        self._pending = ""  # the streamed line not yet ended by a newline
        self._streamed = False  # fragments arrived since the last reply
        self.cancelled = False  # set when the run ended cancelled (Ctrl-C, a CancelToken)

    def __enter__(self) -> LineScreen:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if self._streamed:  # the run ended mid-reply: keep what arrived, marked as such
            self._end_pending()
            self.console.print(_ending(exc_type, self.cancelled))

    def line(self, text: Text) -> None:
        """Print a finished line (after any half-streamed line, so they never share one)."""
        self._end_pending()
        self.console.print(text, soft_wrap=True)

    def fragment(self, text: str) -> None:
        """Print each line of the reply as soon as it is complete."""
        self._streamed = True
        *done, self._pending = (self._pending + visible(text)).split("\n")
        for line in done:
            self.console.print(Text(line), soft_wrap=True)

    def reply(self, text: str) -> None:
        """End the streamed reply, or print a reply that was not streamed."""
        if self._streamed:
            self._end_pending()
        elif self.reply_label is not None:
            label = Text.assemble((self.reply_label, "bold"), ": ")
            self.console.print(label + Text(visible(text)), soft_wrap=True)
        else:
            self.console.print(Text(visible(text)), soft_wrap=True)
        self._streamed = False

    def discard(self) -> None:
        """Lines already printed cannot be taken back: say they are void."""
        if self._streamed:
            self._end_pending()
            self.console.print(Text("  (the reply above was cut off; it is retried)", "dim"))
        self._pending, self._streamed = "", False

    def status(self, label: str | None) -> None:
        """Lines only: no spinner."""

    def _end_pending(self) -> None:
        if self._pending:
            self.console.print(Text(self._pending), soft_wrap=True)
        self._pending = ""


class _Tail:
    """The last lines of a renderable that fit the screen (a long reply scrolls, not crops)."""

    def __init__(self, renderable: RenderableType, reserve: int) -> None:
        self.renderable = renderable
        self.reserve = reserve

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options.update(height=None), pad=False)
        keep = max(1, options.size.height - self.reserve)
        for line in lines[-keep:]:
            yield from line
            yield Segment.line()


def _markdown(text: str) -> Markdown:
    """A reply as markdown; a link shows its URL (no OSC 8 link hides where it points)."""
    return Markdown(text, hyperlinks=False)


class LiveScreen:
    """A terminal: finished lines above, the streaming reply and a spinner in a live area."""

    def __init__(self, console: Console) -> None:
        from rich.live import Live

        self.console = console
        self._text = ""
        self._status: str | None = None
        self._spinner = Spinner("dots", style="cyan")
        self.cancelled = False  # set when the run ended cancelled (Ctrl-C, a CancelToken)
        self.live: Live = Live(
            console=console, transient=True, refresh_per_second=12, get_renderable=self._render
        )

    def __enter__(self) -> LiveScreen:
        self.live.start()
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        partial = self._text
        self.live.stop()
        if partial:  # the run ended mid-reply: keep what arrived, marked as such
            self.console.print(_markdown(partial), soft_wrap=False)
            self.console.print(_ending(exc_type, self.cancelled))

    def line(self, text: Text) -> None:
        """Print above the live area (wrapped by rich: the live area's height must be exact)."""
        self.live.console.print(text, soft_wrap=False)

    def fragment(self, text: str) -> None:
        """Grow the live reply."""
        self._text += visible(text)

    def reply(self, text: str) -> None:
        """Print the finished reply once, as markdown, and empty the live area."""
        self._text = ""
        self.live.refresh()  # a print redraws the last frame: it must not hold the reply
        self.live.console.print(_markdown(visible(text)), soft_wrap=False)

    def discard(self) -> None:
        """Drop the partial reply of a failed attempt."""
        self._text = ""
        self.live.refresh()

    def status(self, label: str | None) -> None:
        """Show (or hide) the spinner with ``label``."""
        self._status = label
        if label is not None:
            self._spinner.update(text=Text(label, style="dim"))
        self.live.refresh()

    def _render(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self._text:
            parts.append(_Tail(_markdown(self._text), reserve=3 if self._status else 2))
        if self._status is not None:
            parts.append(self._spinner)
        return Group(*parts)


class ConsoleLogHandler(logging.Handler):
    """The ``agentloop`` logger's records as one line each; tracebacks only with ``debug``."""

    def __init__(self, line: Callable[[Text], None], *, debug: bool = False) -> None:
        super().__init__(logging.WARNING)
        self._line = line
        self.debug = debug

    def emit(self, record: logging.LogRecord) -> None:
        """Print ``warning: <message>`` (``error:`` for errors)."""
        try:
            label = record.levelname.lower()
            text = Text.assemble("  ", (f"{label}:", "yellow"), " ", visible(record.getMessage()))
            if self.debug and record.exc_info and record.exc_info[1] is not None:
                text.append("\n" + "".join(traceback.format_exception(record.exc_info[1])))
            self._line(text)
        except Exception:
            self.handleError(record)


@contextmanager
def logs_shown(line: Callable[[Text], None], *, debug: bool = False) -> Iterator[None]:
    """Print the ``agentloop`` logger's warnings through ``line`` while the block runs."""
    handler = ConsoleLogHandler(line, debug=debug)
    logger = logging.getLogger("agentloop")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
