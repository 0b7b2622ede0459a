"""Append-only conversations (SPEC 28): the base built once, every later change an entry at the end.

The newest Claude models bind each thinking block to everything before it, so on a conversation
whose agent can call such a model (``agentloop.model.is_append_only``) the engine never rewrites
what it sent. The conversation opens with its **base**, ``Message("system", (TextPart(<text>),
ToolChangePart(added=<tools>)))``, built at its first request and kept first in the history
(``Session.history``, ``run.conversation``, the store). Every request sends the base as its
top-level ``system`` and ``tools`` (``ModelRequest.system``/``tools``; ``messages`` start after
it), so those bytes never change.

**The one per-call step** (``AppendOnly.record``, run before the context check of every model
call): it reads what this call wants, the instruction text (``RunState.system``) and the offered
tools (``RunState.offer.specs``), compares them with those in effect (the base, then every entry
after it) and appends each difference as one ``Message("system", ...)`` entry: a changed text in
full, a changed tool list as a ``ToolChangePart`` (tools by name and canonical JSON, order
ignored; a changed definition is a removal and an addition). No difference, no entry. A feature
that changes the instructions or the tools mid-conversation (a prompt function, an MCP list
change, toolsets, tool search, memory recall, a handoff) sets ``state.system`` / ``state.offer``
before the call and lets this step record it; it never edits a request or an earlier message.
Identity checks come first, so an unchanged call costs two ``is`` comparisons.

A history without a base (a seeded one, or a session that ran on another model) starts a new
conversation: the base goes first and the history's thinking parts are dropped, never sent.
``kept_after_compaction`` holds compaction to the same rules: the base and every entry stay, and
every kept message after the first one the compactor changed loses its thinking.

Runs on a model that is not append-only never reach this module (``RunState.appendonly`` None):
their requests are built as before, byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentloop._tool_parts import apply_changes, spec_key
from agentloop.engine.kept import edited
from agentloop.messages import Message, TextPart, ThinkingPart, ToolChangePart
from agentloop.model import ToolSpec, compacts_on_server

__all__ = [
    "SERVER_COMPACTION_FLOOR",
    "AppendOnly",
    "is_base",
    "kept_after_compaction",
    "without_thinking",
]

SERVER_COMPACTION_FLOOR = 50_000
"""The least trigger Anthropic's server-side compaction takes (provider-rules 2026, rule 8)."""


def is_base(message: Message) -> bool:
    """Whether ``message`` is an append-only conversation's base (a system tool change)."""
    return message.role == "system" and any(type(p) is ToolChangePart for p in message.parts)


def base_message(text: str | None, tools: Sequence[ToolSpec]) -> Message:
    """The base of a new conversation: its text, then its tools (always a ``ToolChangePart``)."""
    parts: list[Any] = [TextPart(text)] if text else []
    parts.append(ToolChangePart(added=tuple(tools)))
    return Message("system", tuple(parts))


def without_thinking(message: Message) -> Message | None:
    """``message`` without its thinking parts (itself when it has none; None when left empty)."""
    if not any(type(p) is ThinkingPart for p in message.parts):
        return message
    parts = tuple(p for p in message.parts if type(p) is not ThinkingPart)
    return Message(message.role, parts, phase=message.phase) if parts else None


class AppendOnly:
    """What one append-only run has in effect: its conversation's base and the entries since.

    ``base_text``/``base_tools``: what every request sends as ``system``/``tools``;
    ``text``/``tools``: the instruction text and the offered tools in effect now. Its methods
    take the session (``Conversation``) and the run's ``RunState`` untyped: the state holds
    this object, so this module imports neither (no import circle).
    """

    __slots__ = (
        "base_text", "base_tools", "compact_at", "opening", "recall", "sub", "text", "tools"
    )  # fmt: skip

    def __init__(self) -> None:
        self.compact_at: int | None = None
        """Server-side compaction's trigger in tokens (``RunConfig.compaction``), else None."""
        self.base_text: str | None = None
        self.base_tools: tuple[ToolSpec, ...] = ()
        self.text: str | None = None
        self.tools: tuple[ToolSpec, ...] = ()
        self.recall: str | None = None
        """This run's memory recall block (SPEC 27), joined to the instructions after the base."""
        self.sub: tuple[str | None, Sequence[ToolSpec]] | None = None
        """A continued run's filtered handoff (SPEC 26): its conversation's base text and tools."""
        self.opening = False
        """A filtered handoff opened a conversation whose first request has not been built yet:
        its base takes the tools that request offers (``record``)."""

    def open(self, session: Any, state: Any) -> None:
        """Continue the conversation the history opens with, or open a new one (run start).

        A new one puts its base first in the history (the store rewrites it at finalize) and
        drops the seeded history's thinking; the context guard measures the transcript again.
        The run's recall block (``recall``, SPEC 27) joins ``state.system`` only now, so the base
        never holds it: the per-call step appends it as an entry after the run's input.
        """
        history = session._history
        if history and is_base(history[0]):
            self._read(state.transcript)  # a continued run's own entries count too
            if self.sub is not None:  # a paused filtered handoff's own conversation goes on
                self._go_on(*self.sub, state.sent())  # its entries are the view's (engine.views)
        else:
            self._new(session, state)
        if self.recall:  # SPEC 27: this run's recall joins the instructions after the base
            text = f"{state.system}\n\n{self.recall}" if state.system else self.recall
            state.system = text

    def _new(self, session: Any, state: Any) -> None:
        """A new conversation: its base first, the seeded history's thinking dropped."""
        history = session._history
        base = base_message(state.system, state.offer.specs)
        kept = [m for m in map(without_thinking, history) if m is not None]
        history[:] = [base, *kept]
        edited(session, 0)  # earlier runs' conversations stay as they were (engine.kept)
        state.transcript = [*history, *state.transcript[state.base :]]
        state.base = state.boundary = len(history)
        session._measured = state.measured = None
        if session._recorder is not None:
            session._recorder.rewrite_history()
        self._read(state.transcript)
        state.guard.start(state.transcript, ())

    def rebase(self, text: str | None, tools: Sequence[ToolSpec], *, opening: bool = False) -> None:
        """A new conversation from here (a filtered handoff, SPEC 26): ``text``/``tools`` its base.

        Its requests send them as ``system``/``tools``; later changes are entries against them.
        ``opening``: ``tools`` are what the receiver's registry holds at the handoff; its first
        request's offer (its toolsets' tools, picked per call, SPEC 22) replaces them in the
        base, since tools known when a conversation starts belong to its base (``record``).
        """
        self.base_text = self.text = text
        self.base_tools = self.tools = tuple(tools)
        self.opening = opening

    def measure(self, state: Any) -> None:
        """The run's context guard measures what is sent anew, over this conversation's base."""
        system, specs = self.base_text, self.base_tools
        base = base_message(system, specs)  # checked first, so the view's entries are entries
        state.guard.restart(state.sent(), system, specs, (base,))

    def attach(self, state: Any, config: Any) -> None:
        """Set the run's context guard up for this conversation (when the run's state is made).

        The base travels in the transcript, so the guard counts no system prompt or tools of
        its own. ``RunConfig.compaction="auto"`` on a model that compacts on its provider's
        side asks for that past ``compact_threshold`` x ``context_window`` (at least 50,000
        tokens, the provider's floor), and the guard never runs the local compactor.
        """
        state.guard.in_transcript = True
        if config.compaction != "auto" or not config.context_window:
            return
        if compacts_on_server(state.client):
            threshold = int(config.compact_threshold * config.context_window)
            self.compact_at = max(SERVER_COMPACTION_FLOOR, threshold)
            state.guard.server_side = True

    def _read(self, history: Sequence[Message]) -> None:
        """The base, then each entry: the text and tools in effect at the transcript's end."""
        base = history[0]
        self.base_text = base.text or None
        changes = [p for p in base.parts if type(p) is ToolChangePart]
        self.base_tools = apply_changes((), changes)
        self._effect(self.base_text, changes, history[1:])

    def _go_on(self, text: str | None, tools: Sequence[ToolSpec], after: Sequence[Message]) -> None:
        """A filtered handoff's conversation: its base, then the entries since the handoff."""
        self.rebase(text, tools)
        self._effect(text, [ToolChangePart(added=tuple(tools))], after)

    def _effect(
        self, text: str | None, changes: list[ToolChangePart], after: Sequence[Message]
    ) -> None:
        """What is in effect: ``text``/``changes``, then each system entry of ``after``."""
        for message in after:
            if message.role != "system":
                continue
            if any(type(p) is TextPart for p in message.parts):
                text = message.text
            changes.extend(p for p in message.parts if type(p) is ToolChangePart)
        self.text, self.tools = text, apply_changes((), changes)

    def record(self, state: Any) -> None:
        """The per-call step: append what changed since the last call as system entries.

        The first request of a conversation a filtered handoff opened builds its base's tools
        from what it offers (not an entry): only later changes are appended, and to its view
        (``View.record``), never to the transcript: they are changes against the view's base,
        not the session's, so the session's history must not hold them (SPEC 26, 28).
        """
        if self.opening:
            self.opening = False
            self.base_tools = self.tools = tuple(state.offer.specs)
            self.measure(state)
        view = state.shown
        for entry in self.changes(state.system, state.offer.specs):
            if view is None:
                state.append(entry)
            else:
                view.record(state, entry)

    def changes(self, text: str | None, tools: Sequence[ToolSpec]) -> list[Message]:
        """The entries that take the conversation from what is in effect to ``text``/``tools``.

        Updates what is in effect; an empty list when nothing changed.
        """
        entries: list[Message] = []
        if text is not self.text and (text or "") != (self.text or ""):
            entries.append(Message("system", (TextPart(text or ""),)))
            self.text = text
        if tools is not self.tools:
            change = tool_change(self.tools, tools)
            if change is not None:
                entries.append(Message("system", (change,)))
            self.tools = tuple(tools)
        return entries


def tool_change(before: Sequence[ToolSpec], after: Sequence[ToolSpec]) -> ToolChangePart | None:
    """The change from ``before`` to ``after`` (by name and canonical JSON), or None."""
    if len(before) == len(after) and all(a is b for a, b in zip(before, after, strict=True)):
        return None
    was = {spec.name: spec_key(spec) for spec in before}
    now = {spec.name: spec_key(spec) for spec in after}
    if was == now:
        return None
    removed = tuple(name for name, key in was.items() if now.get(name) != key)
    added = tuple(spec for spec in after if was.get(spec.name) != now[spec.name])
    return ToolChangePart(added=added, removed=removed)


def kept_after_compaction(before: Sequence[Message], after: Sequence[Message]) -> list[Message]:
    """A compactor's result held to SPEC 28: every system entry kept, no stale thinking sent.

    A base or entry the compactor left out goes back before the first kept message that
    followed it (or at the end); the base is first. Every message after the first position
    where the result differs from ``before`` loses its thinking: its prefix changed, so the
    provider would refuse it (an adaptive-thinking turn without thinking is valid).
    """
    kept = {id(m) for m in after}
    result = list(after)
    for index, message in enumerate(before):
        if message.role != "system" or id(message) in kept:
            continue
        follower = next((m for m in before[index + 1 :] if id(m) in kept), None)
        at = next((i for i, m in enumerate(result) if m is follower), len(result))
        result.insert(at, message)
        kept.add(id(message))
    changed = next(
        (i for i, m in enumerate(result) if i >= len(before) or before[i] is not m), len(result)
    )
    tail = [m for m in map(without_thinking, result[changed:]) if m is not None]
    return [*result[:changed], *tail]
