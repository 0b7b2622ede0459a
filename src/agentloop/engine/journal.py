"""The step journal of the plain store: what lets ``continue_run`` repeat no finished step.

A run with a store writes each completed turn (``SessionRecorder``); a crash loses the turn in
flight. Its finished steps must not be lost with it: the tool calls that already ran. So every
tool call's output is journaled the moment the tool returns (``agentloop_steps``), keyed by what
asked for it — ``t<turn>/<tool>/<digest of the arguments>/<n>`` (the n-th such call in the turn;
a recovery retry is the next n) — and, before the turn's first tool runs, the turn's model reply
(``t<turn>/reply``). ``continue_run`` then answers the in-flight turn's model call from the
journal (``ReplayClient``) and each journaled tool call from its output (``JournaledTool``), so
only what never finished runs again.

Not journaled, and so run again on continuation: a tool that raised an unexpected exception (a
panic), and a tool whose process died before its output was written. Keys use the call's name
and arguments, never its id, so a restamped id cannot hide a finished call.

What the journal answered is noted for the run's observers (``answered_calls``: call ids whose
output came from an entry; ``answered_turns``: turns whose reply came from an entry the engine
wrote after announcing it), so their events say ``replayed`` (``agentloop.engine.replay_marks``).
A reply the batch poller journaled is the result's arrival, not a replay: it is not noted.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloop.errors import ToolError
from agentloop.media import media_from_dict
from agentloop.messages import Message, Usage
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent, WrappedClient
from agentloop.safety.loops import canonical_arguments
from agentloop.safety.output import storable
from agentloop.tools import Tool, ToolContext, ToolOutput, ToolRegistry, split_output

__all__ = [
    "Journal",
    "JournaledTool",
    "JournaledTools",
    "ReplayClient",
    "ToolsView",
    "WrappedClient",
    "WrappedTool",
    "output_entry",
    "replayed_output",
]

Writer = Callable[[str, str, Mapping[str, Any]], None]
"""``write(run_id, key, value)``: persist one journal entry (raises ``MemoryBackendError``).

A reply's ``value["message"]`` is the ``Message`` itself (``SessionRecorder.step`` gives a store
other than ``SQLStore`` its ``to_dict()``)."""


@dataclass(eq=False)
class Journal:
    """The journal of the run in flight: entries to replay, and the writer for new ones."""

    write: Writer
    run_id: str = ""
    entries: dict[str, Any] = field(default_factory=dict)
    _seen: dict[str, int] = field(default_factory=dict)
    answered_calls: set[str] = field(default_factory=set)
    """Call ids whose output the journal answered, until their event is marked."""
    answered_turns: set[int] = field(default_factory=set)
    """Turns whose announced reply the journal answered, until its event is marked."""
    marks: Any = None
    """The listener marking those events (``replay_marks.ReplayMarks``) for the run continued."""

    def start(self, run_id: str, entries: Mapping[str, Any] | None = None) -> None:
        """A run starts (or is continued with the ``entries`` its process journaled)."""
        self.run_id = run_id
        self.entries = dict(entries or {})
        self._seen = {}
        self.answered_calls.clear()
        self.answered_turns.clear()

    def answered(self) -> None:
        """An entry answered a call: its event is marked ``replayed`` when anybody listens."""
        if self.marks is not None:
            self.marks.attach()

    def tool_key(self, ctx: ToolContext, name: str, arguments: Mapping[str, Any]) -> str:
        """The key of this call: same turn, tool and arguments → the next occurrence."""
        if ctx.run_id != self.run_id:
            self.start(ctx.run_id)
        raw = canonical_arguments(arguments).encode("utf-8", "surrogatepass")
        prefix = f"t{ctx.turn}/{name}/{hashlib.blake2b(raw, digest_size=12).hexdigest()}"
        n = self._seen.get(prefix, 0)
        self._seen[prefix] = n + 1
        return f"{prefix}/{n}"

    def record(self, key: str, value: Mapping[str, Any]) -> None:
        """Journal an entry of the current run."""
        self.write(self.run_id, key, value)
        self.entries[key] = value

    def note_reply(self, ctx: ToolContext) -> None:
        """Before a turn's first tool runs: journal the model reply that asked for it."""
        key = f"t{ctx.turn}/reply"
        link = ctx._link
        if key in self.entries or link is None:
            return
        state = link[0]
        turns = state.run.turns
        if not turns or turns[-1].index != ctx.turn:
            return
        turn = turns[-1]
        message = next((m for m in reversed(state.transcript) if m.role == "assistant"), None)
        if message is None:
            return
        self.record(
            key,
            {
                "message": message,  # the store encodes it once for this and the turn's row
                "usage": turn.usage.to_dict(),
                "model": turn.model,
                "stop_reason": turn.stop_reason,
                "announced": True,  # its ModelResponded went out: a replay of it is marked
            },
        )

    def reply(self, turn: int) -> ModelResponse | None:
        """The journaled model reply of ``turn``, if any."""
        data = self.entries.get(f"t{turn}/reply")
        if data is None:
            return None
        if data.get("announced"):
            self.answered_turns.add(turn)
            self.answered()
        message = data["message"]  # as stored, or the message itself (this process wrote it)
        return ModelResponse(
            message=message if isinstance(message, Message) else Message.from_dict(message),
            usage=Usage.from_dict(data.get("usage", {})),
            model=str(data.get("model", "")),
            stop_reason=data.get("stop_reason"),
        )


class WrappedTool(Tool):
    """A tool that is ``inner`` in all but ``call``: name, schema, timeout, spec, validation.

    The base of the wrappers a registry view hands the dispatcher (``ToolsView``): the
    journal's here, the DBOS steps' in ``agentloop.durable.dbos``.
    """

    def __init__(self, inner: Tool) -> None:
        self.inner = inner
        self.name = inner.name
        self.description = inner.description
        self.parameters = inner.parameters
        self.timeout = inner.timeout
        self.requires_approval = inner.requires_approval
        self.external = inner.external

    def spec(self) -> Any:
        """The inner tool's spec."""
        return self.inner.spec()

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """The inner tool's validation."""
        return self.inner.validate(arguments)

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """The inner tool's call."""
        return await self.inner.call(arguments, ctx)


class JournaledTool(WrappedTool):
    """A tool whose output is journaled, and replayed from the journal when it is there."""

    def __init__(self, inner: Tool, journal: Journal) -> None:
        super().__init__(inner)
        self.journal = journal

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """The journaled output, or the inner tool's (journaled once it returns)."""
        journal = self.journal
        key = journal.tool_key(ctx, self.name, arguments)
        if key in journal.entries:
            journal.answered_calls.add(ctx.call_id)
            journal.answered()
            return replayed_output(journal.entries[key])
        journal.note_reply(ctx)
        try:
            output = await self.inner.call(arguments, ctx)
        except ToolError as error:
            journal.record(key, {"tool_error": storable(error.message)})
            raise
        link = ctx._link
        if link is not None and link[0].children and ctx.call_id in link[0].children:
            return output  # a child agent that paused: nothing finished, nothing to replay
        entry = output_entry(output)
        if entry is not None:
            journal.record(key, entry)
        return output


def output_entry(output: Any) -> dict[str, Any] | None:
    """The journal form of a tool's return value (None if it cannot be rendered: a panic)."""
    try:
        value, is_error = (
            (output.content, output.is_error) if isinstance(output, ToolOutput) else (output, False)
        )
        text, media = split_output(value)
    except Exception:
        return None
    entry: dict[str, Any] = {"content": storable(text), "is_error": is_error}
    if media:
        entry["media"] = [m.to_dict() for m in media]
    return entry


def replayed_output(entry: Mapping[str, Any]) -> Any:
    """A tool's return value (or its ``ToolError``) as ``output_entry`` stored it."""
    if "tool_error" in entry:
        raise ToolError(str(entry["tool_error"]))
    content: Any = str(entry["content"])
    if entry.get("media"):
        media = [media_from_dict(m) for m in entry["media"]]
        content = [content, *media] if content else media
    if entry.get("is_error"):
        return ToolOutput(content, is_error=True)
    return content


class ToolsView(ToolRegistry):
    """A view of a registry whose tools ``wrap`` wraps (what the dispatcher looks tools up in)."""

    def __init__(self, inner: ToolRegistry) -> None:
        super().__init__()
        self.inner = inner

    def wrap(self, tool: Tool) -> Tool:
        """The tool the dispatcher calls in place of ``tool``."""
        return tool

    def over(self, inner: ToolRegistry) -> ToolsView:
        """The same view over ``inner`` (a run's toolsets, SPEC 22: journaled, steps alike)."""
        view = copy.copy(self)
        view.inner = inner
        return view

    def get(self, name: str) -> Tool | None:
        """The inner registry's tool, wrapped (the engine's own ``search_tools`` never is)."""
        tool = self.inner.get(name)
        if tool is None or getattr(tool, "runs_inline", False):
            return tool
        return self.wrap(tool)

    def names(self) -> list[str]:
        """The inner registry's names."""
        return self.inner.names()

    def __contains__(self, name: object) -> bool:
        return name in self.inner


class JournaledTools(ToolsView):
    """A view of a registry whose tools are journaled."""

    def __init__(self, inner: ToolRegistry, journal: Journal) -> None:
        super().__init__(inner)
        self.journal = journal

    def wrap(self, tool: Tool) -> Tool:
        """The tool, journaled (a memory tool, ``journaled = False``, runs again instead)."""
        if getattr(tool, "journaled", True) is False:
            return tool
        return JournaledTool(tool, self.journal)


class ReplayClient(WrappedClient):
    """A ``ModelClient`` that answers each turn's first request from the journal when it can."""

    def __init__(
        self,
        inner: ModelClient,
        replies: Callable[[int], ModelResponse | None],
        turn: Callable[[], int],
    ) -> None:
        super().__init__(inner)
        self._replies = replies
        self._turn = turn
        self._answered: set[int] = set()

    def _take(self) -> ModelResponse | None:
        """The journaled reply of the current turn, once (a second call goes to the model)."""
        turn = self._turn()
        if turn in self._answered:
            return None
        self._answered.add(turn)
        return self._replies(turn)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The journaled reply once, then the inner client's."""
        reply = self._take()
        if reply is not None:
            return reply
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The journaled reply as one ``done`` event once, then the inner client's stream."""
        reply = self._take()
        if reply is not None:
            yield StreamEvent("done", response=reply)
            return
        async for event in self.inner.stream(request):
            yield event
