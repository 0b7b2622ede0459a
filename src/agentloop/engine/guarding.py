"""One run's guardrails (SPEC 19): when each check runs, what the run waits for, what is held.

- **Input**, once per run (``start``): the blocking checks before the first request; the
  parallel ones in a task beside it. ``race`` runs a model step against that task: a trip
  cancels the step at once; a reply that comes first waits for the verdict before the engine
  acts on it (no tool runs, the run does not end). The wait costs ``max(0, check - first
  reply)``, once per run. A run ``continue_run`` picks up is not checked again: the pass is
  journaled, and a run that completed a turn had passed.
- **Tool results** (``screen``): input guardrails with ``tool_results=True`` check each result
  before the model reads it; a trip ends the run and the result is never sent.
- **Output** (``check_output``): the answer, after validation. A trip withholds the reply: the
  transcript, the run record and the events keep a placeholder instead of its text and
  ``final_result`` arguments. ``retry=True`` makes it the soft ``Output rejected: <reason>``,
  counted with invalid outputs in ``output_retries``.
- **Holdback** (``agentloop.engine.holdback``): with output guardrails, a model call's events
  wait until the reply is known not to be the answer, or the answer passed; with a parallel
  input check, the first call's events also wait for the input's verdict.

Checks of one kind run concurrently; the first hard trip cancels the rest. Each verdict is a
``GuardrailChecked`` event. A check's model calls through ``ctx.client`` count in the run's
usage and budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Container, Coroutine, Iterable, Sequence
from typing import Any, Literal, NamedTuple

from agentloop import events as ev
from agentloop._util.slots import record
from agentloop.clock import Clock
from agentloop.engine.holdback import CUT_SHORT_TEXT, WITHHELD_TEXT, Holdback, withheld
from agentloop.engine.journal import Journal
from agentloop.engine.limits import Limits
from agentloop.engine.output import FINAL_RESULT
from agentloop.engine.overrides import swap_of
from agentloop.engine.state import RunState
from agentloop.errors import ConfigurationError, GuardrailTripped
from agentloop.guardrails import Guardrail, GuardrailContext, InputGuardrail, OutputGuardrail
from agentloop.messages import ToolCallPart, ToolResultPart, Usage
from agentloop.model import ModelClient, ModelResponse
from agentloop.observers import EventBus
from agentloop.run import Turn

__all__ = [
    "run_guard",
    "INPUT_PASSED",
    "REJECTED_TEXT",
    "Guardrails",
    "RunGuard",
    "Services",
    "checked_guardrails",
]

REJECTED_TEXT = "Output rejected: {reason}"
"""What the model reads for an answer an ``OutputGuardrail(retry=True)`` rejected (soft)."""
INPUT_PASSED = "guardrails/input"
"""The journal key that says this run's input guardrails passed (not run again on continue)."""

Kind = Literal["input", "tool_result", "output"]


class Guardrails:
    """An agent's guardrails, sorted by when they run (built once; every session shares them)."""

    __slots__ = ("blocking", "output", "parallel", "screens")

    def __init__(self, items: Sequence[Guardrail]) -> None:
        inputs = [g for g in items if isinstance(g, InputGuardrail)]
        self.blocking = tuple(g for g in inputs if not g.parallel)
        self.parallel = tuple(g for g in inputs if g.parallel)
        self.screens = tuple(g for g in inputs if g.tool_results)
        self.output = tuple(g for g in items if isinstance(g, OutputGuardrail))


def checked_guardrails(items: object) -> Guardrails | None:
    """``Agent(guardrails=...)`` checked; None when there are none (a run then pays nothing)."""
    if items is None or (not items and isinstance(items, list | tuple)):
        return None
    if isinstance(items, Guardrail | str | bytes) or not isinstance(items, Iterable):
        raise ConfigurationError(
            f"Agent guardrails must be a list of InputGuardrail or OutputGuardrail, got "
            f"{items!r}; write guardrails=[...]",
            field="guardrails",
        )
    listed = list(items)
    names: set[str] = set()
    for item in listed:
        if not isinstance(item, InputGuardrail | OutputGuardrail):
            hint = "; wrap a check: InputGuardrail(check)" if callable(item) else ""
            raise ConfigurationError(
                f"Agent guardrails takes InputGuardrail and OutputGuardrail, got {item!r}{hint}",
                field="guardrails",
            )
        if item.name in names:
            raise ConfigurationError(
                f"two guardrails are named {item.name!r}; give one another name=",
                field="guardrails",
            )
        names.add(item.name)
    return Guardrails(listed) if listed else None


class _Trip(NamedTuple):
    guardrail: Guardrail
    reason: str

    def error(self) -> GuardrailTripped:
        return GuardrailTripped(self.guardrail.name, self.reason)


@record
class Services:
    """What a run's guardrails use of the session and the agent (passed, not their owners)."""

    bus: EventBus
    session_id: str
    client: ModelClient
    clock: Clock
    limits: Limits
    output_retries: int
    journal: Journal | None
    batch: bool = False
    """A batch run (SPEC 25): its parallel input checks run as blocking ones."""


class RunGuard:
    """The guardrail work of one run over ``state``."""

    __slots__ = ("guardrails", "holdback", "pending", "services", "state")

    def __init__(self, guardrails: Guardrails, state: RunState, services: Services) -> None:
        self.guardrails = guardrails
        self.state = state
        self.services = services
        self.pending: asyncio.Task[list[_Trip]] | None = None
        # output checks hold a reply's text until it passed; a parallel input check holds the
        # first reply's events until the input passed (text made from an unchecked prompt)
        held = guardrails.output or guardrails.parallel
        self.holdback = Holdback(services.bus) if held else None

    # -- input ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Check the input: the blocking checks now, the parallel ones in a task."""
        guardrails = self.guardrails
        if not (guardrails.blocking or guardrails.parallel) or self._input_passed():
            return
        value = self.state.run.input
        blocking, parallel = guardrails.blocking, guardrails.parallel
        if parallel and self.services.batch:  # SPEC 25: nothing to race beside
            blocking, parallel = (*blocking, *parallel), ()
        if parallel:
            checks = self._check_all(parallel, self._context("input"), value)
            self.pending = asyncio.get_running_loop().create_task(checks)
        if blocking:
            trips = await self._check_all(blocking, self._context("input"), value)
            if trips:
                raise trips[0].error()
        if self.pending is None:
            self._journal_pass()

    async def race(self, step: Coroutine[Any, Any, ModelResponse | None]) -> ModelResponse | None:
        """``step`` beside the pending input checks; returns once both are done, or raises."""
        pending = self.pending
        if pending is not None and pending.done():  # decided while the blocking checks ran
            try:
                self._settle(pending)
            except BaseException:
                step.close()  # never started: no request is sent
                raise
            pending = None
        if pending is None:
            return await step
        if self.holdback is not None:
            self.holdback.start(early=False)  # nothing of this call goes out before the verdict
        task = asyncio.get_running_loop().create_task(step)
        try:
            await asyncio.wait((task, pending), return_when=asyncio.FIRST_COMPLETED)
            if task.done() and not task.cancelled() and task.exception() is None:
                await asyncio.wait((pending,))  # the reply waits for the verdict
            if pending.done():
                self._settle(pending)
            return await task
        finally:
            if not task.done():  # a trip, or this run was cancelled: the turn goes
                task.cancel()
                await asyncio.wait((task,))

    def _settle(self, pending: asyncio.Task[list[_Trip]]) -> None:
        self.pending = None
        trips = pending.result()
        if trips:
            raise trips[0].error()
        self._journal_pass()
        if not self.guardrails.output:
            self.release()

    def _input_passed(self) -> bool:
        """Whether this run already passed its input checks (``continue_run``)."""
        if self.state.turn_index > 0:
            return True
        journal = self.services.journal
        return (
            journal is not None
            and journal.run_id == self.state.run.id
            and INPUT_PASSED in journal.entries
        )

    def _journal_pass(self) -> None:
        journal = self.services.journal
        if journal is None:
            return
        if journal.run_id != self.state.run.id:
            journal.start(self.state.run.id)
        journal.record(INPUT_PASSED, {"passed": True})

    # -- tool results --------------------------------------------------------------------------

    async def screen(
        self,
        calls: Sequence[ToolCallPart],
        results: Sequence[ToolResultPart],
        *,
        skip: Container[str] = (),
    ) -> None:
        """Check each tool result (of a call not in ``skip``) before the model reads it.

        Raises:
            GuardrailTripped: A result tripped a guardrail; the model never reads it.
        """
        screens = self.guardrails.screens
        for call, result in zip(calls, results, strict=True):
            if call.id in skip:
                continue  # the engine's own soft text, not a tool's output
            context = self._context("tool_result", call)
            trips = await self._check_all(screens, context, result.content)
            if trips:
                raise trips[0].error()

    # -- output --------------------------------------------------------------------------------

    async def check_output(self, turn: Turn, response: ModelResponse, value: Any) -> str | None:
        """None when the answer passed (held events released); else the soft rejection text.

        Raises:
            GuardrailTripped: A guardrail without ``retry`` tripped, or rejections and invalid
                outputs together ran past ``output_retries``.
        """
        trips = await self._check_all(self.guardrails.output, self._context("output"), value)
        if not trips:
            self.release()
            return None
        hard = next((t for t in trips if not _soft(t.guardrail)), None)
        chosen = hard or trips[0]
        self._withhold(turn, response, chosen.guardrail.name)
        if hard is not None:
            raise hard.error()
        state = self.state
        state.invalid_outputs += 1
        if state.invalid_outputs > self.services.output_retries:
            raise chosen.error()
        return REJECTED_TEXT.format(reason=chosen.reason)

    def _withhold(self, turn: Turn, response: ModelResponse, name: str) -> None:
        """Put the placeholder where the rejected reply was: transcript, audit, turn, events."""
        note = WITHHELD_TEXT.format(name=name)
        message = withheld(response.message, note)
        for messages in (self.state.transcript, self.state.audit):
            if messages and messages[-1] is response.message:
                messages[-1] = message
        turn.text = message.text
        turn.tool_calls = list(message.tool_calls)
        if self.holdback is not None:
            self.holdback.drop(note)

    # -- events --------------------------------------------------------------------------------

    def hold(self) -> None:
        """A model call starts: hold its events (with output guardrails)."""
        if self.holdback is not None and self.guardrails.output:
            self.holdback.start(early=FINAL_RESULT not in self.state.offer.names)

    def release(self) -> None:
        """The reply is not the answer, or the answer passed: let the held events go."""
        if self.holdback is not None:
            self.holdback.release()

    async def close(self) -> None:
        """Finalize: stop a pending check; nothing held about an unchecked answer goes out."""
        pending, self.pending = self.pending, None
        if pending is not None and not pending.done():
            pending.cancel()
            await asyncio.wait((pending,))
        if self.holdback is not None and self.holdback.bus.gate is self.holdback:
            self.holdback.drop(CUT_SHORT_TEXT, whole=True)

    # -- the checks ----------------------------------------------------------------------------

    def _context(self, kind: Kind, call: ToolCallPart | None = None) -> GuardrailContext[Any]:
        state, services = self.state, self.services
        return GuardrailContext(
            state.deps,
            state.run.id,
            services.session_id,
            state.turn_index,
            kind,
            call,
            services.client,
            self._report,
        )

    def _report(self, usage: Usage, model: str) -> None:
        """A check's own model call: it counts in the run's usage and budget."""
        self.state.run.usage = self.state.run.usage + usage
        self.services.limits.spent(usage, model)

    async def _check_all(
        self, guardrails: Sequence[Guardrail], ctx: GuardrailContext[Any], value: Any
    ) -> list[_Trip]:
        """Run the checks concurrently; the first hard trip cancels the rest. Trips in order."""
        if len(guardrails) == 1:
            reason = await self._check(guardrails[0], ctx, value)
            return [] if reason is None else [_Trip(guardrails[0], reason)]
        loop = asyncio.get_running_loop()
        tasks = {loop.create_task(self._check(g, ctx, value)): g for g in guardrails}
        reasons: dict[Guardrail, str] = {}
        waiting = set(tasks)
        try:
            while waiting:
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    reason = task.result()
                    if reason is not None:
                        reasons[tasks[task]] = reason
                if any(not _soft(g) for g in reasons):
                    break
        finally:
            for task in waiting:
                task.cancel()
            if waiting:
                await asyncio.wait(waiting)
        return [_Trip(g, reasons[g]) for g in guardrails if g in reasons]

    async def _check(
        self, guardrail: Guardrail, ctx: GuardrailContext[Any], value: Any
    ) -> str | None:
        clock = self.services.clock
        started = clock.monotonic()
        reason = await guardrail.evaluate(ctx, value)
        bus = self.services.bus
        if bus.active:
            bus.emit(
                ev.GuardrailChecked(
                    ctx.run_id,
                    ctx.turn,
                    guardrail.name,
                    reason is not None,
                    clock.monotonic() - started,
                    kind=ctx.kind,
                    reason=reason,
                    soft=reason is not None and _soft(guardrail),
                )
            )
        return reason


def _soft(guardrail: Guardrail) -> bool:
    """Whether a trip of ``guardrail`` is a rejection the model answers again."""
    return isinstance(guardrail, OutputGuardrail) and guardrail.retry


def run_guard(session: Any, state: RunState, ruling: Any) -> RunGuard | None:
    """The guardrail work of a run of ``session``; None when no guardrail applies.

    ``session`` is a ``Conversation``, not imported here: it imports this module's neighbours.
    The input guardrails are the starting agent's; the output guardrails are those of the agent
    that rules now (``ruling``): the receiver of a handoff (SPEC 26), else the starting agent.
    """
    agent = session.agent
    guardrails = agent._guardrails
    if ruling is not agent:
        inputs = () if guardrails is None else (*guardrails.blocking, *guardrails.parallel)
        outputs = () if ruling._guardrails is None else ruling._guardrails.output
        guardrails = Guardrails([*inputs, *outputs]) if inputs or outputs else None
    if guardrails is None:
        return None
    swap = swap_of(agent)  # a check's model calls go where the run's go (agent.override())
    services = Services(
        bus=session._bus,
        session_id=session.id,
        client=swap.client if swap is not None and swap.client is not None else ruling.client,
        clock=agent.clock,
        limits=session.safety,
        output_retries=agent.config.output_retries,
        journal=session._journal,
        batch=agent.config.batch,
    )
    return RunGuard(guardrails, state, services)
