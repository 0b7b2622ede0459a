"""One A2A task: a run of a session, driven apart from the request that started it (SPEC 26).

A task's run is driven by a task of its own (``TaskRecord.start``), not by the HTTP request:
a client that drops its stream does not cancel it, ``CancelTask`` does. Every change is
published to the task's listeners (the open ``SendStreamingMessage`` responses) as the
protocol's update events::

    start / continue    the task is WORKING (the stream's first item is the Task itself)
    TextDelta           artifact update ``output``, ``append=true``, one per delta
    RunFinished         a typed output's artifact (a data part), or a text output that is not
                        what the deltas made (text before a tool call is streamed too, but is
                        not the answer) as a replacing update (``append=false``), so what a
                        streaming client assembled is the task's artifact; then the final status:
                        COMPLETED, INPUT_REQUIRED (the pending calls), CANCELED, REJECTED
                        (an input guardrail) or FAILED (``<ErrorClass>: <message>``, redacted)

A batch run (SPEC 25) leaves its task WORKING when it is submitted; ``refresh`` (on each read
of the task) takes its end from the store once ``agentloop.batch.poll`` continued it.

``settled`` is set when the task waits (INPUT_REQUIRED) or ended; a listener then receives
``None`` and its response ends. ``busy`` holds a task between a follow-up's checks and its
continue, so a second follow-up with the same decisions is refused: decided calls run once.
``hold`` takes it for a follow-up and makes the continuation's cancel token then, so a
``CancelTask`` that comes while the decisions are checked (the app's ``deps=`` awaited) cancels
the continuation before it starts (it records the decisions and runs nothing), and waits on
``settled`` for what the follow-up ends in; ``release`` gives the task back when the checks fail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import Any, TypeAlias

from a2a.types import a2a_pb2 as pb

from agentloop import events as ev
from agentloop.cancel import CancelToken
from agentloop.engine.session import Session
from agentloop.engine.stream import RunStream
from agentloop.errors import AgentLoopError, Cancelled, GuardrailTripped
from agentloop.run import Run
from agentloop.safety.redact import redact_secrets

from . import _wire as wire

__all__ = ["Listener", "Opener", "TaskRecord"]

_log = logging.getLogger("agentloop")

Listener: TypeAlias = "asyncio.Queue[pb.TaskStatusUpdateEvent | pb.TaskArtifactUpdateEvent | None]"
Opener: TypeAlias = Callable[[CancelToken], RunStream[Any]]
"""Opens the run's event stream with the task's cancel token: a new run or a continue."""


def _ended(run: Run[Any]) -> bool:
    """Whether ``run`` ended: neither paused, waiting in a batch, nor running."""
    return not run.paused and run.waiting is None and run.ended_at is not None


def _running(run: Run[Any]) -> bool:
    """Whether ``run`` is running now (continued by someone, not ended)."""
    return not run.paused and run.waiting is None and run.ended_at is None


class TaskRecord:
    """A task on the wire: its session and context, state, output and listeners (module)."""

    def __init__(self, session: Session[Any], context_id: str, inputs: Collection[str]) -> None:
        self.session = session
        self.context_id = context_id
        self.id = ""
        self.state: pb.TaskState = pb.TASK_STATE_SUBMITTED
        self.status_message: pb.Message | None = None
        self.artifact: pb.Artifact | None = None
        self.history: list[pb.Message] = []
        self.listeners: set[Listener] = set()
        self.settled = asyncio.Event()
        self.busy = False
        self.cancel = CancelToken()
        self._inputs = inputs  # the names of the agent's input guardrails: a trip is REJECTED
        self._driver: asyncio.Task[None] | None = None
        self._streamed: list[str] = []  # the deltas this run's stream published
        self._asked: tuple[str, ...] = ()  # the pending call ids INPUT_REQUIRED published

    # -- what a client reads ------------------------------------------------------------------

    def task(self, history_length: int | None = None, *, working: bool = False) -> pb.Task:
        """The task as the protocol shows it (``working``: as it was when its run started)."""
        history = self.history if history_length is None else self.history[-history_length:]
        if working:
            status = pb.TaskStatus(state=pb.TASK_STATE_WORKING)
            artifacts: list[pb.Artifact] = []
        else:
            status = pb.TaskStatus(state=self.state)
            if self.status_message is not None:
                status.message.CopyFrom(self.status_message)
            artifacts = [] if self.artifact is None else [self.artifact]
        return pb.Task(
            id=self.id,
            context_id=self.context_id,
            status=status,
            artifacts=artifacts,
            history=history if history_length != 0 else [],
        )

    @property
    def waiting(self) -> bool:
        """Whether the task waits for decisions (INPUT_REQUIRED, no follow-up in flight)."""
        return self.state == pb.TASK_STATE_INPUT_REQUIRED and not self.busy

    @property
    def parked(self) -> bool:
        """Whether no driver runs the task's run: paused (17) or waiting in a batch (25)."""
        if self.busy or self.state not in (pb.TASK_STATE_INPUT_REQUIRED, pb.TASK_STATE_WORKING):
            return False
        run = self.session.current_run
        return run is not None and run.id == self.id and (run.paused or run.waiting is not None)

    # -- driving its run ----------------------------------------------------------------------

    async def start(self, opener: Opener) -> None:
        """Start (or continue) the run in a task of its own; return once its stream is open.

        What opening raises (a busy or paused session, decisions that do not fit) is raised
        here, and nothing has changed.
        """
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[None] = loop.create_future()
        if not self.busy:  # a follow-up's token was made by ``hold``: a cancel may be on it
            self.cancel = CancelToken()
        self.busy = True
        self.settled.clear()
        self._streamed = []
        self._driver = loop.create_task(self._drive(opener(self.cancel), opened))
        try:
            await opened
        except BaseException:
            self.busy = False
            if self.state in wire.TERMINAL or self.state == pb.TASK_STATE_INPUT_REQUIRED:
                self.settled.set()
            raise

    def hold(self) -> None:
        """A follow-up checks its decisions: no second one, and a cancel meanwhile reaches its run.

        The continuation's cancel token is made now (``start`` keeps it), and ``settled`` is
        cleared until the follow-up's run settles or ``release`` gives the task back.
        """
        self.busy = True
        self.cancel = CancelToken()
        self.settled.clear()

    def release(self) -> None:
        """The follow-up's checks failed: the task waits as it did (a cancel meanwhile is moot)."""
        self.busy = False
        self.settled.set()

    @property
    def held(self) -> bool:
        """Whether a follow-up holds the waiting task: its checks, or its run not yet opened."""
        return self.busy and self.state == pb.TASK_STATE_INPUT_REQUIRED

    async def _drive(self, stream: RunStream[Any], opened: asyncio.Future[None]) -> None:
        finished = False
        try:
            async with stream as events:
                self.id = self.id or events.run.id
                self.state, self.status_message = pb.TASK_STATE_WORKING, None
                opened.set_result(None)
                async for event in events:
                    if event.path:
                        continue  # a child agent's (as_tool) events are its own
                    if type(event) is ev.TextDelta:
                        self._delta(event.text)
                    elif type(event) is ev.RunFinished:
                        self._finish(event.run)
                        finished = True
        except BaseException as error:
            if not opened.done():
                opened.set_exception(error)
                return
            if not finished and isinstance(error, Exception):
                self._fail(error)
            if not isinstance(error, Exception):
                raise
        finally:
            if opened.done() and not self.settled.is_set():
                self._settle()

    def _delta(self, text: str) -> None:
        self._streamed.append(text)
        part = pb.Part(text=text)
        artifact = pb.Artifact(artifact_id=wire.OUTPUT, name=wire.OUTPUT, parts=[part])
        self._publish(
            pb.TaskArtifactUpdateEvent(
                task_id=self.id, context_id=self.context_id, artifact=artifact, append=True
            )
        )

    def _finish(self, run: Run[Any]) -> None:
        """The run ended (or paused): its final state, published, then the listeners let go."""
        error = run.stop_reason
        if run.waiting is not None:  # a batch run (SPEC 25): still working, in a provider batch
            self._status(pb.TASK_STATE_WORKING, None)
        elif run.paused:
            self._asked = tuple(p.call.id for p in run.pending)
            message = wire.pending_message(self.id, self.context_id, run.pending)
            self._status(pb.TASK_STATE_INPUT_REQUIRED, message)
        elif error is None:
            self.artifact = wire.output_artifact(run.output)
            streamed = isinstance(run.output, str) and "".join(self._streamed) == run.output
            if not streamed:  # typed, or text before a tool call was streamed: the artifact
                self._publish(
                    pb.TaskArtifactUpdateEvent(
                        task_id=self.id,
                        context_id=self.context_id,
                        artifact=self.artifact,
                        last_chunk=True,
                    )
                )
            self._status(pb.TASK_STATE_COMPLETED, None)
        else:
            self._fail(error)
        self._settle()

    def refresh(self) -> None:
        """A parked task (no driver): take what another face or process made of its run.

        ``agentloop.batch.poll`` continues a run waiting in a provider batch (SPEC 25) in the
        store, maybe in another process; a paused run (SPEC 17) may be continued or cancelled
        by another face of the app (the session's API, the viewer, the CLI) or process. Neither
        goes through this task, so the session's run, then the stored run, say whether it
        finished, or paused again on other calls, since.
        """
        if self.busy or self.state not in (pb.TASK_STATE_WORKING, pb.TASK_STATE_INPUT_REQUIRED):
            return  # not parked: its driver publishes its end
        here = next((r for r in reversed(self.session.runs) if r.id == self.id), None)
        if here is not None and (_ended(here) or self._asked_again(here)):  # another face here
            self._finish(here)
            return
        if here is not None and _running(here):  # being continued by another face here
            if self.state != pb.TASK_STATE_WORKING:
                self._status(pb.TASK_STATE_WORKING, None)
            return
        store = self.session.agent.store
        stored = None if store is None else store.load_run(self.id)
        if stored is None or not stored.finished or stored.run.waiting is not None:
            return
        if self.state == pb.TASK_STATE_WORKING or _ended(stored.run):
            self._finish(stored.run)

    async def stop_elsewhere(self) -> bool:
        """Cancel the task's run when another face of this process runs it (``CancelTask``).

        The app's own face (its API on the same ``Session``, a viewer) may continue a paused
        task's run; no driver of the task runs it then, so its cancel token reaches nothing.
        The session's does (``Session.cancel``). It is fired only while this very run is the
        session's active one (checked and fired with no await between, and the run re-arms it
        as it ends), so it never reaches a later run. Returns whether there was such a run,
        once it has ended (cancelled, or finished or paused before the cancel reached it).
        """
        session = self.session
        active = session._active
        if self.busy or active is None or active.run.id != self.id:
            return False
        loop = asyncio.get_running_loop()
        ended = asyncio.Event()

        def seen(event: ev.Event) -> None:  # the other face may drive it on another thread
            if type(event) is ev.RunFinished and event.run_id == self.id and not event.path:
                loop.call_soon_threadsafe(ended.set)

        bus = session._bus
        bus.attach(seen)
        try:
            session.cancel()
            if session._active is active:  # (on another thread it may have ended meanwhile)
                await ended.wait()
        finally:
            bus.detach(seen)
        return True

    def _asked_again(self, run: Run[Any]) -> bool:
        """Whether ``run`` paused again on other calls than the ones this task published."""
        if not run.paused or self.state != pb.TASK_STATE_INPUT_REQUIRED:
            return False
        return self._asked != tuple(p.call.id for p in run.pending)

    def _fail(self, error: BaseException) -> None:
        if isinstance(error, Cancelled):
            self._status(pb.TASK_STATE_CANCELED, None)
            return
        if not isinstance(error, AgentLoopError):
            _log.error("A2A task %s failed: %s", self.id, redact_secrets(repr(error)))
        state = (
            pb.TASK_STATE_REJECTED
            if isinstance(error, GuardrailTripped) and error.guardrail in self._inputs
            else pb.TASK_STATE_FAILED
        )
        text = wire.agent_message(self.id, self.context_id, [pb.Part(text=wire.error_text(error))])
        self._status(state, text)

    def cancelled(self) -> None:
        """A paused task was cancelled outside its driver (``cancel_run``)."""
        self._status(pb.TASK_STATE_CANCELED, None)
        self._settle()

    def _status(self, state: pb.TaskState, message: pb.Message | None) -> None:
        self.state, self.status_message = state, message
        status = pb.TaskStatus(state=state)
        if message is not None:
            status.message.CopyFrom(message)
        self._publish(
            pb.TaskStatusUpdateEvent(task_id=self.id, context_id=self.context_id, status=status)
        )

    def _publish(self, update: pb.TaskStatusUpdateEvent | pb.TaskArtifactUpdateEvent) -> None:
        for listener in self.listeners:
            listener.put_nowait(update)

    def _settle(self) -> None:
        self.busy = False
        self.settled.set()
        for listener in self.listeners:
            listener.put_nowait(None)
        self.listeners.clear()
