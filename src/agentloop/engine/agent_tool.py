"""``agent.as_tool()``: another agent as one tool of a parent run (SPEC 13).

Each call is a fresh conversation of the child (a new unsaved session of the child agent: no
history, the child's shared tool breakers), so parallel calls are independent. The child's
output is the tool's result (typed output as JSON); its hard error is the parent's soft error
``agent '<name>' stopped: <Class>: <message>``.
A parent cancel (its ``CancelToken`` or its task) reaches the child, which ends ``Cancelled``;
that is never a soft error: the call is cancelled with it and the parent ends ``Cancelled``, its
history without the interrupted turn. The child's usage is added to the parent run's usage, and
its events reach the parent's observers and stream with ``path`` naming the agents from the root.

Pausing (SPEC 17): a child whose run pauses pauses its parent. Its pending calls join the
parent's ``run.pending`` with ``path`` naming the child; the parent's decisions for them continue
the child, whose output then becomes the call's result. Recording (SPEC 18): when the parent's
session has a store, each call runs a session of the child agent stored there, its run linked to
the parent's tool call (``Run.parent``), so a paused child also survives its process.

A batch agent (``RunConfig(batch=True)``) is no tool: its run waits on a provider batch while
the parent waits for the call, so ``as_tool()`` refuses it (``ConfigurationError``).

Depth: a chain of delegations is at most ``MAX_DELEGATION_DEPTH`` (8) agents deep; a call
past it never starts the child and reads ``agent '<name>' not run: delegation deeper than 8``.

Budget: a child cannot spend past its parent's budget. Its gate is a ``SharedBudget``: the
child's own lines, plus every line of the parent (and so of every ancestor). Each response,
turn and tool call of the child is counted in the parent's gate as it happens, and the child's
next request is refused when either gate is exhausted: the child stops with
``BudgetExhausted``, which the parent's model reads as the soft ``agent '<name>' stopped: ...``
text, and then the parent's own next request is refused with ``BudgetExhausted`` too (the spend
is the parent's). As for any run, the request that crosses a line completes; parallel children
share the parent's gate, so they overshoot it by at most their requests in flight.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Callable, Mapping
from typing import Any

from agentloop._util.numbers import is_finite
from agentloop._util.toolname import check_tool_name
from agentloop.engine.session import Session
from agentloop.errors import AgentLoopError, Cancelled, ConfigurationError, ToolError
from agentloop.events import Event
from agentloop.messages import Usage
from agentloop.safety.budget import Budget, BudgetGate, BudgetWarning
from agentloop.tools import Tool, ToolContext

__all__ = ["MAX_DELEGATION_DEPTH", "AgentTool", "SharedBudget"]

MAX_DELEGATION_DEPTH = 8
"""How deep agents may delegate (a child is depth 1, its child 2, ...): past it, the call is
the soft ``agent '<name>' not run: delegation deeper than 8``. An agent that is its own tool, or
A→B→A, would otherwise delegate forever: its turns never complete, so no budget counts them."""


def _own_timeout(name: str, timeout: object) -> float:
    """``as_tool(timeout=)`` as the tool's own: None is no tool timeout (0, as ``@tool``'s 0).

    A child agent's run is bounded by its own ``RunConfig`` limits, so the parent's
    ``RunConfig.tool_timeout`` does not cut it (SPEC 13); a number is the tool's timeout, whose
    expiry cancels the child and reads ``Tool '<name>' timed out after Ns`` (SPEC 3).
    """
    if timeout is None:
        return 0.0
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not is_finite(timeout):
        raise ConfigurationError(
            f"as_tool(name={name!r}): timeout must be a number of seconds or None (no tool "
            f"timeout), got {timeout!r}",
            field="timeout",
        )
    if timeout < 0:
        raise ConfigurationError(
            f"as_tool(name={name!r}): timeout must be >= 0 (None or 0: no tool timeout)",
            field="timeout",
        )
    return float(timeout)


class AgentTool(Tool):
    """A ``Tool`` whose one parameter, ``input``, is the child agent's prompt."""

    def __init__(
        self,
        new_session: Callable[[], Session[Any]],
        *,
        name: str,
        description: str,
        agent: Any = None,
        timeout: float | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError("as_tool() needs a non-empty name", field="name")
        check_tool_name(name, "as_tool()", field="name")  # SPEC 22, before any request
        if not isinstance(description, str) or not description.strip():
            raise ConfigurationError(
                f"as_tool(name={name!r}) needs a description the parent model can read",
                field="description",
            )
        if getattr(getattr(agent, "config", None), "batch", False):  # SPEC 25
            raise ConfigurationError(
                f"as_tool(name={name!r}): a tool answers while its parent waits, and an agent "
                "with RunConfig(batch=True) waits on provider batches; make the tool of an "
                "agent without batch=True",
                field="batch",
            )
        self.new_session = new_session
        self.agent = agent
        """The child agent (``Agent.as_tool`` gives it): recorded sessions are made on it."""
        self.name = name
        self.description = description
        self.parameters = {
            "type": "object",
            "properties": {"input": {"type": "string", "description": f"The request for {name}."}},
            "required": ["input"],
        }
        self.timeout = _own_timeout(name, timeout)

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """``input`` must be a string."""
        value = arguments.get("input")
        if not isinstance(value, str):
            problem = "Field required" if "input" not in arguments else "Input should be a string"
            raise ToolError(f"Invalid arguments for tool '{self.name}': input: {problem}")
        return {"input": value}

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Run a fresh conversation of the child; its hard error becomes soft text.

        The conversation is a new unsaved session of the child agent, so the child's tool
        breakers and model health carry over from one call to the next.
        """
        link = ctx._link
        depth = 1 if link is None else link[0].depth + 1
        if depth > MAX_DELEGATION_DEPTH:
            raise ToolError(
                f"agent '{self.name}' not run: delegation deeper than {MAX_DELEGATION_DEPTH}"
            )
        state = link[0] if link is not None else None
        entry: Any = state.children.get(ctx.call_id) if state and state.children else None
        resume = entry is not None and entry[0] == "resume"
        child = entry[1] if resume else self._session(link)
        forward = self._budget_and_events(child, link)
        if resume:  # the parent's decisions continue it
            begun = child._continued(entry[2], ctx.deps, (ctx.cancel,), forward)
        else:
            begun = child._begin(arguments["input"], ctx.deps, (ctx.cancel,), forward)
            if state is not None:
                begun.run.parent = {
                    "session_id": link[1].session_id,
                    "run_id": state.run.id,
                    "call_id": ctx.call_id,
                    "tool": self.name,
                }
        begun.depth = depth
        if state is not None:
            _governed_as_parent(begun, state, child.agent.config.token_counter)
        before = begun.run.usage  # a continued child's earlier usage was rolled up already
        try:
            run = await child._drive(begun)
        except Cancelled:  # only the parent cancels a child, and a cancel is never soft
            raise asyncio.CancelledError from None
        except AgentLoopError as error:
            raise ToolError(
                f"agent '{self.name}' stopped: {type(error).__name__}: {error}"
            ) from None
        finally:
            if link is not None:
                _roll_up(link, child, before)
        if run.paused:
            self._paused(state, ctx.call_id, child, run)
            return ""
        return run.output

    def _budget_and_events(self, child: Session[Any], link: Any) -> Callable[[Event], None] | None:
        """Share the parent's budget with the child; its events' forwarder to the parent."""
        if link is None:
            return None
        limits = child.safety
        limits.budget = SharedBudget(child.agent.config.budget, link[1].safety.budget)
        bus = link[1].observers
        if not bus.active:
            return None
        prefix = (self.name,)

        def forward(event: Event) -> None:
            bus.emit(dataclasses.replace(event, path=prefix + event.path))

        return forward

    def _paused(self, state: Any, call_id: str, child: Session[Any], run: Any) -> None:
        """The child paused: its pending calls, named by the path, wait in the parent's state."""
        if state is None:
            raise ToolError(f"agent '{self.name}' paused, and no parent run can wait for it")
        if state.children is None:
            state.children = {}
        pending = tuple(dataclasses.replace(p, path=(self.name, *p.path)) for p in run.pending)
        state.children[call_id] = ("paused", child, pending)

    def _session(self, link: Any) -> Session[Any]:
        """A new conversation of the child: stored beside the parent's runs when it has a store."""
        store = link[1].store if link is not None else None
        if store is not None and self.agent is not None:
            return self.agent.session(store=store)  # type: ignore[no-any-return]
        return self.new_session()


def _governed_as_parent(child: Any, parent: Any, counter: Any) -> None:
    """The child's requests wait for the governor its parent's wait for (SPEC 25 x 13).

    Unless the child's client has a governor of its own (``Agent(governor=...)``), which then
    rules, as for a handoff's receiver (SPEC 26). Nothing of the fleet is loaded when nothing
    imported it: then no client anywhere is governed.
    """
    fleet = sys.modules.get("agentloop.fleet._client")
    if fleet is None:
        return
    governor = fleet.governor_of(parent.client)
    if governor is None or fleet.governor_of(child.client) is not None:
        return
    child.client = fleet.govern(child.client, governor, counter)


def _roll_up(link: tuple[Any, Any], child: Session[Any], before: Usage) -> None:
    """Add the child's new usage to the parent run (its budget counted it as it was spent)."""
    state = link[0]
    run = child.current_run
    if run is not None:
        state.run.usage = state.run.usage + (run.usage - before)


class SharedBudget(BudgetGate):
    """A child run's gate: its own lines, and its parent's gate, which counts all it spends.

    Args:
        own: the child agent's own ``Budget``.
        parent: the parent run's gate (a ``SharedBudget`` itself for a grandchild).
    """

    def __init__(self, own: Budget, parent: BudgetGate) -> None:
        super().__init__(own)
        self.parent = parent

    def record_usage(self, usage: Usage, model: str) -> None:
        """Count a response here and in the parent (priced by each gate's own prices)."""
        super().record_usage(usage, model)
        self.parent.record_usage(usage, model)

    def record_turn(self) -> None:
        """Count a completed turn here and in the parent."""
        super().record_turn()
        self.parent.record_turn()

    def record_tool_calls(self, n: int) -> None:
        """Count dispatched tool calls here and in the parent."""
        super().record_tool_calls(n)
        self.parent.record_tool_calls(n)

    def wall_clock_left(self) -> tuple[float, float] | None:
        """The wall-clock line that ends first, the child's own or an ancestor's (SPEC 25)."""
        lines = [
            line for line in (super().wall_clock_left(), self.parent.wall_clock_left()) if line
        ]
        return min(lines, key=lambda line: line[1] - line[0], default=None)

    def counts_tokens(self) -> bool:
        """Whether this gate or an ancestor's is spent by tokens."""
        return super().counts_tokens() or self.parent.counts_tokens()

    def exhausted(self) -> AgentLoopError | None:
        """The first exhausted line here, else in the parent's gate."""
        return super().exhausted() or self.parent.exhausted()

    def pre_request(self) -> tuple[list[BudgetWarning], AgentLoopError | None]:
        """The child's own warnings; refused when its own or an ancestor's line is spent."""
        warnings, exhausted = super().pre_request()
        return warnings, exhausted or self.parent.exhausted()
