"""One run's mutable state: its record, its messages, its tool offer, its context guard.

The messages, in one list and three positions:

- ``transcript``: what the next request sends (committed history, then this run's messages);
  appended to per message, replaced wholesale by a compaction commit;
- ``base``: where this run's uncommitted messages start in ``transcript`` (success commits
  ``transcript[base:]``);
- ``boundary``: the end of the last complete turn (a salvaging finalize commits
  ``transcript[base:boundary]``);

and ``audit``, every message of this run in order, compaction or not (the run record's
``messages``): ``transcript[base:]`` until the two part (a compaction, a resumed run), so a
plain run holds no second list across its model calls (``kept`` holds it once made).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict

from agentloop._util.lazy import lazy_module
from agentloop._util.slots import record
from agentloop.cancel import CancelToken
from agentloop.engine.context_guard import ContextGuard
from agentloop.engine.measured import NO_CALL_IDS, CallIds, Measured
from agentloop.errors import Cancelled, InvalidInput
from agentloop.messages import Message, TextPart
from agentloop.model import ClientEvents, ModelClient, ModelSettings, ToolSpec
from agentloop.run import Run
from agentloop.safety.budget import Budget
from agentloop.tools import ToolRegistry

if TYPE_CHECKING:
    import asyncio

    from agentloop import events as ev
    from agentloop.engine.appendonly import AppendOnly
    from agentloop.engine.views import View
    from agentloop.provider_tools import ProviderTool
else:  # the event classes load when somebody first listens
    ev = lazy_module("agentloop.events")

__all__ = [
    "NO_CALL_IDS", "CallIds", "Measured", "Offer", "Paused", "PerRun", "RunOptions",
    "RunState", "started_state",
]  # fmt: skip

_NO_SETTINGS = ModelSettings()


class Paused(Exception):
    """A turn's dispatch left calls pending (``RunState.paused``): the run pauses (SPEC 17)."""


@record
class Offer:
    """The tools advertised to the model for the next request."""

    specs: tuple[ToolSpec, ...]
    native_output: bool = False
    """Whether the provider is asked for native structured output (no ``final_result`` tool)."""
    provider_tools: tuple[ProviderTool, ...] = ()
    """Tools the provider runs itself (SPEC 24), sent beside the function tools."""
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(s.name for s in self.specs))


class PerRun(TypedDict):
    """``run()``'s per-run replacements, passed on as they were given (``Agent.run``)."""

    model_settings: ModelSettings | None
    usage_limits: Budget | None


@record
class RunOptions:
    """Per-run replacements for the config's (``run(..., model_settings=, usage_limits=)``)."""

    model_settings: ModelSettings | None = None
    usage_limits: Budget | None = None
    toolsets: tuple[Any, ...] = ()
    """``run(..., toolsets=...)``: toolsets added for this run (SPEC 22)."""

    @classmethod
    def checked(
        cls, model_settings: object, usage_limits: object, toolsets: object = None
    ) -> RunOptions | None:
        """The options, type-checked (``InvalidInput`` names the fix); None when all are."""
        if model_settings is None and usage_limits is None and not toolsets:
            return None
        if model_settings is not None and not isinstance(model_settings, ModelSettings):
            raise InvalidInput(
                f"model_settings must be a ModelSettings, got {type(model_settings).__name__}: "
                "write model_settings=ModelSettings(temperature=0.2, ...)"
            )
        if usage_limits is not None and not isinstance(usage_limits, Budget):
            raise InvalidInput(
                f"usage_limits must be a Budget, got {type(usage_limits).__name__}: write "
                "usage_limits=Budget(turns=..., tokens=..., tool_calls=...) "
                "(from agentloop import Budget)"
            )
        if not toolsets:
            return cls(model_settings, usage_limits)
        from agentloop.toolsets import checked_toolsets

        return cls(model_settings, usage_limits, checked_toolsets(toolsets))


@dataclass(eq=False, slots=True)
class RunState(ContextGuard):
    """Everything one run mutates (slotted: with over 30 fields an instance would need a dict).

    Its context guard too: the state is a ``ContextGuard`` (``engine.context_guard``), its
    estimate and transcript checks in the state's slots (``arm_guard`` sets them), and
    ``guard`` is the state itself. ``system`` and ``config`` are the guard's fields.
    """

    run: Run[Any]
    tokens: tuple[CancelToken, ...]
    transcript: list[Message]
    base: int
    offer: Offer
    client: ModelClient
    """The client this run calls (the agent's, or a replaying wrapper around it)."""
    deps: Any = None
    boundary: int = 0
    kept: list[Message] | None = None
    """``audit`` once it is its own list (None: ``transcript[base:]``, made at its first read)."""
    turn_index: int = 0
    invalid_outputs: int = 0
    call_ids: CallIds = NO_CALL_IDS
    """Every tool-call id in the transcript (a reply reusing one is re-stamped); while it has
    none, ``NO_CALL_IDS`` (the run's own set is made with its first call)."""
    events: ClientEvents | None = None
    stream: bool = False
    """Ask for streamed replies whatever ``RunConfig.stream`` says (``agent.stream()``)."""
    listener: Callable[[ev.Event], None] | None = None
    system: str | None = None
    """The run's system prompt (a prompt function's text is filled in at run start)."""
    settings: ModelSettings = _NO_SETTINGS
    """The run's model settings: the config's, or ``run(..., model_settings=...)``."""
    budget: Budget | None = None
    """``run(..., usage_limits=...)``: this run's budget instead of the config's."""
    usage_estimated: bool = False
    """The client reported no usage for a reply and the budget counted an estimate (logged once)."""
    registry: ToolRegistry | None = None
    """The run's tools when ``agent.override(tools=...)`` swapped them (None: the agent's)."""
    depth: int = 0
    """How many agents delegate to this run (``as_tool``): 0 for a run nobody delegated."""
    resuming: Any = None
    """A paused run being continued: its paused turn and the decisions (``engine.pause``)."""
    children: dict[str, Any] | None = None
    """Child agents (``as_tool``) by the parent's call id: one that paused, or one to continue."""
    paused: tuple[Any, ...] = ()
    """The calls the run paused on (``PendingCall``), set when a dispatch left some pending."""
    waiting: Any = None
    """A batch run's model turn submitted to a provider batch (``BatchWait``, SPEC 25)."""
    plan: Any = None
    """The run's per-call tool plan (``engine.offering.ToolPlan``): None without toolsets."""
    measured: Measured | None = None
    """What the session knew of ``transcript[:base]`` (its history) at the start, if anything."""
    appendonly: AppendOnly | None = None
    """The conversation's base and entries when the client is append-only (SPEC 28), else None."""
    handoff: Any = None
    """A handoff decided in this turn (``engine.handoffs.Transfer``), applied at its end."""
    handoffs: int = 0
    """Handoffs made so far (``RunConfig.max_handoffs``)."""
    shown: View | None = None
    """After a filtered handoff: what its receiver's requests send (``engine.views``)."""
    session: Any = None
    """The session running it (``Conversation``): a tool's ``ctx.cancel`` asks it, when read."""

    def __post_init__(self) -> None:
        self.boundary = self.base
        self.call_ids = _call_ids(self.transcript, self.measured)

    @property
    def audit(self) -> list[Message]:
        """Every message of this run in order, compaction or not (the run record's ``messages``).

        ``transcript[base:]``, made its own list at its first read (a turn's record, the run's
        commit) and kept from then on: ``append`` adds to both.
        """
        kept = self.kept
        if kept is None:
            kept = self.kept = self.transcript[self.base :]
        return kept

    @audit.setter
    def audit(self, messages: list[Message]) -> None:
        self.kept = messages

    @property
    def cancelled(self) -> bool:
        """Whether any watched token fired."""
        return any(t.cancelled for t in self.tokens)

    def watch(self, callback: Callable[[], None], loop: asyncio.AbstractEventLoop) -> None:
        """Watch every token with ``callback`` on ``loop``, the running one (handle: its id).

        A loop, not a comprehension: the caller's frame keeps no cell for ``callback``.
        """
        for token in self.tokens:
            token._watch_on(loop, callback)

    def check_cancel(self) -> None:
        """A cancellation checkpoint (a run passes a few per turn).

        Reads each token's flag itself: ``CancelToken.cancelled`` is a property, a call each.
        """
        for token in self.tokens:
            if token._fired:
                raise Cancelled()

    def append(self, message: Message) -> None:
        """Add a message of this run (the context guard measures and checks it)."""
        self.transcript.append(message)
        if self.kept is not None:  # else ``audit`` is the transcript's tail, this message too
            self.kept.append(message)
        self.added(message)

    def sent(self) -> list[Message]:
        """What the next request sends of the transcript: all of it, or a filtered view."""
        view = self.shown
        return self.transcript if view is None else view.messages(self.transcript)

    def replace(self, messages: list[Message]) -> None:
        """Compaction committed ``messages``: they are history now, nothing is pending."""
        if self.kept is None:  # the run's messages so far, before the transcript forgets them
            self.kept = self.transcript[self.base :]
        self.transcript = list(messages)
        self.base = self.boundary = len(self.transcript)

    def release_tool_choice(self) -> None:
        """``tool_choice_once``: the first reply came; later turns ask with ``"auto"``."""
        choice = "auto" if self.offer.specs else None
        self.settings = replace(self.settings, tool_choice=choice, tool_choice_once=False)

    def complete_turn(self) -> None:
        """Mark everything so far as a complete turn (a salvage point)."""
        self.boundary = len(self.transcript)

    @property
    def pending(self) -> list[Message]:
        """This run's messages not committed yet."""
        return self.transcript[self.base :]

    @property
    def completed(self) -> list[Message]:
        """This run's messages up to the last complete turn (what a salvage commits)."""
        return self.transcript[self.base : self.boundary]


def _call_ids(transcript: list[Message], known: Measured | None) -> CallIds:
    """Every tool-call id in ``transcript`` (``known``: its history's, then only the rest's).

    ``NO_CALL_IDS`` when there is none: a run holds no set of its own until its first call.
    """
    ids: set[str] | None = None if known is None or not known.call_ids else set(known.call_ids)
    for message in transcript if known is None else transcript[known.length :]:
        parts = message.parts
        if len(parts) == 1 and type(parts[0]) is TextPart:  # one text (an input): no call to
            continue  # read (``tool_calls``, which would keep its empty answer on the message)
        for call in message.tool_calls:
            if ids is None:
                ids = set()
            ids.add(call.id)
    return NO_CALL_IDS if ids is None else ids


def started_state(
    run: Run[Any],
    tokens: tuple[CancelToken, ...],
    transcript: list[Message],
    base: int,
    offer: Offer,
    client: ModelClient,
    deps: Any,
    system: str | None,
    settings: ModelSettings,
    registry: ToolRegistry | None,
    measured: Measured | None,
    into: RunState | None = None,
) -> RunState:
    """The state of a run starting now, as ``RunState(...)`` builds it from these fields.

    Each slot set here, one statement each: ``RunState(...)`` matches a dozen keywords against
    its 36 parameters at every run. ``tests/test_run_state.py`` holds this to ``RunState(...)``
    field by field (a field added and forgotten here fails there). ``into``: the object to
    fill, a subclass's (the run's loop is its state, ``engine.loop.RunLoop``); None: a new one.
    """
    if into is None:
        state: RunState = _new(RunState)
        state.session = None
    else:  # a loop, made with its session (``RunLoop.__init__``)
        state = into
    state.run = run
    state.tokens = tokens
    state.transcript = transcript
    state.base = state.boundary = base
    state.offer = offer
    state.client = client
    state.deps = deps
    state.kept = None
    state.turn_index = state.invalid_outputs = state.depth = state.handoffs = 0
    state.call_ids = _call_ids(transcript, measured)
    state.events = state.listener = state.budget = state.resuming = state.children = None
    state.stream = state.usage_estimated = False
    state.system = system
    state.settings = settings
    state.registry = registry
    state.paused = ()
    state.waiting = state.plan = state.appendonly = state.handoff = state.shown = None
    state.measured = measured
    return state


_new = object.__new__
