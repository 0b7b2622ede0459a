"""Runs as Temporal workflows: model calls and tool calls are activities, the loop is the workflow.

``TemporalAgent(agent, name=...)`` defines three activities, ``agentloop.<name>.model``,
``agentloop.<name>.tool`` and ``agentloop.<name>.guardrail`` (``_temporal_guards``); its runs
are the workflow ``agentloop.run`` (one workflow class for every agent, the first argument names
it: Temporal wants a workflow class defined at module
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

The mechanics of that boundary (the errors, the two seams, the activities' bodies) are
``_temporal_activities``; this module is the workflow and the agent.

Errors. An exception in an activity becomes an ``ApplicationError`` whose ``type`` is its class
name, ``non_retryable`` unless it ``is_recoverable()`` (a foreign exception never retries: the
dispatcher decides what a tool's panic means), ``next_retry_delay`` its ``retry_after``, and whose
first detail is the pickled exception; back in the workflow (``restored``) it is raised as itself,
so the engine sees what it would see without Temporal. A run's hard error fails the workflow the
same way, and ``TemporalRun.result`` raises it again with every attribute.
"""

from __future__ import annotations

import functools
import pickle
import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Generic

from temporalio import activity, workflow
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.common import RetryPolicy
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from agentloop.durable._replay import Replays, listen
from agentloop.durable._temporal_activities import (
    Activities,
    ActivityClient,
    ActivityTools,
    failure,
    heartbeating,
    model_call,
    restored,
    tool_call,
)
from agentloop.durable._temporal_guards import Verdicts, guardrail_call
from agentloop.durable._wrap import (
    accepted_decisions,
    checked_wrap,
    decision_message,
    refuse_batch,
)
from agentloop.engine.agent import Agent
from agentloop.engine.handoff_carry import turn_agent
from agentloop.engine.handoffs import all_receivers
from agentloop.engine.pause import check_continuable
from agentloop.engine.pause_tools import check_published
from agentloop.errors import AgentLoopError, ConfigurationError, InvalidInput, MemoryBackendError
from agentloop.guardrails._base import RECORDER
from agentloop.pausing import Approve, Decision, Edit, PendingCall, check_decisions
from agentloop.run import OutputT, Run
from agentloop.safety.breaker import ToolBreakers
from agentloop.safety.budget import BudgetGate

__all__ = [
    "DECIDE_SIGNAL",
    "HEARTBEAT_TIMEOUT",
    "PENDING_QUERY",
    "ActivityClient",
    "ActivityTools",
    "TemporalAgent",
    "TemporalRun",
    "failure",
    "restored",
]


# -- the workflow and the agent ---------------------------------------------------------------

WORKFLOW = "agentloop.run"
"""The workflow type of every ``TemporalAgent``; its first argument names the agent."""

HEARTBEAT_TIMEOUT = timedelta(seconds=30)
"""How long Temporal waits for a running activity's heartbeat before retrying it elsewhere."""

_AGENTS: dict[str, TemporalAgent[Any]] = {}
"""The ``TemporalAgent``s of this process by name: what a workflow task runs."""


PENDING_QUERY = "agentloop.pending"
"""The query a run's workflow answers with its pause number and pending calls."""

DECIDE_SIGNAL = "agentloop.decide"
"""The signal that carries a decision set to a paused run's workflow."""


@workflow.defn(name=WORKFLOW, sandboxed=False)
class AgentLoopWorkflow:
    """One run of the ``TemporalAgent`` named by its first argument (built in this worker).

    A run that pauses waits in the workflow (``wait_for_decisions``) until the ``DECIDE_SIGNAL``
    brings a decision set that answers its pending calls exactly; ``PENDING_QUERY`` tells them.
    Signals are in the workflow's history, so a replay on another worker takes the same set.
    """

    def __init__(self) -> None:
        self._pause = 0
        self._pending: tuple[PendingCall, ...] = ()
        self._decisions: dict[str, Decision] | None = None
        self._last: str | None = None  # the paused turn's agent: a handoff receiver's name
        self._turn = 0  # the paused turn: decide resolves the toolsets at it
        self._session: str | None = None

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
        return await durable._execute(input, pickle.loads(deps), self)

    @workflow.query(name=PENDING_QUERY)
    def pending(self) -> dict[str, Any]:
        """The pause number and the pending calls (plain data; none when not paused)."""
        pending = [p.to_dict() for p in self._pending]
        published = {"pause": self._pause, "pending": pending, "turn_agent": self._last}
        return {**published, "turn": self._turn, "session": self._session}

    @workflow.signal(name=DECIDE_SIGNAL)
    def decide(self, message: dict[str, Any]) -> None:
        """Take the first decision set that answers this pause exactly; ignore any other."""
        if self._decisions is None and self._pending:
            self._decisions = accepted_decisions(message, self._pending, self._pause)

    async def wait_for_decisions(self, run: Run[Any]) -> dict[str, Decision]:
        """Publish ``run``'s pending calls, then wait (no worker busy) for their decisions."""
        self._pause += 1
        self._pending, self._decisions, self._last = run.pending, None, run.last_agent
        self._turn, self._session = (
            (run.paused_turn or {}).get("turn", {}).get("index", 0),
            run.session_id,
        )
        await workflow.wait_condition(lambda: self._decisions is not None)
        decisions, self._pending = self._decisions, ()
        assert decisions is not None
        return decisions


async def _deps_of(client: Client, workflow_id: str) -> Any:
    """The deps a run was started with: its workflow's third input, as the worker reads it."""
    try:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
    except RPCError as exc:
        raise MemoryBackendError(f"Temporal workflow {workflow_id}: {exc}") from exc
    started = history.events[0].workflow_execution_started_event_attributes
    try:
        (deps,) = await client.data_converter.decode([started.input.payloads[2]], [bytes])
        return pickle.loads(deps)
    except Exception as exc:  # deps this process cannot unpickle: judged by the worker
        raise LookupError(workflow_id) from exc


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

    async def status(self) -> str:
        """The workflow's status as Temporal names it (``RUNNING``, ``COMPLETED``, ...).

        One of ``RUNNING``, ``COMPLETED``, ``FAILED``, ``CANCELED``, ``TERMINATED``,
        ``CONTINUED_AS_NEW``, ``TIMED_OUT``.

        Raises:
            MemoryBackendError: The Temporal service failed, or knows no such workflow.
        """
        try:
            described = await self.handle.describe()
        except RPCError as exc:
            raise MemoryBackendError(f"Temporal workflow {self.workflow_id}: {exc}") from exc
        return described.status.name if described.status is not None else "UNKNOWN"

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
    ``retry_policy`` (default: 3 attempts), except on errors that are not recoverable. They
    heartbeat every third of ``heartbeat_timeout``: an activity of a worker that died is
    retried on another after ``heartbeat_timeout`` (default 30 s), not ``activity_timeout``.
    """

    def __init__(
        self,
        agent: Agent[OutputT],
        *,
        name: str,
        task_queue: str | None = None,
        activity_timeout: timedelta = timedelta(minutes=5),
        heartbeat_timeout: timedelta = HEARTBEAT_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        checked_wrap("TemporalAgent", agent, name)
        if not isinstance(heartbeat_timeout, timedelta) or heartbeat_timeout <= timedelta(0):
            raise ConfigurationError(
                "heartbeat_timeout is a positive timedelta", field="heartbeat_timeout"
            )
        self.agent = agent
        self.name = name
        self.task_queue = task_queue or f"agentloop.{name}"
        _AGENTS[name] = self
        self._activities = Activities(
            name,
            activity_timeout,
            retry_policy or RetryPolicy(maximum_attempts=3),
            heartbeat_timeout,
        )
        self._receivers = tuple(all_receivers(agent))  # each one's place: its activities' key
        self.workflow: type = AgentLoopWorkflow
        self.activities: Sequence[Any] = self._define_activities()

    def _define_activities(self) -> list[Any]:
        agent = self.agent
        receivers = self._receivers
        every = self._activities.heartbeat.total_seconds() / 3

        @activity.defn(name=self._activities.model)
        async def model(payload: bytes) -> bytes:
            return await heartbeating(model_call(agent, receivers, payload), every)

        @activity.defn(name=self._activities.tool)
        async def tool(payload: bytes) -> bytes:
            work = tool_call(agent, receivers, payload)
            return await heartbeating(work, every)

        @activity.defn(name=self._activities.guardrail)
        async def guardrail(payload: bytes) -> bytes:
            return await heartbeating(guardrail_call(agent, receivers, payload), every)

        return [model, tool, guardrail]

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
        refuse_batch("TemporalAgent", self.agent)
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

    def get_run(self, workflow_id: str, *, client: Client) -> TemporalRun[OutputT]:
        """The run of ``workflow_id``, started by any process: its ``result`` and ``status``.

        Nothing is asked of Temporal until one of them is awaited.
        """
        return TemporalRun(client.get_workflow_handle(workflow_id, result_type=bytes))

    async def pending(self, workflow_id: str, *, client: Client) -> tuple[PendingCall, ...]:
        """The calls the run of ``workflow_id`` is paused on (empty: it is not paused).

        A Temporal query: a worker of this agent answers it (from the workflow's history).

        Raises:
            MemoryBackendError: The Temporal service failed, or knows no such workflow.
        """
        return (await self._published(workflow_id, client))[1]

    async def decide(
        self, workflow_id: str, decisions: Mapping[str, Decision], *, client: Client
    ) -> None:
        """Send a decision set to the paused run of ``workflow_id`` (a signal); it goes on.

        The decisions are checked against the run's pending calls as ``continue_run`` checks
        them; the workflow takes the first set that answers its pause and ignores the others.

        Raises:
            InvalidInput: The run is not paused, ``decisions`` do not answer its pending
                calls exactly, or one approves a call whose tool this agent does not have;
                nothing is sent.
            MemoryBackendError: The Temporal service failed, or knows no such workflow.
        """
        pause, pending, last, at = await self._published(workflow_id, client)
        if not pending:
            raise InvalidInput(
                f"Temporal workflow {workflow_id} is not paused (no pending calls): decisions "
                "answer a paused run's pending calls (TemporalAgent.pending)"
            )
        checked = check_decisions(pending, decisions)
        await check_continuable(self.agent, pending, checked, last)  # never spent on nothing
        turn, session = at
        deps = functools.partial(_deps_of, client, workflow_id)  # the run's own, when needed
        agent = turn_agent(self.agent, last)
        await check_published(
            agent, pending, checked, deps, run_id=workflow_id, turn=turn, session_id=session
        )
        message = decision_message(pause, checked)
        try:
            await client.get_workflow_handle(workflow_id).signal(DECIDE_SIGNAL, message)
        except RPCError as exc:
            raise MemoryBackendError(f"Temporal workflow {workflow_id}: {exc}") from exc

    async def _published(
        self, workflow_id: str, client: Client
    ) -> tuple[int, tuple[PendingCall, ...], str | None, tuple[int, str | None]]:
        try:
            data = await client.get_workflow_handle(workflow_id).query(PENDING_QUERY)
        except RPCError as exc:
            hint = ""
            if exc.status != RPCStatusCode.NOT_FOUND:  # a query waits for a worker to answer
                hint = f" (a query needs a running worker of TemporalAgent '{self.name}')"
            raise MemoryBackendError(f"Temporal workflow {workflow_id}: {exc}{hint}") from exc
        except WorkflowQueryFailedError as exc:
            raise MemoryBackendError(f"Temporal workflow {workflow_id}: {exc}") from exc
        pending = tuple(PendingCall.from_dict(p) for p in data["pending"])
        at = (int(data.get("turn") or 0), data.get("session"))
        return int(data["pause"]), pending, data.get("turn_agent"), at

    async def _execute(self, input: str, deps: Any, flow: AgentLoopWorkflow) -> bytes:
        """The workflow's body: a fresh conversation whose model and tool calls are activities.

        A run that pauses waits for its decisions in the workflow, then goes on with them;
        a call a person approved gets one attempt (see ``Activities.execute``).
        """
        twin = self.agent.fork()
        twin.client = ActivityClient(self.agent.client, self._activities, self._receivers)
        tools = ActivityTools(twin.registry, self._activities)
        tools.receivers = self._receivers  # a receiver's calls are activities too (SPEC 26)
        twin._dispatcher.registry = tools
        twin.safety.breakers = ToolBreakers(twin.config.tool_breaker, clock=workflow.time)
        twin.safety.budget = BudgetGate(twin.config.budget, clock=workflow.time)
        session = twin.default_session
        listen(twin, Replays(workflow.unsafe.is_replaying))  # events of a replay say so
        state = session._begin(input, deps, (), None)
        state.run.id = workflow.info().workflow_id
        state.run.started_at = workflow.now().timestamp()
        recording = RECORDER.set(Verdicts(self.agent, self._receivers, self._activities))
        try:
            run = await session._drive(state)
            while run.paused:
                decisions = await flow.wait_for_decisions(run)
                tools.decided = frozenset(
                    k for k, d in decisions.items() if isinstance(d, Approve | Edit)
                )
                run = await session.continue_run(decisions=decisions, deps=deps)
        except AgentLoopError as exc:
            raise failure(exc) from None
        finally:
            RECORDER.reset(recording)
        return pickle.dumps(run)
