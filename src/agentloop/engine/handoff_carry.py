"""What a run carries across a handoff (SPEC 26): the starting agent's memory, governor, batch.

``ruling`` gives what the receiver rules with: its client, tools and toolsets (those of a
``receiver.override(...)`` block, SPEC 21, when one is open: a test that scripts the receiver
never reaches its real model), with what the run carries:

- ``with_memory``: a receiver's model that remembers something must reach the same store, under
  the same key, through the same finalize. The receiver's registry gets a live view
  (``MemoryJoined``: a tool source's list change still shows) with the starting agent's memory
  tools beside its own, made for the receiver's client (Anthropic's memory tool on Claude, the
  three tools elsewhere).
- ``carried_client``: the receiver's requests pass the starting agent's governor (SPEC 25: every
  HTTP request waits for it), unless the receiver's client is governed already (its own
  ``Agent(governor=...)``, which then rules its requests); and a batch run's (the starting
  agent's ``RunConfig(batch=True)`` governs the run) go through the provider's batch API as its
  first turns did, never synchronously at full price while ``Turn.batch`` says half.

``check_receivers`` refuses at construction what cannot work: a receiver tool that takes a
memory tool's name, or ``Memory(anthropic_tool=True)`` with a receiver that is not Claude.

``turn_agent`` is the agent a paused turn's decisions are checked against (SPEC 17: the agent
of its turn), by the engine and by every face that checks before it continues (A2A, the viewer,
the CLI): the receiver the run paused in, so its call can be approved; a receiver the continuing
agent's handoffs no longer reach (a deploy that renamed or dropped it) has no tools, so an
approval of its call is refused, never spent on a tool of the same name that another agent has.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentloop._util.governing import governed_as
from agentloop.engine.overrides import swap_of
from agentloop.errors import ConfigurationError
from agentloop.model import ModelClient, ToolSpec
from agentloop.tools import Tool, ToolRegistry

__all__ = [
    "MemoryJoined",
    "carried_client",
    "check_receivers",
    "crashed_in",
    "filtered_transfer",
    "governed",
    "reached",
    "ruling",
    "turn_agent",
    "viewed",
    "with_memory",
]


class MemoryJoined(ToolRegistry):
    """``inner`` (read live) with ``extra`` tools beside it; ``extra`` wins a name."""

    def __init__(self, inner: ToolRegistry, extra: list[Tool]) -> None:
        super().__init__()
        self.inner = inner
        self.extra = {t.name: t for t in extra}

    @property
    def deferring(self) -> bool:
        """The inner registry's (the memory tools are never deferred)."""
        return bool(getattr(self, "inner", None) is not None and self.inner.deferring)

    @deferring.setter
    def deferring(self, value: bool) -> None:
        """``ToolRegistry.__init__`` sets it; the inner registry's answers."""

    def register(self, item: Any) -> Tool:
        """Register in the inner registry (the receiver's own)."""
        return self.inner.register(item)

    def unregister(self, name: str) -> None:
        """Remove from the inner registry (the memory tools stay)."""
        self.inner.unregister(name)

    def get(self, name: str) -> Tool | None:
        """A memory tool, else the receiver's."""
        found = self.extra.get(name)
        return found if found is not None else self.inner.get(name)

    def names(self) -> list[str]:
        """Every name, sorted."""
        return sorted({*self.inner.names(), *self.extra})

    def specs(self) -> tuple[ToolSpec, ...]:
        """The receiver's specs, then the memory tools'."""
        own = tuple(s for s in self.inner.specs() if s.name not in self.extra)
        return (*own, *(t.spec() for t in self.extra.values()))

    def __contains__(self, name: object) -> bool:
        return name in self.extra or name in self.inner

    def __len__(self) -> int:
        return len(self.names())

    def __iter__(self) -> Iterator[Tool]:
        yield from (t for t in self.inner if t.name not in self.extra)
        yield from self.extra.values()


def ruling(
    session: Any, state: Any, receiver: Any
) -> tuple[ModelClient, ModelClient, ToolRegistry, tuple[Any, ...]]:
    """What a receiver rules the run with (see the module).

    Returns the client its turns call (governed, batched), its own client, its registry (with
    the starting agent's memory tools) and its toolsets; ``receiver.override(...)`` (SPEC 21)
    replaces its own client, tools and toolsets, as it does for a run the receiver starts.
    """
    swap = swap_of(receiver)
    own = receiver.client if swap is None or swap.client is None else swap.client
    tools = receiver.registry if swap is None or swap.registry is None else swap.registry
    sets = receiver._sets if swap is None or swap.toolsets is None else swap.toolsets
    registry = with_memory(session.agent, receiver, tools, own)
    durable = getattr(session.agent.client, "for_receiver", None)  # a step/activity client
    turns = own if durable is None else durable(receiver, own)
    return carried_client(session, state, turns), own, registry, tuple(sets)


def viewed(session: Any, receiver: Any, registry: Any, sets: tuple[Any, ...]) -> Any:
    """What a receiver's calls look its tools up in: the run's view over them, if it has one.

    A durable run's tools are steps or activities, a stored run's journaled (SPEC 14): a
    receiver's are too. With toolsets or deferred tools its plan applies the view per call.
    """
    view = session._dispatcher.registry
    if sets or registry.deferring or not hasattr(view, "over"):
        return registry
    durable = getattr(view, "for_receiver", None)
    return view.over(registry) if durable is None else durable(receiver, registry)


def with_memory(
    start: Any, receiver: Any, registry: ToolRegistry, client: ModelClient
) -> ToolRegistry:
    """``registry`` with ``start``'s memory tools (made for ``client``) beside it, if any."""
    memory = getattr(start, "memory", None)
    if memory is None or receiver is start:
        return registry
    return MemoryJoined(registry, memory.tools(client))


def carried_client(session: Any, state: Any, client: ModelClient) -> ModelClient:
    """``client`` governed and batched as the run's first turns are.

    Governed by the starting agent's governor, else by the one the run's requests wait for so
    far (an agent run as a tool is governed as its parent is: its receiver stays so).
    """
    client = governed(session.agent, client)
    if getattr(session.agent, "governor", None) is None:
        counter = session.agent.config.token_counter  # the run's current client's governor
        client = governed_as(getattr(state, "client", None), client, counter)
    if session.agent.config.batch:
        from agentloop.fleet._batch_client import BatchClient

        client = BatchClient(client, state, session._recorder)
    return client


def governed(start: Any, client: ModelClient) -> ModelClient:
    """``client`` under ``start``'s governor, if it has one and ``client`` has none of its own."""
    governor = getattr(start, "governor", None)
    if governor is None or _has_governor(client):
        return client
    from agentloop.fleet import govern

    return govern(client, governor, start.config.token_counter)


def _has_governor(client: object) -> bool:
    """Whether a ``GovernedClient`` is anywhere in ``client``'s wrappers or chain."""
    from agentloop.fleet import GovernedClient

    if isinstance(client, GovernedClient):
        return True
    inner = getattr(client, "inner", None)
    if inner is not None and _has_governor(inner):
        return True
    chain = getattr(client, "clients", None)
    return isinstance(chain, tuple) and any(_has_governor(c) for c in chain)


def check_receivers(start: Any, receivers: list[Any]) -> None:
    """``ConfigurationError`` for a receiver that cannot carry ``start``'s memory (see module)."""
    memory = getattr(start, "memory", None)
    if memory is None:
        return
    from agentloop.memory._capability import TOOL_NAMES, Memory

    for receiver in receivers:
        taken = [n for n in TOOL_NAMES if n in receiver.registry]
        if taken and getattr(receiver, "memory", None) is None:
            raise ConfigurationError(
                f"the handoff receiver {receiver.name!r} has a tool named '{taken[0]}', a name "
                f"the starting agent's memory= gives the model after a handoff "
                f"({', '.join(TOOL_NAMES)}): rename that tool",
                field="handoffs",
            )
        assert isinstance(memory, Memory)
        memory.native(receiver.client)  # anthropic_tool=True with another client: refused


class _Absent:
    """The agent of a paused turn that is not reachable here: it has no tools (``turn_agent``)."""

    def __init__(self, name: str) -> None:
        from agentloop.engine.toolsets import Toolsets

        self.name = name
        self.registry = ToolRegistry()
        self._toolsets = Toolsets((), self.registry)


def turn_agent(start: Any, name: str | None) -> Any:
    """The agent of a paused turn run by ``name`` (None: ``start``), or one with no tools.

    A continuing agent without handoffs (``agentloop continue``'s, a worker built with the
    tools alone) is judged itself, as ever; one whose handoffs do not reach ``name`` (renamed
    or dropped since the pause) judges the call with no tools.
    """
    if name is None or not getattr(start, "_handoffs", ()):
        return start
    found = reached(start, name)
    return _Absent(name) if found is None else found


def reached(start: Any, name: str) -> Any:
    """The agent a handoff named ``name`` reaches from ``start``'s graph; None if none does."""
    queue: list[Any] = list(getattr(start, "_handoffs", ()))
    seen: set[int] = set()
    while queue:
        item = queue.pop()
        if item.name == name:
            return item.agent
        if id(item.agent) not in seen:
            seen.add(id(item.agent))
            queue.extend(getattr(item.agent, "_handoffs", ()))
    return None


def crashed_in(start: Any, run: Any) -> tuple[str | None, bool]:
    """The agent a crashed run was in (its handoff name; None: ``start``), from its turns.

    A turn's successful ``transfer_to_<name>`` call moved the run to that receiver (the stored
    ``last_agent`` is the one of the last commit, before the handoff took over). The flag: a
    handoff with an ``input_filter`` led there, whose view (the receiver's transcript) is kept
    with a pause only, never for a crash.
    """
    name: str | None = None
    filtered = False
    for item, _ in _transfers(start, run):
        name, filtered = item.name, filtered or item.input_filter is not None
    return name, filtered


def filtered_transfer(start: Any, run: Any) -> str | None:
    """The call id of a run's first handoff through an ``input_filter`` (None: it made none)."""
    return next((i for item, i in _transfers(start, run) if item.input_filter is not None), None)


def _transfers(start: Any, run: Any) -> Iterator[tuple[Any, str]]:
    """Each handoff a run's turns made (its ``Handoff`` and the call's id), in order."""
    for turn in run.turns:
        handoffs = getattr(turn_agent(start, turn.agent), "_handoffs", ())
        done = {r.call_id for r in turn.tool_results if not r.is_error}
        for call in turn.tool_calls:
            for item in handoffs:
                if call.name == item.tool_name and call.id in done:
                    yield item, call.id
