"""A paused run at the command line (SPEC 17): what it waits on, how to answer, the answers.

Three things the commands share:

- **Showing** the pending calls (call id, tool, kind, the hook's message, the arguments
  redacted) and **how to continue**: the ``agentloop continue`` command with one flag per
  call, and the Python call (``Agent.resume`` then ``continue_run(decisions=...)``).
- **Asking** on a terminal, one call at a time: ``y``/``n``/``edit`` for a call that needs
  approval (``n`` then asks a reason for the model, ``edit`` a JSON object of new arguments,
  asked again until it is one), the answer text for an external call (an empty answer denies).
  End of input (Ctrl-D) leaves the run paused.
- **Reading** decisions from ``agentloop continue``'s flags: ``--approve ID``, ``--deny
  ID[=REASON]``, ``--edit ID=JSON``, ``--answer ID=TEXT``.

Everything from a model or a store is printed through ``visible`` (control characters shown),
as ``rich.text.Text`` (never markup); arguments go through the package's one redactor first.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO, cast

from rich.text import Text

from agentloop.cli.terminal import visible
from agentloop.errors import InvalidInput
from agentloop.pausing import Answer, Approve, Decision, Deny, Edit, PendingCall
from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:
    from rich.console import Console

    from agentloop import Agent
    from agentloop.run import Run

__all__ = [
    "PAUSED_EXIT",
    "ask_decisions",
    "asking",
    "continue_flags",
    "continue_lines",
    "decisions_from_flags",
    "pending_lines",
    "reader",
    "recorded",
    "shown_arguments",
]

PAUSED_EXIT = 4
"""The exit status of ``agentloop run`` / ``continue`` when the run is left paused."""

Read = Callable[[Text], str]
"""Print a prompt and return the line typed (``EOFError`` at end of input)."""


def shown_arguments(arguments: Mapping[str, Any]) -> str:
    """Arguments as JSON for a person: secrets redacted, control characters shown."""
    text = json.dumps(dict(arguments), ensure_ascii=False, default=str)
    return visible(redact_secrets(text))


def _call_label(pending: PendingCall) -> Text:
    where = f" (in {' > '.join(pending.path)})" if pending.path else ""
    return Text.assemble(
        ("  ", ""),
        (visible(pending.id), "bold"),
        "  ",
        (visible(pending.call.name), "cyan"),
        f"  {pending.kind}{visible(where)}  ",
        shown_arguments(pending.call.arguments),
    )


def pending_lines(pending: Sequence[PendingCall]) -> list[Text]:
    """``paused: 2 calls wait for a decision`` and one line per call (its message under it)."""
    count = f"{len(pending)} call{'s' * (len(pending) != 1)} wait{'s' * (len(pending) == 1)}"
    lines = [Text.assemble(("paused", "bold magenta"), f": {count} for a decision")]
    for call in pending:
        lines.append(_call_label(call))
        if call.message:
            lines.append(Text.assemble("      ", ("message: ", "dim"), visible(call.message)))
    return lines


def _example_flags(pending: Sequence[PendingCall]) -> list[str]:
    return [
        f"--approve {shlex.quote(p.id)}"
        if p.kind == "approval"
        else f"--answer {shlex.quote(p.id + '=TEXT')}"
        for p in pending
    ]


def _example_decisions(pending: Sequence[PendingCall]) -> str:
    chosen = (
        f"{json.dumps(p.id)}: {'Approve()' if p.kind == 'approval' else 'Answer(...)'}"
        for p in pending
    )
    return "{" + ", ".join(chosen) + "}"


def continue_lines(
    pending: Sequence[PendingCall],
    run_id: str,
    session_id: str,
    command: Iterable[str],
    *,
    stored: bool,
) -> list[Text]:
    """How to continue: the ``agentloop continue`` command and the Python call.

    ``command`` is what comes after ``agentloop continue ID`` besides the decisions (provider,
    model, tools, store flags). A run that was not ``stored`` cannot be continued from another
    process.
    """
    if not stored:
        return [Text("the run was not stored (--no-store): it cannot be continued", "yellow")]
    argv = ["agentloop", "continue", shlex.quote(run_id[:12]), *command, *_example_flags(pending)]
    python = (
        f"agent = Agent.resume({json.dumps(session_id)}, store=..., client=..., tools=...); "
        f"await agent.continue_run(decisions={_example_decisions(pending)})"
    )
    return [
        Text(
            "to continue (one decision per call: --approve ID, --edit ID=JSON, "
            "--deny ID[=REASON], --answer ID=TEXT):",
            "dim",
        ),
        Text("  " + visible(" ".join(argv))),
        Text("or in Python:", "dim"),
        Text("  " + visible(python)),
        Text("or abandon it (finalized as Cancelled):", "dim"),
        Text("  " + visible(" ".join(["agentloop runs cancel", argv[2], *_store_flag(command)]))),
    ]


def _store_flag(command: Iterable[str]) -> list[str]:
    """``--store X`` when the command names a store (``runs cancel`` needs nothing else)."""
    flags = list(command)
    at = flags.index("--store") if "--store" in flags else -1
    return flags[at : at + 2] if at >= 0 else []


def continue_flags(args: argparse.Namespace, default_store: str) -> list[str]:
    """The flags ``agentloop continue`` needs to rebuild this agent (all but the decisions)."""
    if getattr(args, "agent", None):  # the application's own agent: nothing else builds it
        flags = ["--agent", args.agent]
    else:
        flags = ["--provider", args.provider]
    for name in ("model", "base_url"):
        if getattr(args, name):
            flags += [f"--{name.replace('_', '-')}", getattr(args, name)]
    for spec in args.tools or ():
        flags += ["--tools", spec]
    if getattr(args, "deps", None):
        flags += ["--deps", args.deps]
    if args.store != default_store:
        flags += ["--store", args.store]
    return [shlex.quote(flag) for flag in flags]


def recorded(run: Run[Any]) -> bool:
    """Whether a continue that a crash cut off recorded decisions for every pending call."""
    last = run.decisions[-1].get("decisions", {}) if run.decisions else {}
    return bool(last) and all(p.id in last for p in run.pending)


def asking(console: Console) -> bool:
    """Decisions are asked for when a person is there: stdin and stdout are a terminal."""
    return sys.stdin.isatty() and console.is_terminal


def reader(console: Console) -> Read:
    """``Read`` on ``console``: the prompt printed as text, the line typed returned.

    Ctrl-C at a prompt raises ``KeyboardInterrupt`` there (exit 130, the run stays paused):
    inside ``asyncio.run`` the first Ctrl-C only cancels the main task, which a blocking read
    never notices, so the default handler is put back while a person types, and the line is
    waited for in slices (``_TypedLine``).
    """

    def read(prompt: Text) -> str:
        if threading.current_thread() is not threading.main_thread():
            return console.input(prompt)
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            typed = cast("TextIO | None", _TypedLine.on(sys.stdin))  # rich calls readline()
            return console.input(prompt, stream=typed)
        finally:
            signal.signal(signal.SIGINT, previous)

    return read


class _TypedLine:
    """A terminal's next line, waited for in slices so that a Ctrl-C is never lost.

    ``input()`` blocks in C: a Ctrl-C whose signal lands after Python's last check and before
    the read starts is only noted, and the read waits for a line nobody types (seen under
    load). Waiting in ``select`` slices of 0.1 s lets Python act on a noted signal. A terminal
    in canonical mode hands one line per read, as ``input()`` gets it; end of input (Ctrl-D)
    raises ``EOFError``, as ``input()`` does. Where ``select`` cannot wait on a terminal
    (Windows), ``input()`` is used.
    """

    def __init__(self, fd: int, encoding: str) -> None:
        self.fd, self.encoding = fd, encoding

    @classmethod
    def on(cls, stdin: Any) -> _TypedLine | None:
        """The typed line on ``stdin``; None (rich calls ``input()``) without a usable fd."""
        if sys.platform == "win32":
            return None
        try:
            return cls(stdin.fileno(), stdin.encoding or "utf-8")
        except (AttributeError, OSError, ValueError):
            return None

    def readline(self) -> str:
        """The line typed, without its newline; ``EOFError`` at end of input."""
        while not select.select([self.fd], [], [], 0.1)[0]:
            pass
        data = os.read(self.fd, 65536)
        if not data:
            raise EOFError
        return data.decode(self.encoding, errors="replace").removesuffix("\n")


def ask_decisions(pending: Sequence[PendingCall], read: Read) -> dict[str, Decision] | None:
    """Ask a person for one decision per pending call; None when the input ended."""
    decisions: dict[str, Decision] = {}
    try:
        for call in pending:
            ask = _ask_approval if call.kind == "approval" else _ask_answer
            decisions[call.id] = ask(call, read)
    except EOFError:
        return None
    return decisions


def _ask_approval(call: PendingCall, read: Read) -> Decision:
    head = Text.assemble((visible(call.call.name), "cyan"), " needs your approval")
    head.append(f" ({visible(call.id)}): {shown_arguments(call.call.arguments)}")
    if call.message:
        head.append("\n  " + visible(call.message))
    question = Text.assemble(head, "\n", ("approve? [y/n/edit] ", "bold"))
    while True:
        choice = read(question).strip().lower()
        if choice in ("y", "yes"):
            return Approve()
        if choice in ("n", "no"):
            reason = read(Text("reason for the model (Enter: none): ", "bold")).strip()
            return Deny(reason or None)
        if choice in ("e", "edit"):
            return Edit(_ask_arguments(read))
        question = Text("please answer y, n or edit: ", "bold")


def _ask_arguments(read: Read) -> dict[str, Any]:
    prompt = Text("new arguments, a JSON object: ", "bold")
    while True:
        text = read(prompt)
        try:
            value = json.loads(text)
        except ValueError as exc:
            prompt = Text(f"not JSON ({exc}); a JSON object: ", "bold")
            continue
        if isinstance(value, dict):
            return value
        prompt = Text(f"a JSON object, not a {type(value).__name__}: ", "bold")


def _ask_answer(call: PendingCall, read: Read) -> Decision:
    head = Text.assemble((visible(call.call.name), "cyan"), " is yours to answer")
    head.append(f" ({visible(call.id)}): {shown_arguments(call.call.arguments)}")
    if call.message:
        head.append("\n  " + visible(call.message))
    answer = read(Text.assemble(head, "\n", ("answer (Enter alone denies): ", "bold")))
    return Answer(answer) if answer.strip() else Deny()


def _split(flag: str, value: str, *, needs_value: bool) -> tuple[str, str | None]:
    call_id, sep, rest = value.partition("=")
    if not call_id or (needs_value and not sep):
        form = f"{flag} ID=..." if needs_value else f"{flag} ID[=REASON]"
        raise InvalidInput(f"{flag} takes {form}, got {value!r}")
    return call_id, rest if sep else None


def decisions_from_flags(
    approve: Sequence[str], deny: Sequence[str], edit: Sequence[str], answer: Sequence[str]
) -> dict[str, Decision]:
    """The decisions ``agentloop continue``'s flags give (``InvalidInput`` on a malformed one)."""
    decisions: dict[str, Decision] = {}

    def add(call_id: str, decision: Decision) -> None:
        if call_id in decisions:
            raise InvalidInput(f"two decisions for call {call_id!r}: give one per call")
        decisions[call_id] = decision

    for call_id in approve:
        add(call_id, Approve())
    for value in deny:
        call_id, reason = _split("--deny", value, needs_value=False)
        add(call_id, Deny(reason or None))
    for value in edit:
        call_id, text = _split("--edit", value, needs_value=True)
        try:
            arguments = json.loads(text or "")
        except ValueError as exc:
            raise InvalidInput(f"--edit {call_id}: not JSON ({exc})") from exc
        if not isinstance(arguments, dict):
            raise InvalidInput(f"--edit {call_id}: the arguments must be a JSON object")
        add(call_id, Edit(arguments))
    for value in answer:
        call_id, text = _split("--answer", value, needs_value=True)
        add(call_id, Answer(text or ""))
    return decisions


async def check_tools(agent: Agent, run: Run, decisions: Mapping[str, Decision]) -> None:
    """``InvalidInput`` naming ``--tools`` when an approval needs a tool this agent lacks.

    And naming ``--agent`` when the paused turn staged memory writes this agent cannot apply.
    """
    from agentloop.engine.pause import check_continuable
    from agentloop.engine.pause_tools import check_memory

    try:
        check_memory(agent, run)
    except InvalidInput as error:  # the command line builds no memory: the app's agent has it
        raise InvalidInput(
            f"{error.message}. Give agentloop continue the application's agent: --agent "
            "MODULE:NAME (built with memory=), or agentloop runs cancel the run"
        ) from error
    try:
        await check_continuable(agent, run.pending, decisions, run.last_agent)
    except InvalidInput as error:
        raise InvalidInput(
            f"{error.message}. Give agentloop continue the tool: --tools MODULE:NAME (the "
            "module that defines it, as given to agentloop run), or --deny the call"
        ) from error
