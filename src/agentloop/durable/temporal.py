"""Runs as Temporal workflows: model calls and tool calls are activities, the loop is the workflow.

``TemporalAgent(agent, name=...)`` defines two activities, ``agentloop.<name>.model`` and
``agentloop.<name>.tool``; its runs are the workflow ``agentloop.run`` (one workflow class for
every agent, the first argument names it: Temporal wants a workflow class defined at module
level, and a process's agents are looked up by name). The workflow runs the
engine's loop on a fresh conversation of the agent (``agent.fork()``) with the same two seams
the DBOS integration swaps (``agentloop.durable.dbos``):

- the model client becomes an ``ActivityClient``: each ``complete``/``stream`` executes the
  model activity, which calls the real client in the worker;
- the dispatcher's registry becomes an ``ActivityTools`` view: each tool call executes the tool
  activity, which looks the tool up by name in the worker's agent and calls it.

Determinism. Temporal replays the workflow from its history; the engine, given the same
activity results, retraces the same turns. Every I/O of a run is in the activities; the clocks
that take decisions (the breakers' cool-downs, the budget's wall-clock line) read workflow time
(``workflow.time``), which replays; the run's id is the workflow's id. What the engine still reads
from the process (``Run.started_at``/``ended_at``, durations, an id stamped on a tool call the
model sent without one) is recorded, never decided on, so a replay issues the same commands.
The workflow runs outside Temporal's sandbox (the sandbox re-imports a workflow's module, and so
would not see the agents this process built); hooks, observers and the approver run in the
workflow and must not do I/O that matters twice (they run again on replay).

Payloads are pickled (the request, the reply, the tool call, ``deps``, the ``Run``): trust the
Temporal cluster as you trust your database.

Errors. An exception in an activity becomes an ``ApplicationError`` whose ``type`` is its class
name, ``non_retryable`` unless it ``is_recoverable()`` (a foreign exception never retries: the
dispatcher decides what a tool's panic means), ``next_retry_delay`` its ``retry_after``, and whose
first detail is the pickled exception; back in the workflow (``restored``) it is raised as itself,
so the engine sees what it would see without Temporal. A run's hard error fails the workflow the
same way, and ``TemporalRun.result`` raises it again with every attribute.
"""

from __future__ import annotations

import asyncio
import pickle
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any, Generic

from temporalio import activity, workflow
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import CancelledError as TemporalCancelled
from temporalio.service import RPCError
from temporalio.worker import Worker

from agentloop.cancel import CancelToken
from agentloop.durable._wrap import checked_wrap
from agentloop.engine.agent import Agent
from agentloop.engine.journal import ToolsView, WrappedClient, WrappedTool
from agentloop.engine.turn import collect_stream
from agentloop.errors import (
    AgentLoopError,
    Cancelled,
    ConfigurationError,
    InternalError,
    MemoryBackendError,
    ToolError,
)
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent
from agentloop.run import OutputT, Run
from agentloop.safety.breaker import ToolBreakers
from agentloop.safety.budget import BudgetGate
from agentloop.tools import Tool, ToolContext, ToolOutput, ToolRegistry, render_content

__all__ = ["ActivityClient", "ActivityTools", "TemporalAgent", "TemporalRun", "failure", "restored"]


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


class _Activities:
    """The activity names and options one ``TemporalAgent``'s workflow calls."""

    def __init__(self, name: str, timeout: timedelta, retry: RetryPolicy) -> None:
        self.model = f"agentloop.{name}.model"
        self.tool = f"agentloop.{name}.tool"
        self.timeout = timeout
        self.retry = retry

    async def execute(self, activity_name: str, payload: bytes) -> Any:
        """Run an activity from the workflow; its failure raised as the exception it carries."""
        try:
            result: bytes = await workflow.execute_activity(
                activity_name,
                payload,
                start_to_close_timeout=self.timeout,
                retry_policy=self.retry,
                result_type=bytes,
            )
        except ActivityError as exc:
            if isinstance(exc.cause, TemporalCancelled):  # the workflow is being cancelled
                raise asyncio.CancelledError from None
            raise restored(exc) from None
        return pickle.loads(result)


class ActivityClient(WrappedClient):
    """A ``ModelClient`` whose every call is the model activity (the real client in the worker).

    A stream's events stay in the activity: the workflow receives the final reply as ``done``.
    Wrapping clients' events (retries, failovers) are not reported to the run's observers.
    """

    def __init__(self, inner: ModelClient, activities: _Activities) -> None:
        super().__init__(inner)
        self._activities = activities

    async def _call(self, request: ModelRequest, stream: bool) -> ModelResponse:
        payload = pickle.dumps((replace(request, events=None), stream))
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

    def __init__(self, inner: Tool, activities: _Activities) -> None:
        super().__init__(inner)
        self._activities = activities

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """The output of the tool as the activity ran it; its exceptions raised here."""
        where = (ctx.run_id, ctx.turn, ctx.call_id, ctx.session_id)
        payload = pickle.dumps((self.name, dict(arguments), where, ctx.deps))
        kind, value = await self._activities.execute(self._activities.tool, payload)
        if kind == "tool_error":
            raise value
        return value


class ActivityTools(ToolsView):
    """A view of a registry whose tools are the tool activity."""

    def __init__(self, inner: ToolRegistry, activities: _Activities) -> None:
        super().__init__(inner)
        self._activities = activities

    def wrap(self, tool: Tool) -> Tool:
        """The tool as an activity."""
        return ActivityTool(tool, self._activities)


# -- the activities: what runs in the worker ---------------------------------------------------


async def _model_call(client: ModelClient, payload: bytes) -> bytes:
    """The model activity's body: the reply, pickled; an exception as a Temporal failure."""
    request, stream = pickle.loads(payload)
    try:
        response = await (collect_stream(client, request) if stream else client.complete(request))
    except Exception as exc:
        raise failure(exc) from exc
    return pickle.dumps(response)


async def _tool_call(registry: ToolRegistry, payload: bytes) -> bytes:
    """The tool activity's body: ``("output", value)`` or ``("tool_error", error)``, pickled."""
    name, arguments, (run_id, turn, call_id, session_id), deps = pickle.loads(payload)
    tool = registry.get(name)
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
            output = ToolOutput(render_content(output.content), is_error=output.is_error)
        else:
            output = render_content(output)
    except ToolError as error:
        return pickle.dumps(("tool_error", error))
    except Exception as exc:
        raise failure(exc) from exc
    return pickle.dumps(("output", output))


# -- the workflow and the agent ---------------------------------------------------------------

WORKFLOW = "agentloop.run"
"""The workflow type of every ``TemporalAgent``; its first argument names the agent."""

_AGENTS: dict[str, TemporalAgent[Any]] = {}
"""The ``TemporalAgent``s of this process by name: what a workflow task runs."""


@workflow.defn(name=WORKFLOW, sandboxed=False)
class AgentLoopWorkflow:
    """One run of the ``TemporalAgent`` named by its first argument (built in this worker)."""

    @workflow.run
    async def run(self, name: str, input: str, deps: bytes) -> bytes:
        """The run, pickled; its hard error as a failure (see ``failure``)."""
        durable = _AGENTS.get(name)
        if durable is None:
            known = ", ".join(sorted(_AGENTS)) or "none"
            error = ConfigurationError(
                f"no TemporalAgent named '{name}' in this worker (it has: {known})", field="name"
            )
            raise failure(error)
        return await durable._execute(input, pickle.loads(deps))


class TemporalRun(Generic[OutputT]):
    """A run started as a Temporal workflow: its id, its result, its cancellation."""

    def __init__(self, handle: WorkflowHandle[Any, bytes]) -> None:
        self.handle = handle
        self.workflow_id = handle.id

    async def result(self) -> Run[OutputT]:
        """Wait for the run; raise the hard error that ended it, as ``agent.run()`` would.

        Raises:
            Cancelled: The workflow was cancelled.
            MemoryBackendError: The Temporal service failed or refused.
        """
        try:
            run: Run[OutputT] = pickle.loads(await self.handle.result())
        except WorkflowFailureError as exc:
            raise restored(exc) from None
        except RPCError as exc:
            raise MemoryBackendError(f"Temporal workflow {self.workflow_id}: {exc}") from exc
        return run

    async def cancel(self) -> None:
        """Ask Temporal to cancel the workflow: the run ends as ``Cancelled``."""
        await self.handle.cancel()


class TemporalAgent(Generic[OutputT]):
    """An agent whose runs are Temporal workflows: model calls and tool calls are activities.

    Every worker that may run its workflows builds the same ``TemporalAgent`` (same ``name``)
    and runs ``worker(client)`` (or passes ``workflow`` and ``activities`` to its own
    ``temporalio.worker.Worker``). Each run is a fresh conversation of ``agent``: its client,
    tools, prompt, config, hooks and observers, not its history or store (Temporal's history
    is the record). Activities time out after ``activity_timeout`` and retry per
    ``retry_policy`` (default: 3 attempts), except on errors that are not recoverable.
    """

    def __init__(
        self,
        agent: Agent[OutputT],
        *,
        name: str,
        task_queue: str | None = None,
        activity_timeout: timedelta = timedelta(minutes=5),
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        checked_wrap("TemporalAgent", agent, name)
        self.agent = agent
        self.name = name
        self.task_queue = task_queue or f"agentloop.{name}"
        _AGENTS[name] = self
        self._activities = _Activities(
            name, activity_timeout, retry_policy or RetryPolicy(maximum_attempts=3)
        )
        self.workflow: type = AgentLoopWorkflow
        self.activities: Sequence[Any] = self._define_activities()

    def _define_activities(self) -> list[Any]:
        agent = self.agent

        @activity.defn(name=self._activities.model)
        async def model(payload: bytes) -> bytes:
            return await _model_call(agent.client, payload)

        @activity.defn(name=self._activities.tool)
        async def tool(payload: bytes) -> bytes:
            return await _tool_call(agent.registry, payload)

        return [model, tool]

    def worker(self, client: Client, **options: Any) -> Worker:
        """A ``temporalio`` worker for this agent's task queue (``async with`` it to run it)."""
        return Worker(
            client,
            task_queue=self.task_queue,
            workflows=[self.workflow],
            activities=list(self.activities),
            **options,
        )

    async def run(
        self, input: str, *, client: Client, deps: Any = None, workflow_id: str | None = None
    ) -> Run[OutputT]:
        """Run ``input`` as a workflow (a worker runs it); raise as ``agent.run()`` raises."""
        started = await self.start(input, client=client, deps=deps, workflow_id=workflow_id)
        return await started.result()

    async def start(
        self, input: str, *, client: Client, deps: Any = None, workflow_id: str | None = None
    ) -> TemporalRun[OutputT]:
        """Start ``input`` as a workflow; its ``TemporalRun`` at once. ``deps`` must pickle."""
        workflow_id = workflow_id or f"agentloop-{self.name}-{uuid.uuid4().hex}"
        try:
            handle: WorkflowHandle[Any, bytes] = await client.start_workflow(
                WORKFLOW,
                args=[self.name, input, pickle.dumps(deps)],
                id=workflow_id,
                task_queue=self.task_queue,
                result_type=bytes,
            )
        except RPCError as exc:
            raise MemoryBackendError(f"Temporal could not start the run: {exc}") from exc
        return TemporalRun(handle)

    async def _execute(self, input: str, deps: Any) -> bytes:
        """The workflow's body: a fresh conversation whose model and tool calls are activities."""
        twin = self.agent.fork()
        twin.client = ActivityClient(self.agent.client, self._activities)
        twin._dispatcher.registry = ActivityTools(twin.registry, self._activities)
        twin.safety.breakers = ToolBreakers(twin.config.tool_breaker, clock=workflow.time)
        twin.safety.limits.budget = BudgetGate(twin.config.budget, clock=workflow.time)
        state = twin.default_session._begin(input, deps, (), None)
        state.run.id = workflow.info().workflow_id
        state.run.started_at = workflow.now().timestamp()
        try:
            run = await twin.default_session._drive(state)
        except AgentLoopError as exc:
            raise failure(exc) from None
        return pickle.dumps(run)
