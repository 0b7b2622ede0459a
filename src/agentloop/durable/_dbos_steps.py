"""The DBOS steps of a ``DBOSAgent`` run: the model client and the tools as DBOS steps.

``dbos.py`` is what an application builds (``DBOSAgent``, ``DBOSRun``); this module is the two
seams its workflow swaps into a fresh conversation (the same two the plain store's journal
uses, ``agentloop.engine.journal``): ``StepClient`` makes each model call the step
``<name>.model``, and ``StepTools`` each tool call the step ``<name>.tool.<tool>`` (but
``inline_tools``). ``_Flow`` is one execution of a run's workflow: its step names, its cancel, the
step IDs a turn's tool calls drew together (in the model's order, before the first one runs, so
parallel calls replay onto the right records), and the calls a person decided (run at most
once: a marker step before the tool step, see ``_dbos_pause``).
"""

from __future__ import annotations

import asyncio
import pickle
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from dbos import DBOS, StepOptions, StepReservation
from dbos import error as dbos_error

from agentloop.durable._replay import Replays, guard_key
from agentloop.engine.journal import (
    ToolsView,
    WrappedClient,
    WrappedTool,
    output_entry,
    replayed_output,
)
from agentloop.engine.turn import collect_stream
from agentloop.errors import InternalError, ToolError
from agentloop.guardrails import Guardrail, GuardrailContext
from agentloop.guardrails._base import Live
from agentloop.messages import Usage
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent
from agentloop.pausing import LOST_TEXT
from agentloop.tools import Tool, ToolContext, ToolOutput, ToolRegistry, render_content

__all__ = ["PAUSED_CHILD_TEXT", "Flow", "StepClient", "StepTool", "StepTools"]


class Flow:
    """One execution of a run's workflow: its step names, its cancel, the turn's reserved steps."""

    def __init__(self, name: str, cancel_run: Callable[[], None]) -> None:
        self.name = name
        self.cancel_run = cancel_run
        self.cancelled: BaseException | None = None
        self.token = uuid.uuid4().hex  # this execution's, to tell its marker steps from others'
        self.decided: frozenset[str] = frozenset()  # the calls a person approved (or edited)
        self.replays = Replays()  # which calls this execution answered from the record
        self.run_id = ""  # the run's id (its first workflow's), set once the run begins
        self._turn = -1
        self._reserved: dict[str, StepReservation] = {}

    async def step(
        self,
        name: str,
        func: Callable[..., Coroutine[Any, Any, Any]],
        *args: Any,
        reservation: StepReservation | None = None,
    ) -> Any:
        """``func(*args)`` as the DBOS step ``<flow>.<name>`` (at ``reservation`` if given)."""
        options: StepOptions = {"name": f"{self.name}.{name}", "preemptible": True}
        try:
            if reservation is not None:
                return await reservation.run_async(options, func, *args)
            return await DBOS.run_step_async(options, func, *args)
        except dbos_error.DBOSWorkflowCancelledError as exc:
            self.cancelled = exc
            raise

    async def recorded(
        self,
        name: str,
        func: Callable[..., Coroutine[Any, Any, Any]],
        *args: Any,
        reservation: StepReservation | None = None,
    ) -> tuple[Any, bool]:
        """``step``'s result, and True when it came from the record (``func`` did not run)."""
        ran = False

        async def live(*given: Any) -> Any:
            nonlocal ran
            ran = True
            return await func(*given)

        result = await self.step(name, live, *args, reservation=reservation)
        return result, not ran

    async def verdict(
        self,
        guardrail: Guardrail,
        ctx: GuardrailContext[Any],
        value: Any,
        live: Live,
    ) -> str | None:
        """A guardrail's verdict as the step ``<flow>.guardrail.<name>`` (recovery reuses it).

        The step records the verdict and the usage of the check's own model calls
        (``ctx.client``), which are counted in the run after the step, live or replayed alike.
        A check of a child agent's run (inside a tool step) runs as it is.
        """
        if ctx.run_id != self.run_id:
            return await live(ctx, value)
        try:
            (reason, reports), replayed = await self.recorded(
                f"guardrail.{guardrail.name}", _verdict_entry, live, ctx, value
            )
        except dbos_error.DBOSWorkflowCancelledError as exc:
            await self.stop(exc)
        if ctx._report is not None:
            for usage, model in reports:
                ctx._report(usage, model)
        self.replays.guarded(guard_key(guardrail.name, ctx.kind, ctx.turn), replayed)
        reason_: str | None = reason
        return reason_

    def reservation(
        self, ctx: ToolContext, stepped: Callable[[str], bool]
    ) -> StepReservation | None:
        """The step ID drawn for this call when its turn's first call arrived (None: draw now)."""
        if ctx.turn != self._turn:
            self._turn = ctx.turn
            self._reserved = {c.id: DBOS.reserve_step() for c in _calls(ctx) if stepped(c.name)}
        return self._reserved.pop(ctx.call_id, None)

    async def stop(self, exc: BaseException) -> NoReturn:
        """DBOS cancelled the workflow during a tool call: end the run as ``Cancelled``.

        The dispatcher turns a tool's exceptions into soft results, all but a cancellation;
        so the run's own cancel fires and its cancellation arrives at the next ``await``.
        """
        self.cancelled = exc
        self.cancel_run()
        await asyncio.sleep(0)
        raise asyncio.CancelledError


async def _verdict_entry(
    live: Live,
    ctx: GuardrailContext[Any],
    value: Any,
) -> tuple[str | None, list[tuple[Usage, str]]]:
    """The guardrail step: the verdict and the usage its check reported (what is recorded)."""
    reports: list[tuple[Usage, str]] = []
    client = ctx._client
    if isinstance(client, StepClient):  # the check's model calls are this step's, not steps
        client = client.inner
    report = None if ctx._report is None else _collector(reports)
    return await live(replace(ctx, _client=client, _report=report), value), reports


def _collector(reports: list[tuple[Usage, str]]) -> Callable[[Usage, str], None]:
    return lambda usage, model: reports.append((usage, model))


def _calls(ctx: ToolContext) -> tuple[Any, ...]:
    """The tool calls of ``ctx``'s turn, in the model's order (the engine's link to its run)."""
    link = ctx._link
    if link is None:
        return ()
    turns = link[0].run.turns
    if not turns or turns[-1].index != ctx.turn:
        return ()
    return tuple(turns[-1].tool_calls)


class StepClient(WrappedClient):
    """A ``ModelClient`` whose every call is a DBOS step (outside a workflow: the inner call)."""

    def __init__(self, inner: ModelClient, flow: Flow) -> None:
        super().__init__(inner)
        self._flow = flow

    def for_receiver(self, receiver: Any, client: ModelClient) -> StepClient:
        """A handoff receiver's client (SPEC 26): its calls are the run's model steps too."""
        return StepClient(client, self._flow)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The inner client's reply, recorded (or, on replay, the recorded reply)."""
        flow = self._flow
        response: ModelResponse
        response, flow.replays.model = await flow.recorded("model", self.inner.complete, request)
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The inner stream's events live, then ``done``; on replay only ``done``.

        The step consumes the inner stream and records the reply; its events reach the caller
        as they arrive. The step's ID is drawn before its task starts, so it is in order.
        """
        events: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        reservation = DBOS.reserve_step()
        task = asyncio.ensure_future(
            self._flow.recorded(
                "model", _streamed, self.inner, request, events.put_nowait, reservation=reservation
            )
        )
        task.add_done_callback(lambda _: events.put_nowait(None))
        try:
            while (event := await events.get()) is not None:
                yield event
            response: ModelResponse
            response, self._flow.replays.model = await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        yield StreamEvent("done", response=response)


async def _streamed(
    client: ModelClient, request: ModelRequest, sink: Callable[[StreamEvent], None]
) -> ModelResponse:
    """The model-stream step: forward the events, return the reply (what is recorded)."""
    return await collect_stream(client, request, sink)


class StepTool(WrappedTool):
    """A tool whose call is a DBOS step: its rendered output or ``ToolError`` is recorded."""

    def __init__(self, inner: Tool, view: StepTools) -> None:
        super().__init__(inner)
        self.view = view

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """The recorded output when DBOS has it, else the inner tool's (then recorded)."""
        flow = self.view.flow
        reservation = flow.reservation(ctx, self.view.stepped)
        body = _tool_entry
        try:
            if ctx.call_id in flow.decided:  # at most once: was it started by another execution?
                started = await flow.step(f"tool.{self.name}.started", _echo, flow.token)
                body = _tool_entry if started == flow.token else _lost_entry
            entry, replayed = await flow.recorded(
                f"tool.{self.name}",
                body,
                self.inner,
                arguments,
                ctx,
                reservation=reservation,
            )
        except dbos_error.DBOSWorkflowCancelledError as exc:
            await flow.stop(exc)
        if replayed:
            flow.replays.tools.add(ctx.call_id)
        return replayed_output(entry)


async def _tool_entry(tool: Tool, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
    """The tool-call step: the output as the text the model reads (what is recorded)."""
    try:
        output = await tool.call(arguments, ctx)
    except ToolError:
        raise
    except Exception as exc:
        try:
            pickle.dumps(exc)
        except Exception:  # DBOS could not record it: record what the dispatcher would say
            raise InternalError(f"{type(exc).__name__}: {exc}") from exc
        raise
    _refuse_paused_child(tool, ctx)
    entry = output_entry(output)
    if entry is None:  # rendering raises: a panic, reported as the dispatcher reports it
        render_content(getattr(output, "content", output))
        raise InternalError(f"tool '{tool.name}' returned a value that cannot be rendered")
    return entry


PAUSED_CHILD_TEXT = (
    "agent '{name}' paused, and a durable run cannot wait for a child agent's pending calls "
    "(its pause would not survive the worker): give the child an approver, or the calls that "
    "need a person to the parent agent"
)
"""What the model reads when a child agent (``as_tool``) pauses inside a durable run."""


def _refuse_paused_child(tool: Tool, ctx: ToolContext) -> None:
    """A child agent that paused in this step: a ``ToolError`` (recorded, so replayed).

    The child's paused session lives in this process only; a step that recorded its empty
    output would replay as a finished call, and the run would diverge from its record. (The
    Temporal activity sees no parent run, and the child says the same kind of thing.)
    """
    link = ctx._link
    children = link[0].children if link is not None else None
    entry = children.get(ctx.call_id) if children else None
    if children is not None and entry is not None and entry[0] == "paused":
        del children[ctx.call_id]
        raise ToolError(PAUSED_CHILD_TEXT.format(name=tool.name))


async def _echo(token: str) -> str:
    """The marker step of a decided call: the token of the execution that started it."""
    return token


async def _lost_entry(tool: Tool, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
    """A decided call another execution started and never finished: not run again (SPEC 17)."""
    return output_entry(ToolOutput(LOST_TEXT, is_error=True))


class StepTools(ToolsView):
    """A view of a registry whose tools are DBOS steps, but for ``inline`` ones."""

    def __init__(self, inner: ToolRegistry, flow: Flow, inline: frozenset[str]) -> None:
        super().__init__(inner)
        self.flow = flow
        self.inline = inline

    def stepped(self, name: str) -> bool:
        """Whether a call of ``name`` runs as a step."""
        return name not in self.inline and name in self.inner

    def wrap(self, tool: Tool) -> Tool:
        """The tool as a step, or itself when inline."""
        return tool if tool.name in self.inline else StepTool(tool, self)
