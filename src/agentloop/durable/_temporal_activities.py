"""The boundary between a Temporal workflow and its activities, both sides of it.

``temporal.py`` is what an application builds (``TemporalAgent``, the workflow, ``TemporalRun``);
this module is what crosses between the workflow and the worker's activities, kept apart so the
agent's module reads as the shape of a run: the errors (``failure`` pickles an exception into an
``ApplicationError``, ``restored`` raises it again as itself), the workflow's seams
(``ActivityClient`` and ``ActivityTools`` execute an activity where the engine would call the
model or a tool) and the activities' bodies in the worker (``model_call``, ``tool_call``).
Payloads are pickled both ways.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import CancelledError as TemporalCancelled
from temporalio.exceptions import TimeoutError as TemporalTimeout

from agentloop.cancel import CancelToken
from agentloop.engine.journal import ToolsView, WrappedClient, WrappedTool
from agentloop.engine.turn import collect_stream
from agentloop.errors import (
    AgentLoopError,
    Cancelled,
    ConfigurationError,
    InternalError,
    ToolError,
)
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent
from agentloop.pausing import LOST_TEXT
from agentloop.run import RunContext
from agentloop.tools import Tool, ToolContext, ToolOutput, ToolRegistry, split_output

__all__ = [
    "LOST",
    "ActivityClient",
    "ActivityTool",
    "ActivityTools",
    "Activities",
    "failure",
    "heartbeating",
    "model_call",
    "restored",
    "tool_call",
]


# -- errors across Temporal --------------------------------------------------------------------


def failure(exc: BaseException) -> ApplicationError:
    """``exc`` as a Temporal failure: its class name, its retryability, itself pickled."""
    try:
        details: tuple[bytes, ...] = (pickle.dumps(exc),)
    except Exception:  # an exception that does not pickle crosses as its name and message
        details = ()
    recoverable = isinstance(exc, AgentLoopError) and exc.is_recoverable()
    retry_after = getattr(exc, "retry_after", None)
    delay = timedelta(seconds=retry_after) if recoverable and retry_after else None
    return ApplicationError(
        f"{type(exc).__name__}: {exc}",
        *details,
        type=type(exc).__name__,
        non_retryable=not recoverable,
        next_retry_delay=delay,
    )


def restored(error: BaseException) -> BaseException:
    """The exception a Temporal failure carries (see ``failure``), else the nearest of ours.

    Follows the causes of ``ActivityError``/``WorkflowFailureError`` to the ``ApplicationError``
    ``failure`` made; a cancellation is ``Cancelled``; anything else (a timeout, a worker that
    vanished, an error that did not pickle) an ``InternalError`` naming it.
    """
    cause: BaseException | None = error
    while isinstance(cause, ActivityError | WorkflowFailureError):
        cause = cause.cause
    if isinstance(cause, TemporalCancelled):
        return Cancelled()
    if isinstance(cause, ApplicationError) and cause.details:
        carried = cause.details[0]
        if isinstance(carried, bytes):
            with_value = pickle.loads(carried)
            if isinstance(with_value, BaseException):
                return with_value
    if isinstance(cause, ApplicationError) and cause.type:
        return InternalError(f"{cause.type}: {cause.message}")
    described = cause if cause is not None else error
    return InternalError(f"Temporal: {type(described).__name__}: {described}")


# -- the workflow's seams: model and tools as activities ---------------------------------------


class Activities:
    """The activity names and options one ``TemporalAgent``'s workflow calls."""

    def __init__(
        self, name: str, timeout: timedelta, retry: RetryPolicy, heartbeat: timedelta
    ) -> None:
        self.model = f"agentloop.{name}.model"
        self.tool = f"agentloop.{name}.tool"
        self.guardrail = f"agentloop.{name}.guardrail"
        self.timeout = timeout
        self.retry = retry
        self.heartbeat = heartbeat

    async def execute(self, activity_name: str, payload: bytes, *, once: bool = False) -> Any:
        """Run an activity from the workflow; its failure raised as the exception it carries.

        ``once``: a single attempt (a call a person decided); if it times out (its worker
        died) the result is ``LOST`` instead of an error: it is not run again.
        """
        try:
            result: bytes = await workflow.execute_activity(
                activity_name,
                payload,
                start_to_close_timeout=self.timeout,
                heartbeat_timeout=self.heartbeat,
                retry_policy=RetryPolicy(maximum_attempts=1) if once else self.retry,
                result_type=bytes,
            )
        except ActivityError as exc:
            if isinstance(exc.cause, TemporalCancelled):  # the workflow is being cancelled
                raise asyncio.CancelledError from None
            if once and isinstance(exc.cause, TemporalTimeout):
                return LOST
            raise restored(exc) from None
        return pickle.loads(result)


LOST = ("output", ToolOutput(LOST_TEXT, is_error=True))
"""A decided call whose single attempt timed out: it started and never returned (SPEC 17)."""


class ActivityClient(WrappedClient):
    """A ``ModelClient`` whose every call is the model activity (the real client in the worker).

    A stream's events stay in the activity: the workflow receives the final reply as ``done``.
    Wrapping clients' events (retries, failovers) are not reported to the run's observers.
    """

    def __init__(
        self,
        inner: ModelClient,
        activities: Activities,
        receivers: Sequence[Any] = (),
        key: int | None = None,
    ) -> None:
        super().__init__(inner)
        self._activities = activities
        self._receivers = tuple(receivers)
        self._key = key  # a handoff receiver's place in ``receivers`` (None: the agent's)

    def for_receiver(self, receiver: Any, client: ModelClient) -> ActivityClient:
        """A handoff receiver's client (SPEC 26): its calls are the model activity too."""
        key = receiver_key(self._receivers, receiver)
        return ActivityClient(client, self._activities, self._receivers, key)

    async def _call(self, request: ModelRequest, stream: bool) -> ModelResponse:
        payload = pickle.dumps((replace(request, events=None), stream, self._key))
        response: ModelResponse = await self._activities.execute(self._activities.model, payload)
        return response

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The reply the model activity returned."""
        return await self._call(request, False)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The model activity streams; the workflow gets its reply as the one ``done`` event."""
        yield StreamEvent("done", response=await self._call(request, True))

    async def aclose(self) -> None:
        """Nothing to close in the workflow: the worker's client is the agent's."""


class ActivityTool(WrappedTool):
    """A tool whose call is the tool activity: its output, ``ToolError`` or exception returns."""

    def __init__(self, inner: Tool, view: ActivityTools) -> None:
        super().__init__(inner)
        self._view = view

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """The output of the tool as the activity ran it; its exceptions raised here."""
        where = (ctx.run_id, ctx.turn, ctx.call_id, ctx.session_id)
        payload = pickle.dumps((self.name, dict(arguments), where, ctx.deps, self._view.key))
        activities = self._view.activities
        once = ctx.call_id in self._view.decided
        kind, value = await activities.execute(activities.tool, payload, once=once)
        if kind == "tool_error":
            raise value
        return value


class ActivityTools(ToolsView):
    """A view of a registry whose tools are the tool activity (one view a run)."""

    def __init__(self, inner: ToolRegistry, activities: Activities) -> None:
        super().__init__(inner)
        self.activities = activities
        self.decided: frozenset[str] = frozenset()  # calls a person approved: one attempt each
        self.receivers: tuple[Any, ...] = ()  # the agent's handoff receivers (``all_receivers``)
        self.key: int | None = None  # the receiver whose tools this view holds (None: agent's)

    def for_receiver(self, receiver: Any, registry: ToolRegistry) -> ActivityTools:
        """This view over a handoff receiver's tools (SPEC 26): their calls are activities."""
        view = copy.copy(self)
        view.inner, view.key = registry, receiver_key(self.receivers, receiver)
        return view

    def wrap(self, tool: Tool) -> Tool:
        """The tool as an activity; a memory tool runs in the workflow instead.

        A memory tool (``journaled = False``) stages writes in its run's state, which lives in
        the workflow: run again on replay, it stages the same writes.
        """
        if getattr(tool, "journaled", True) is False:
            return tool
        return ActivityTool(tool, self)


# -- the activities: what runs in the worker ---------------------------------------------------


async def _toolset_tool(toolsets: tuple[Any, ...], name: str, ctx: RunContext[Any]) -> Tool | None:
    """The tool named ``name`` among ``toolsets`` as they resolve for ``ctx``, or None."""
    from agentloop.toolsets import Scope

    scope = Scope(ctx)
    for toolset in toolsets:
        for entry in await toolset.entries(scope):
            if entry.spec.name == name:
                found: Tool = entry.tool
                return found
    return None


async def heartbeating(work: Coroutine[Any, Any, bytes], every: float) -> bytes:
    """``work``'s result, telling Temporal every ``every`` seconds that this worker is alive.

    A worker that dies stops heartbeating, so Temporal retries its activity elsewhere after the
    heartbeat timeout instead of the whole ``start_to_close_timeout``; the heartbeats also
    carry a workflow's cancellation into the activity (``work`` is cancelled).
    """
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})


def receiver_key(receivers: Sequence[Any], receiver: Any) -> int:
    """``receiver``'s place among the agent's ``all_receivers``: what an activity looks up."""
    for key, known in enumerate(receivers):
        if known is receiver:
            return key
    raise ConfigurationError(  # never a receiver's call run on the starting agent's parts
        "a handoff receiver this TemporalAgent was not built with cannot run as activities",
        field="handoffs",
    )


def _owner(agent: Any, receivers: Sequence[Any], key: int | None) -> Any:
    """The agent whose model or tool an activity runs: ``agent``, or its receiver ``key``."""
    if key is None:
        return agent
    if not 0 <= key < len(receivers):  # a worker built with other handoffs: never retried
        error = ConfigurationError(
            f"the worker's agent has no handoff receiver #{key}: build every worker's "
            "TemporalAgent with the same handoffs",
            field="handoffs",
        )
        raise failure(error)
    return receivers[key]


async def model_call(agent: Any, receivers: Sequence[Any], payload: bytes) -> bytes:
    """The model activity's body: the reply, pickled; an exception as a Temporal failure.

    The client is the agent's, or that of the handoff receiver the payload names.
    """
    request, stream, key = pickle.loads(payload)
    client: ModelClient = _owner(agent, receivers, key).client
    try:
        response = await (collect_stream(client, request) if stream else client.complete(request))
    except Exception as exc:
        raise failure(exc) from exc
    return pickle.dumps(response)


async def tool_call(agent: Any, receivers: Sequence[Any], payload: bytes) -> bytes:
    """The tool activity's body: ``("output", value)`` or ``("tool_error", error)``, pickled.

    The tool is the agent's (or that of the handoff receiver the payload names); one its
    registry lacks is looked up in its toolsets (SPEC 22), resolved for the run's context.
    """
    name, arguments, (run_id, turn, call_id, session_id), deps, key = pickle.loads(payload)
    owner = _owner(agent, receivers, key)
    registry, toolsets = owner.registry, owner._sets
    tool = registry.get(name)
    if tool is None and toolsets:
        tool = await _toolset_tool(toolsets, name, RunContext(
            run_id=run_id, session_id=session_id, deps=deps, turn=turn
        ))  # fmt: skip
    if tool is None:
        raise failure(ConfigurationError(f"the worker's agent has no tool '{name}'", field="tools"))
    ctx: ToolContext[Any] = ToolContext(
        run_id=run_id,
        turn=turn,
        call_id=call_id,
        tool_name=name,
        cancel=CancelToken(),
        session_id=session_id,
        deps=deps,
    )
    try:
        output = await tool.call(arguments, ctx)
        if isinstance(output, ToolOutput):  # rendered here: what cannot render is the tool's panic
            output = ToolOutput(_portable(output.content), is_error=output.is_error)
        else:
            output = _portable(output)
    except ToolError as error:
        return pickle.dumps(("tool_error", error))
    except Exception as exc:
        raise failure(exc) from exc
    return pickle.dumps(("output", output))


def _portable(value: Any) -> Any:
    """A tool's value as text and media parts, which cross the activity boundary as they are."""
    text, media = split_output(value)
    if not media:
        return text
    return [text, *media] if text else list(media)
