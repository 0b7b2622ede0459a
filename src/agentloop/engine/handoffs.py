"""Handoffs inside the engine (SPEC 26; the public side is ``agentloop.handoffs``).

At construction ``checked`` sorts ``Agent(handoffs=[...])`` (an ``Agent`` with a name, or a
``Handoff``), refuses what cannot work (``ConfigurationError``: another kind of entry, a bare
agent without a name, a duplicate, a name a tool has, one name for two agents anywhere in the
transitive graph, a receiver whose ``output_type`` differs) and registers one ``HandoffTool``
per handoff in the agent's registry: the model sees ``transfer_to_<name>``, no arguments.

A call of it (``HandoffTool.call``) decides the transfer during the turn, without a model
request: a second one in the same turn is refused softly, the ``input_filter`` runs once
(raising or unsafe: a soft refusal), the receiver's instructions are evaluated with the run's
``RunContext``. ``take_over`` applies it when the turn is done: from the next turn the run's
client, tools (the offer and the registry calls run on) and system prompt are the receiver's,
its events and turns carry its name, and ``RunConfig.max_handoffs`` of the starting agent
counts it. Hooks, approver, observers, store, budget and input guardrails stay the run's.
A paused run remembers its active agent (``run.last_agent`` and the paused turn's record), so
its continuation checks and runs the decided calls on the receiver (``resume_in``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentloop import events as ev
from agentloop.engine.handoff_carry import (
    check_receivers,
    filtered_transfer,
    reached,
    ruling,
    viewed,
)
from agentloop.engine.instructions import evaluate
from agentloop.engine.kept import edited
from agentloop.engine.views import View, measure, restored, stored
from agentloop.errors import ConfigurationError, HandoffLimitExceeded, ToolError
from agentloop.handoffs import Handoff, handoff_name
from agentloop.messages import Message, ThinkingPart
from agentloop.model import ToolSpec, media_provider
from agentloop.run import RunContext
from agentloop.tokens import MEDIA_PROVIDER
from agentloop.tools import Tool, ToolContext
from agentloop.transcript import validate_transcript

if TYPE_CHECKING:
    from agentloop.engine.state import RunState

__all__ = [
    "HandoffTool",
    "Transfer",
    "active_agent",
    "checked",
    "close_receivers",
    "paused_view",
    "resume_in",
    "take_over",
    "view_ended",
    "views_closed",
]

TRANSFERRED = "Transferred to '{name}'."
"""What the model reads for a handoff's call."""


def checked(agent: Any, items: object) -> tuple[Handoff, ...]:
    """``Agent(handoffs=...)`` checked, each registered as its tool (see the module)."""
    if not items:
        return ()
    from agentloop.engine.definition import Definition

    if isinstance(items, Handoff | Definition) or not isinstance(items, Iterable):
        raise ConfigurationError(
            f"handoffs must be a list of agents or handoff(...)s, got {items!r}", field="handoffs"
        )
    made: list[Handoff] = []
    for item in items:
        if isinstance(item, Definition):
            item = Handoff(item, handoff_name(item, None))
        elif not isinstance(item, Handoff):
            raise ConfigurationError(
                f"handoffs takes agents and handoff(agent, ...)s, got {item!r}", field="handoffs"
            )
        taken = item.name in agent.registry or item.tool_name in agent.registry
        if any(h.name == item.name for h in made) or taken:
            raise ConfigurationError(
                f"handoff name {item.name!r} is used twice (or a tool is named '{item.name}' "
                f"or '{item.tool_name}'): give one handoff(agent, name=...) another",
                field="handoffs",
            )
        made.append(item)
    _check_graph(agent, made)
    reached = [r for h in made for r in (h.agent, *all_receivers(h.agent)) if r is not agent]
    check_receivers(agent, reached)  # the starting agent's memory goes with the run (SPEC 27)
    for item in made:
        agent.registry.register(HandoffTool(item))
    return tuple(made)


def _check_graph(start: Any, handoffs: Sequence[Handoff]) -> None:
    """One agent per name across every reachable handoff, each with the start's output type."""
    schema = _schema(start)
    names: dict[str, Any] = {}
    queue = list(handoffs)
    seen: set[int] = set()
    while queue:
        item = queue.pop()
        owner = names.setdefault(item.name, item.agent)
        if owner is not item.agent:
            raise ConfigurationError(
                f"two agents are reachable by the handoff name {item.name!r}: a name names "
                "one agent across the whole handoff graph",
                field="handoffs",
            )
        if _schema(item.agent) != schema:
            raise ConfigurationError(
                f"the agent of handoff {item.name!r} has another output_type than the starting "
                "agent: every agent a run can hand off to answers with the same type",
                field="handoffs",
            )
        if id(item.agent) not in seen:
            seen.add(id(item.agent))
            queue.extend(getattr(item.agent, "_handoffs", ()))


def _schema(agent: Any) -> Any:
    output = getattr(agent, "output", None)
    return None if output is None else output.schema


@dataclass
class Transfer:
    """A handoff decided in this turn, applied when the turn is done."""

    handoff: Handoff
    system: str | None
    """The receiver's system prompt, evaluated at the handoff."""
    shown: list[Message] | None
    """What the input filter made of the transcript (None: no filter)."""


class HandoffTool(Tool):
    """``transfer_to_<name>``: decides the handoff (see the module); no arguments."""

    runs_inline = True  # it sets the run's state: never a journaled call, a step, an activity

    def __init__(self, handoff: Handoff) -> None:
        self.handoff = handoff
        self.name = handoff.tool_name
        self.description = handoff.description or f"Hand the conversation over to '{handoff.name}'."
        self.parameters = {"type": "object", "properties": {}}

    async def call(self, arguments: Any, ctx: ToolContext) -> str:
        """Decide the transfer; the receiver rules from the next turn."""
        state: RunState = ctx._link[0]
        handoff = self.handoff
        if state.handoff is not None:
            going = state.handoff.handoff.name
            raise ToolError(f"handoff refused: already transferring to '{going}'")
        shown = None
        if handoff.input_filter is not None:  # over what this agent saw (a view's, if filtered)
            shown = _filtered(handoff, state.sent()[:-1])
        receiver = handoff.agent
        if receiver._toolsets.toolsets:  # its tool sources (MCP servers), listed before it rules
            await receiver._toolsets.refresh(starting=True)
        system = receiver._system()
        if receiver._prompt is not None:
            context = RunContext(
                run_id=ctx.run_id, session_id=ctx.session_id, deps=ctx.deps, agent=handoff.name
            )
            system = receiver._system(await evaluate(receiver._prompt, context))
        state.handoff = Transfer(handoff, system, shown)
        return TRANSFERRED.format(name=handoff.name)


def _filtered(handoff: Handoff, before: list[Message]) -> list[Message]:
    """The filter's transcript, checked; a soft refusal when it raises or is unsafe."""
    assert handoff.input_filter is not None
    try:
        shown = [_unreasoned(m) for m in handoff.input_filter(list(before))]
        if not all(isinstance(m, Message) for m in shown):
            raise TypeError("the filter returned something other than Messages")
        validate_transcript([m for m in shown if m.parts])
    except Exception as exc:
        raise ToolError(
            f"handoff to '{handoff.name}' failed: {type(exc).__name__}: {exc}"
        ) from None
    return [m for m in shown if m.parts]


def _unreasoned(message: Message) -> Message:
    """A filtered message's reasoning is not sent (a new conversation for the receiver)."""
    if not isinstance(message, Message) or not any(
        isinstance(p, ThinkingPart) for p in message.parts
    ):
        return message
    parts = tuple(p for p in message.parts if not isinstance(p, ThinkingPart))
    return Message(message.role, parts, phase=message.phase)  # its phase goes back (SPEC 16)


def take_over(session: Any, state: RunState) -> None:
    """Apply the turn's transfer: the receiver rules from the next turn (see the module)."""
    transfer = state.handoff
    assert transfer is not None
    state.handoff = None
    state.handoffs += 1
    limit = session.agent.config.max_handoffs
    if state.handoffs > limit:
        raise HandoffLimitExceeded(limit)
    previous = state.run.last_agent
    handoff = transfer.handoff
    own = _rule(session, state, handoff.agent, handoff.name, transfer.system, False)
    if transfer.shown is not None:  # the receiver's requests: the filter's, then what follows
        shown = transfer.shown
        if state.appendonly is not None:  # a new conversation (SPEC 26, 28): the receiver's base
            shown = [m for m in shown if m.role != "system"]
            state.appendonly.rebase(own, state.offer.specs, opening=True)  # tools: first call's
        at, before = len(state.transcript), state.shown
        state.shown = View(shown, at, at, at if before is None else before.first)
        measure(state)  # the view is what is sent: the guard measures it (engine.views)
    elif state.shown is not None or state.appendonly is None:  # its system, tools, formula
        measure(state)  # what its requests send, media by its provider's formula (SPEC 7, 16)
    else:  # the base and entries travel in the transcript: only the media formula changed
        state.guard.start(state.transcript, state.offer.specs)  # counted in the transcript
    bus = session._bus
    bus.agent = handoff.name
    if bus.active:
        bus.emit(ev.HandoffOccurred(state.run.id, state.turn_index, previous, handoff.name))


def _rule(
    session: Any, state: RunState, receiver: Any, name: str, system: str | None, stored: bool
) -> str | None:
    """The receiver rules: its client, tools, plan, system (``stored``: as a pause kept it).

    Returns the receiver's own instruction text (without the run's memory recall block).
    """
    state.client, own, registry, sets = ruling(session, state, receiver)  # SPEC 21, 25, 27
    provider = media_provider(state.client)  # its requests' media by its formula (SPEC 16)
    if MEDIA_PROVIDER.get() != provider:
        MEDIA_PROVIDER.set(provider)
    state.registry = viewed(session, receiver, registry, sets)  # steps, journal (SPEC 14)
    state.offer = receiver._offer(own, registry)
    state.system = system
    state.run.last_agent = name
    state.plan = plan = _plan(session, receiver, registry, sets)
    extra = None if plan is None else plan.instructions()
    if extra and not stored:  # the receiver's toolsets' instructions (a skills list) join its own
        system = state.system = _joined(system, extra)
    recall = state.run.memory.get("block") if state.run.memory else None
    if recall and not stored:  # the run's recall block stays (memory is the starting agent's)
        state.system = _joined(system, recall)
    return system


def _joined(text: str | None, extra: str) -> str:
    return f"{text}\n\n{extra}" if text else extra


def _plan(session: Any, receiver: Any, registry: Any, sets: tuple[Any, ...]) -> Any:
    """The receiver's own per-call tool plan (its toolsets, deferred tools; SPEC 22), or None."""
    if not sets and not registry.deferring:
        return None
    from agentloop.engine.offering import plan_for

    plan = plan_for(receiver, registry, sets, session.loaded_tools)
    if plan is not None:
        plan.emit = session._loaded
        view = session._dispatcher.registry
        durable = getattr(view, "for_receiver", None)  # a Temporal run's: the receiver's tools
        view = view if durable is None else durable(receiver, registry)
        plan.view = view if hasattr(view, "over") else None
    return plan


def all_receivers(agent: Any) -> list[Any]:
    """Every agent reachable through ``agent``'s handoffs, each once (not ``agent`` itself)."""
    found: list[Any] = []
    queue = list(getattr(agent, "_handoffs", ()))
    while queue:
        item = queue.pop(0)
        if item.agent is agent or any(item.agent is a for a in found):
            continue
        found.append(item.agent)
        queue.extend(getattr(item.agent, "_handoffs", ()))
    return found


async def close_receivers(agent: Any) -> None:
    """Stop the tool sources of every agent ``agent``'s handoffs reach (its ``aclose``)."""
    first: BaseException | None = None
    for receiver in all_receivers(agent):
        try:
            await receiver._toolsets.aclose()
        except Exception as exc:
            first = first or exc
    if first is not None:
        raise first


def active_agent(agent: Any, name: str | None) -> Any:
    """The agent a handoff name reaches from ``agent`` (``agent`` itself for None)."""
    if name is None:
        return agent
    found = reached(agent, name)
    return agent if found is None else found


def paused_view(state: RunState) -> dict[str, Any]:
    """What a pause keeps of a receiver: its instructions and a filtered handoff's view."""
    view = state.shown
    kept: dict[str, Any] = {"agent_system": state.system}
    if view is not None:
        kept.update(stored(view))
        if state.appendonly is not None:  # the receiver's own conversation (SPEC 28)
            kept["shown_base"] = state.appendonly.base_text
            kept["shown_tools"] = [spec.to_dict() for spec in state.appendonly.base_tools]
    return kept


def resume_in(session: Any, state: RunState, paused: Mapping[str, Any]) -> None:
    """A continued run whose receiver paused goes on in that receiver (and in its view)."""
    name = state.run.last_agent
    if name is None:
        return
    receiver = active_agent(session.agent, name)
    system = paused.get("agent_system")
    stored = system is not None
    _rule(session, state, receiver, name, system if stored else receiver._system(), stored)
    session._bus.agent = name
    state.shown = view = restored(paused)
    if view is not None:
        if state.appendonly is not None:  # read again when the run opens (AppendOnly.open)
            tools = paused.get("shown_tools")  # (a pause stored before it: the registry's)
            specs = state.offer.specs if tools is None else [ToolSpec.from_dict(t) for t in tools]
            state.appendonly.sub = (paused.get("shown_base"), specs)


def view_ended(session: Any, state: RunState) -> None:
    """A run whose filtered handoff opened a conversation of its own ended (SPEC 26, 28).

    The receiver's messages stay in the session's history, but their thinking, bound to that
    other conversation, is left out: the session's later requests send them after another
    prefix, where the provider would refuse it. The store rewrites the history. That
    conversation's entries were its view's (``View.entries``), never the history's; a system
    entry found there all the same (a pause stored before they were) goes too: it changed
    another base than the session's.
    """
    history, view = session._history, state.shown
    assert view is not None
    at = view.first  # from the first filtered handoff on, whatever a compaction did since
    kept = _left_out(history[at:])
    if kept is None:
        return
    history[at:] = kept
    edited(session, at)  # a paused run's conversation kept before stays as it was (engine.kept)
    if session._recorder is not None:
        session._recorder.rewrite_history()


def views_closed(start: Any, history: list[Message], runs: Sequence[Any]) -> list[Message] | None:
    """``view_ended`` for runs a crash ended, closed by a restore (``store._session.restore``).

    A run killed inside a filtered handoff's receiver never finalized, so its view never ended:
    its completed turns join the history with the receiver's thinking, bound to the view's
    conversation, and every later request of the session would be refused. From the first
    filtered handoff's results on, that thinking (and any system entry) is left out here as a
    finalize would have. Only on an append-only conversation (the history opens with its base);
    None when nothing changes.
    """
    from agentloop.engine.appendonly import is_base

    if not history or not is_base(history[0]):
        return None
    for run in runs:
        call_id = filtered_transfer(start, run)
        at = None if call_id is None else _results_of(history, call_id)
        if at is None:
            continue
        kept = _left_out(history[at:])
        if kept is not None:
            return [*history[:at], *kept]
    return None


def _results_of(history: Sequence[Message], call_id: str) -> int | None:
    """Where the ``tool`` message with ``call_id``'s result is, from the end (None: not there)."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "tool" and any(
            getattr(p, "call_id", None) == call_id for p in message.parts
        ):
            return index
    return None


def _left_out(after: Sequence[Message]) -> list[Message] | None:
    """``after`` without thinking and system entries (None: it has neither)."""
    from agentloop.engine.appendonly import without_thinking

    kept = [m for m in map(without_thinking, after) if m is not None and m.role != "system"]
    if len(kept) == len(after) and all(a is b for a, b in zip(kept, after, strict=True)):
        return None
    return kept
