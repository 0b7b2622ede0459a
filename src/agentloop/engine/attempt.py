"""One attempt of a tool call: the breaker's gate, the tool, its result, the breaker's record.

``CallPipeline`` (``agentloop.engine.call``) takes these steps from ``Attempt``, a mixin of no
state of its own. A tool that never waits (and no post-tool hook) is attempted without a
coroutine (``_attempt``); one that waits goes on in ``_waited``. The loop pre-check
(``_refuse_if_looping``) and the breaker's admission are the safety stack's calls written out
where they are made (``agentloop.engine.guards``), each inside its own ``try``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from agentloop.engine.guards import BREAKER_TEXT
from agentloop.engine.invoke import Outcome, begin
from agentloop.errors import LockPoisoned
from agentloop.messages import MediaPart, ToolCallPart, ToolResultPart
from agentloop.model import ModelClient, media_kinds
from agentloop.pausing import PendingCall
from agentloop.safety.breaker import Admission
from agentloop.safety.breaker import Outcome as BreakerOutcome
from agentloop.tools import Tool, ToolContext

if TYPE_CHECKING:
    from agentloop.clock import Clock
    from agentloop.config import RunConfig
    from agentloop.engine.gates import Gates
    from agentloop.engine.guards import SafetyState
    from agentloop.engine.journal import Journal
    from agentloop.engine.state import RunState
    from agentloop.events import Event
    from agentloop.observers import EventBus
    from agentloop.tools import ToolRegistry

__all__ = ["Attempt", "PausedChild", "PipelineServices"]

_BREAKER: dict[Outcome, BreakerOutcome | None] = {
    "ok": "success",
    "sick": "sick",
    "tool_error": "neutral",
    "invalid": "neutral",
    "missing": None,
}
"""What the tool breaker records for an attempt that reached the tool."""
_RECORDED: dict[Outcome, BreakerOutcome] = {
    outcome: recorded for outcome, recorded in _BREAKER.items() if recorded is not None
}
"""``_BREAKER`` without the outcome whose admission is handed back instead (``missing``)."""


class PausedChild:
    """A call to a child agent (``as_tool``) whose run paused: its pending calls (SPEC 17)."""

    __slots__ = ("id", "pending")

    def __init__(self, call_id: str, pending: tuple[PendingCall, ...]) -> None:
        self.id = call_id
        """The parent's call to the child agent."""
        self.pending = pending


_Ran: TypeAlias = "tuple[ToolResultPart, Outcome] | PausedChild"
_Attempted: TypeAlias = "_Ran | Coroutine[Any, Any, _Ran]"
"""An attempt's result, or (when the tool or a post-tool hook waits) the coroutine for it."""


class PipelineServices(Protocol):
    """What a call's pipeline uses of the dispatcher that runs it (``engine.dispatch``)."""

    registry: ToolRegistry
    config: RunConfig
    active: bool
    """Whether anybody listens to the session's events (the dispatcher is its event channel)."""
    gates: Gates
    session_id: str
    safety: SafetyState
    clock: Clock
    monotonic: Callable[[], float]
    default_recovery: bool
    journal: Journal | None

    def emit(self, event: Event) -> None:
        """Deliver ``event`` to the session's listeners (``EventBus.emit``)."""

    @property
    def observers(self) -> EventBus:
        """The session's event channel: the dispatcher itself (read ``active``/``emit``)."""


class Attempt:
    """The attempt steps of ``CallPipeline``: what they read of the pipeline, and the steps."""

    __slots__ = ()

    dispatcher: PipelineServices
    safety: SafetyState
    """The dispatcher's (``dispatcher.safety``), read once a call."""
    state: RunState
    call: ToolCallPart
    name: str
    arguments: Mapping[str, Any]

    if TYPE_CHECKING:

        def finish(
            self,
            text: str,
            outcome: Outcome,
            duration: float = 0.0,
            media: tuple[MediaPart, ...] = (),
        ) -> tuple[ToolResultPart, Outcome]:
            """The attempt's result made, recorded and told (``CallPipeline.finish``)."""
            ...

    async def _run_tool(self, ctx: ToolContext) -> tuple[ToolResultPart, Outcome] | PausedChild:
        """The breaker gate, the tool, its result, the post-tool hooks and the breaker record.

        A child agent whose run paused answers ``PausedChild`` instead of a result.
        """
        attempted = self._attempt(ctx, self._looked_up())
        if type(attempted) is CoroutineType:
            return await attempted  # type: ignore[no-any-return]
        return attempted  # type: ignore[return-value]

    def _looked_up(self) -> Tool | None:
        """The tool the attempt calls (by its name now: a correction may change it), or None."""
        registry = self.state.registry
        return (self.dispatcher.registry if registry is None else registry).get(self.name)

    def _ungated(self, ctx: ToolContext, tool: Tool | None) -> _Attempted:
        """An attempt no gate looks at: the loop pre-check, then ``tool`` (``_attempt``)."""
        self._refuse_if_looping()
        return self._attempt(ctx, tool)

    def _attempt(self, ctx: ToolContext, tool: Tool | None) -> _Attempted:
        """``_run_tool``: its result, or a coroutine for the rest when the tool or a hook waits.

        ``tool``: the one called ``self.name`` (``_looked_up``). A tool that never waits (and no
        post-tool hook) ends here, without a coroutine.
        """
        d, safety, state = self.dispatcher, self.safety, self.state
        breakers = safety.breakers
        try:  # ``SafetyState.admit``, written out: a raising breaker fails closed
            admission = breakers.admit(self.name)
        except Exception as exc:
            raise LockPoisoned("tool_breaker") from exc
        if admission is None:
            return self.finish(BREAKER_TEXT, "refused")
        started = d.monotonic()
        registry = d.registry if state.registry is None else state.registry
        try:
            begun = begin(tool, registry, d.config, ctx, self.name, self.arguments)
        except BaseException:
            safety.settle(admission, None)
            raise
        if type(begun) is not tuple or d.gates.post_hooks:
            return self._waited(admission, ctx, started, begun)
        recorded = _RECORDED.get(begun[1])  # (None: a missing tool, its admission handed back)
        if recorded is None or state.children is not None or ctx.media:
            return self._ran(admission, ctx, started, begun, True)
        result = self.finish(begun[0], begun[1], d.monotonic() - started)  # ``_ran``'s, written
        try:  # out, and ``SafetyState.settle``'s: a raising breaker fails closed
            breakers.record(admission, recorded)
        except Exception as exc:
            raise LockPoisoned("tool_breaker") from exc
        return result

    async def _waited(
        self,
        admission: Admission,
        ctx: ToolContext,
        started: float,
        begun: tuple[str, Outcome] | Awaitable[tuple[str, Outcome]],
    ) -> tuple[ToolResultPart, Outcome] | PausedChild:
        """The rest of an attempt that waits: the tool's own awaits, the post-tool hooks."""
        d = self.dispatcher
        try:
            text_outcome = begun if type(begun) is tuple else await begun  # type: ignore[misc]
        except BaseException:
            self.safety.settle(admission, None)
            raise
        hooks = bool(d.gates.post_hooks)
        result = self._ran(admission, ctx, started, text_outcome, not hooks)
        if not hooks or type(result) is not tuple:
            return result
        outcome = result[1]
        try:
            await d.gates.after(self.call, result[0], ctx)
        finally:  # the tool ran: a failing or cancelled post hook must not leave a probe hanging
            self.safety.settle(admission, _BREAKER[outcome])
        return result

    def _ran(
        self,
        admission: Admission,
        ctx: ToolContext,
        started: float,
        begun: tuple[str, Outcome],
        settle: bool,
    ) -> tuple[ToolResultPart, Outcome] | PausedChild:
        """The tool's result made (a paused child's calls instead); ``settle``: recorded."""
        d, state, call = self.dispatcher, self.state, self.call
        text, outcome = begun
        children = state.children
        if children is not None and call.id in children and children[call.id][0] == "paused":
            self.safety.settle(admission, None)
            return PausedChild(call.id, children[call.id][2])
        media = ctx.media
        if media:
            text, outcome, media = _takeable(self.name, state.client, text, outcome, media)
        result = self.finish(text, outcome, d.monotonic() - started, media)
        if settle:
            self.safety.settle(admission, _BREAKER[outcome])
        return result

    def _refuse_if_looping(self) -> None:
        """The loop pre-check: at the stop threshold the call is refused and the run ends."""
        safety = self.safety
        if not safety.detection_on or safety._loops is None:  # (none yet: nothing recorded,
            return  # nothing at the stop line; its first call's ``finish`` makes it)
        try:  # ``SafetyState.loop_stop``, written out: a raising detector switches detection off
            stop = safety.loops.check()
            if stop is not None:
                safety.loops.consume_stop()
        except Exception as exc:
            safety.poisoned("the loop detector", exc)
            return
        if stop is not None:
            self.finish(f"dispatch refused before execution: {stop}", "looping")
            raise stop


def _takeable(
    name: str, client: ModelClient, text: str, outcome: Outcome, media: tuple[MediaPart, ...]
) -> tuple[str, Outcome, tuple[MediaPart, ...]]:
    """A tool's media, or the soft error the model reads when its provider cannot take one."""
    accepted = media_kinds(client)
    for part in media:
        if part.kind not in accepted:
            return (
                f"tool '{name}' returned {part.kind}, which {client.provider} cannot take",
                "tool_error",
                (),
            )
    return text, outcome, media
