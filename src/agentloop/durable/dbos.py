"""Runs as DBOS workflows: a killed process's runs are finished by DBOS, no finished step repeated.

``DBOSAgent(agent, name=...)`` registers one DBOS workflow, ``agentloop.<name>``, that runs a
fresh conversation of the agent (``agent.fork()``) with two seams swapped in, the same two the
plain store's journal uses (``agentloop.engine.journal``):

- the model client becomes a ``StepClient``: each ``complete``/``stream`` is a DBOS step
  ``<name>.model`` whose recorded reply DBOS hands back on replay;
- the dispatcher's registry becomes a ``StepTools`` view: each tool call is a DBOS step
  ``<name>.tool.<tool>`` (except ``inline_tools``), whose rendered output, or ``ToolError``,
  is recorded. A turn's tool calls draw their step IDs together, in the model's order, before
  the first one runs, so parallel tool calls replay onto the right records.

(Both in ``_dbos_steps``.) A run that pauses (SPEC 17) records its pause and its workflow ends,
holding no worker (SPEC 25); ``DBOSAgent.decide`` records the decision and forks the workflow
onto the agent's queue, where it replays to the pause and goes on (``_dbos_pause``). A run's id
names its first workflow; ``DBOSRun(run_id).result()`` follows it across its continuations.

DBOS re-runs a recovered workflow from the top; the engine is deterministic given its steps'
results, so it retraces the same turns without calling the model or the tools again, then goes
on. The run's id is the workflow's id, the same on every execution (so ``ctx.run_id`` can seed an
idempotency key). Errors cross DBOS's serialiser (pickle) with every attribute.

Cancellation: ``DBOS.cancel_workflow(id)`` (or a ``CancelToken`` given to ``run``/``result``)
stops the model or tool call in flight (the steps are preemptible) and the run ends as
``Cancelled``; an asyncio cancellation of the waiting caller only stops the waiting.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Generic, TypeVar

import sqlalchemy.exc
from dbos import DBOS, Queue, SetWorkflowID, StepOptions, WorkflowHandleAsync
from dbos import error as dbos_error

from agentloop.cancel import CancelToken
from agentloop.durable._dbos_pause import (
    DECIDERS,
    fork_continuation,
    next_workflow,
    paused_at,
    record_pause,
    send_cancel,
    send_decisions,
)
from agentloop.durable._dbos_steps import PAUSED_CHILD_TEXT, Flow, StepClient, StepTools
from agentloop.durable._replay import listen
from agentloop.durable._wrap import checked_wrap, refuse_batch
from agentloop.engine.agent import Agent
from agentloop.errors import (
    AgentLoopError,
    Cancelled,
    ConfigurationError,
    InternalError,
    InvalidInput,
    MemoryBackendError,
)
from agentloop.guardrails._base import RECORDER
from agentloop.pausing import Approve, Decision, Edit, PendingCall
from agentloop.run import OutputT, Run

_T = TypeVar("_T")

__all__ = [
    "PAUSED_CHILD_TEXT",
    "WORKER_CONCURRENCY",
    "DBOSAgent",
    "DBOSRun",
    "StepClient",
    "StepTools",
]


class DBOSRun(Generic[OutputT]):
    """A run started or enqueued as a DBOS workflow: its id, its result, its cancellation.

    ``workflow_id`` is the run's id: its first workflow's. A run that paused goes on in a new
    workflow once decided (``<id>/continued/<n>``); ``result`` follows it there.
    """

    def __init__(
        self, workflow_id: str, handle: WorkflowHandleAsync[Run[OutputT]] | None = None
    ) -> None:
        self.workflow_id = workflow_id
        self._handle = handle

    async def result(
        self, *, cancel: CancelToken | None = None, poll_seconds: float = 1.0
    ) -> Run[OutputT]:
        """Wait for the run's end, paused time included; raise its hard error as ``run()`` would.

        When ``cancel`` fires, the run is cancelled in DBOS (``Cancelled`` is raised). A run of
        another process, or a paused one, is polled for in DBOS's database every
        ``poll_seconds``.

        Raises:
            Cancelled: The run was cancelled (here, by ``cancel``, or in DBOS).
            MemoryBackendError: DBOS's database failed, or DBOS gave up on the workflow.
        """
        try:
            waiting = self._followed(poll_seconds)
            if cancel is None:
                return await waiting
            return await self._until_cancelled(waiting, cancel)
        except (AgentLoopError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise _translated(exc, self.workflow_id) from exc

    async def _followed(self, poll_seconds: float) -> Run[OutputT]:
        """The run's end: each workflow's result, and a paused one's continuation's."""
        handle = self._handle or await DBOS.retrieve_workflow_async(self.workflow_id)
        while True:
            run = await handle.get_result(polling_interval_sec=poll_seconds)
            if not (isinstance(run, Run) and run.paused):
                return run
            following = await next_workflow(self.workflow_id, handle.workflow_id, poll_seconds)
            handle = await DBOS.retrieve_workflow_async(following)

    async def _until_cancelled(
        self, waiting: Coroutine[Any, Any, Run[OutputT]], cancel: CancelToken
    ) -> Run[OutputT]:
        result = asyncio.ensure_future(waiting)
        fired = asyncio.ensure_future(cancel.wait())
        try:
            await asyncio.wait({result, fired}, return_when=asyncio.FIRST_COMPLETED)
            if not result.done():
                await self.cancel()
            return await result
        finally:
            for task in (result, fired):
                task.cancel()

    async def cancel(self) -> None:
        """Cancel the run: a paused one is never continued; a running one's call in flight stops."""
        while True:
            try:
                if await asyncio.to_thread(send_cancel, self.workflow_id):
                    return
            except InvalidInput:  # decided a moment ago: cancel its continuation
                pass
            holder = (await asyncio.to_thread(paused_at, self.workflow_id)).workflow
            first = holder == self.workflow_id
            if first or await DBOS.get_workflow_status_async(holder) is not None:
                await DBOS.cancel_workflow_async(holder)
                return
            await asyncio.sleep(0.05)  # decided a moment ago: its continuation is being forked


_NOT_LAUNCHED = ("No DBOS was created", "before DBOS was launched", "before DBOS initialized")
"""How DBOS words "not launched" (its exceptions carry no code for it)."""


def _translated(exc: Exception, workflow_id: str) -> AgentLoopError:
    """A DBOS failure as ours: cancellation, then the database and DBOS's own refusals."""
    if isinstance(exc, dbos_error.DBOSAwaitedWorkflowCancelledError):
        return Cancelled()
    if isinstance(exc, dbos_error.DBOSException) and any(m in str(exc) for m in _NOT_LAUNCHED):
        return _not_launched()
    if isinstance(exc, dbos_error.DBOSException | sqlalchemy.exc.SQLAlchemyError):
        return MemoryBackendError(f"DBOS workflow {workflow_id}: {type(exc).__name__}: {exc}")
    return InternalError(f"DBOS workflow {workflow_id}: {type(exc).__name__}: {exc}")


def _off_loop(work: Callable[[], _T]) -> _T:
    """``work()`` here, or on a short-lived thread when an event loop runs in this one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentloop-dbos") as pool:
        return pool.submit(context.run, work).result()


WORKER_CONCURRENCY = 10
"""How many of a ``DBOSAgent``'s queued runs one worker process runs at once, by default."""


def _not_launched() -> ConfigurationError:
    return ConfigurationError(
        "DBOS is not launched: build the DBOSAgents, then DBOS(config=...) and DBOS.launch()",
        field="dbos",
    )


class DBOSAgent(Generic[OutputT]):
    """An agent whose runs are DBOS workflows: model calls and tool calls are steps.

    Build every ``DBOSAgent`` before ``DBOS(config=...)`` and ``DBOS.launch()`` (launch is when
    DBOS recovers the runs a dead process left), with the same ``name`` in every process that
    may run or recover its workflows. Each run is a fresh conversation of ``agent`` (its
    client, tools, prompt, config, hooks and observers; not its history or store).
    ``inline_tools`` run in the workflow's own code, not as steps: pure functions (run again on
    replay), or tools that use DBOS themselves (a step cannot start a workflow). ``queue`` names
    the DBOS queue ``enqueue`` uses (default ``agentloop.<name>``), registered on first use
    with ``worker_concurrency`` (at most that many of its runs at once in one worker process,
    so the runs spread over the workers; None: no limit, the first worker to poll takes every
    run) unless the application registered it (``DBOS.register_queue``, its limits) first.
    A run that pauses records its pause and its workflow ends, holding no worker and no queue
    slot; ``pending`` and ``decide`` are the other end (``decide`` enqueues its continuation
    on ``queue``, whether the run was enqueued or started).
    """

    def __init__(
        self,
        agent: Agent[OutputT],
        *,
        name: str,
        inline_tools: Iterable[str] = (),
        queue: str | None = None,
        worker_concurrency: int | None = WORKER_CONCURRENCY,
    ) -> None:
        checked_wrap("DBOSAgent", agent, name)
        if worker_concurrency is not None and (
            type(worker_concurrency) is not int or worker_concurrency < 1
        ):
            raise ConfigurationError(
                "worker_concurrency is a whole number of runs per worker (>= 1) or None",
                field="worker_concurrency",
            )
        self.agent = agent
        self.name = name
        # memory tools stage into the workflow's own state: they run inline, again on replay
        staged = {t.name for t in agent.registry if getattr(t, "journaled", True) is False}
        self.inline_tools = frozenset(inline_tools) | staged
        self.queue = queue or f"agentloop.{name}"
        self.worker_concurrency = worker_concurrency

        async def run_workflow(input: str, deps: Any, run_id: str | None = None) -> Run[OutputT]:
            return await self._execute(input, deps, run_id)

        def decide_workflow(run_id: str, head: str, step: int, message: dict[str, Any]) -> None:
            if message.get("cancel"):  # cancelled while paused: nothing continues the run
                return
            options: StepOptions = {"name": f"{name}.continue"}
            pause, queue = int(message["pause"]), self._queue().name
            DBOS.run_step(options, fork_continuation, run_id, head, step, pause, queue)

        self._workflow = DBOS.workflow(name=f"agentloop.{name}")(run_workflow)
        DECIDERS[name] = (DBOS.workflow(name=f"agentloop.{name}.decide")(decide_workflow), agent)

    async def run(
        self,
        input: str,
        *,
        deps: Any = None,
        cancel: CancelToken | None = None,
        workflow_id: str | None = None,
    ) -> Run[OutputT]:
        """Run ``input`` as a DBOS workflow in this process; raise as ``agent.run()`` raises.

        ``deps`` is a workflow input: DBOS pickles it. If the process dies, the run is
        recovered at the next ``DBOS.launch()`` of a process with the same executor id.
        ``workflow_id`` (default: a new one) makes the start idempotent: a second run with
        the same id waits for the first one's result instead of running again. A run that
        pauses (SPEC 17) ends its workflow until ``decide``: this returns when the run ends.
        """
        started = await self.start(input, deps=deps, workflow_id=workflow_id)
        return await started.result(cancel=cancel)

    async def start(
        self, input: str, *, deps: Any = None, workflow_id: str | None = None
    ) -> DBOSRun[OutputT]:
        """Start ``input`` as a DBOS workflow in this process; its ``DBOSRun`` at once."""
        refuse_batch("DBOSAgent", self.agent)
        workflow_id = workflow_id or str(uuid.uuid4())  # the run's id, in every continuation
        try:
            with SetWorkflowID(workflow_id):
                handle = await DBOS.start_workflow_async(self._workflow, input, deps, workflow_id)
        except AgentLoopError:
            raise
        except Exception as exc:
            raise _translated(exc, "(not started)") from exc
        return DBOSRun(handle.workflow_id, handle)

    def enqueue(
        self, input: str, *, deps: Any = None, workflow_id: str | None = None
    ) -> DBOSRun[OutputT]:
        """Put ``input`` on the agent's DBOS queue; a launched process with this agent runs it.

        Synchronous (a database insert), so it can be called from plain code as well as from
        a coroutine: inside a running event loop DBOS refuses its sync calls, so they run on a
        short-lived thread (the loop waits for the insert). A process that launched DBOS
        normally is a worker too: it may take the runs it enqueues (and leave them waiting for
        its executor id to come back when it exits); a process that must only enqueue (a web
        server) calls ``DBOSAgent.enqueue_only()`` before ``DBOS.launch()``.
        """
        refuse_batch("DBOSAgent", self.agent)
        try:
            enqueued = _off_loop(lambda: self._enqueue(input, deps, workflow_id))
        except AgentLoopError:
            raise
        except Exception as exc:
            raise _translated(exc, "(not enqueued)") from exc
        return DBOSRun(enqueued)

    @staticmethod
    def pending(workflow_id: str) -> tuple[PendingCall, ...]:
        """The calls the run of ``workflow_id`` is paused on (empty: it is not paused).

        Synchronous (a few database reads), from any process that launched DBOS on the same
        database. The run's workflow publishes them when it pauses; once a decision for the
        pause is recorded the run is no longer paused.
        """
        try:
            return _off_loop(lambda: paused_at(workflow_id).pending)
        except AgentLoopError:
            raise
        except Exception as exc:
            raise _translated(exc, workflow_id) from exc

    @staticmethod
    def decide(workflow_id: str, decisions: Mapping[str, Decision]) -> None:
        """Record a decision set for the paused run of ``workflow_id`` and enqueue its continuation.

        Synchronous (a few database reads and writes), from any process that launched DBOS on
        the same database and built the run's ``DBOSAgent``. The decisions are checked against
        the run's pending calls as ``continue_run`` checks them, then recorded as the workflow
        ``<id>/decided/<pause>`` (its ID is the pause's idempotency key: the first set wins),
        which forks the run's workflow onto the agent's queue; when this returns the
        continuation is on the queue and the run is no longer paused.

        Raises:
            InvalidInput: The run is not paused (never paused, or its pause was decided, by
                this caller or another one first), or ``decisions`` do not answer its pending
                calls exactly (one fitting decision per call); nothing is recorded.
        """
        try:
            _off_loop(lambda: send_decisions(workflow_id, decisions))
        except AgentLoopError:
            raise
        except Exception as exc:
            raise _translated(exc, workflow_id) from exc

    @staticmethod
    def enqueue_only() -> None:
        """Make this process one that enqueues runs but never takes one from a queue.

        Call it after ``DBOS(config=...)`` and before ``DBOS.launch()`` in a process that only
        enqueues (a web server): it listens to no DBOS queue (``DBOS.listen_queues([])``), so
        the runs it enqueues wait for a worker, and none is left claimed by a process that
        exits. It still starts, waits for and recovers its own ``run``/``start`` workflows.
        """
        try:
            DBOS.listen_queues([])
        except dbos_error.DBOSException as exc:
            if "after DBOS is launched" in str(exc):
                reason = "call it before DBOS.launch()"
            elif "more than once" in str(exc):
                reason = "this process already chose its queues (DBOS.listen_queues)"
            else:
                reason = "call it after DBOS(config=...), before DBOS.launch()"
            raise ConfigurationError(f"DBOSAgent.enqueue_only(): {reason}", field="dbos") from exc

    def _queue(self) -> Queue:
        """The agent's queue, registered with its ``worker_concurrency`` when it is new."""
        return DBOS.retrieve_queue(self.queue) or DBOS.register_queue(
            self.queue, worker_concurrency=self.worker_concurrency, on_conflict="never_update"
        )

    def _enqueue(self, input: str, deps: Any, workflow_id: str | None) -> str:
        workflow_id = workflow_id or str(uuid.uuid4())
        with SetWorkflowID(workflow_id):
            return self._queue().enqueue(self._workflow, input, deps, workflow_id).workflow_id

    async def _execute(self, input: str, deps: Any, run_id: str | None) -> Run[OutputT]:
        """The workflow's body: a fresh conversation, its model and tool calls as steps.

        A pause records itself and returns the paused run (the workflow ends); the fork a
        decision starts runs this again, replays to the pause, takes the decision and goes on.
        """
        twin = self.agent.fork()
        flow = Flow(self.name, twin.cancel)
        twin.client = StepClient(self.agent.client, flow)
        twin._dispatcher.registry = StepTools(twin.registry, flow, self.inline_tools)
        session = twin.default_session
        listen(twin, flow.replays)
        state = session._begin(input, deps, (), None)
        run_id = flow.run_id = state.run.id = run_id or DBOS.workflow_id or state.run.id
        recording = RECORDER.set(flow.verdict)  # each guardrail verdict is a step too
        try:
            run = await session._drive(state)
            pauses = 0
            while run.paused:  # a recorded decision goes on; none yet: the workflow ends
                pauses += 1
                decisions = await record_pause(run, run_id, pauses, self.name)
                if decisions is None:
                    return run
                flow.decided = frozenset(
                    k for k, d in decisions.items() if isinstance(d, Approve | Edit)
                )
                run = await session.continue_run(decisions=decisions, deps=deps)
            return run
        except Cancelled:
            if flow.cancelled is not None:  # DBOS cancelled it: let DBOS see its own signal
                raise flow.cancelled from None
            raise
        finally:
            RECORDER.reset(recording)
