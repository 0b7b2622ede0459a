"""The A2A methods over an agent's sessions (SPEC 26).

``SendMessage``, ``SendStreamingMessage``, ``GetTask`` and ``CancelTask``. The official SDK's
``JsonRpcDispatcher`` parses the JSON-RPC and calls this ``RequestHandler``; the protocol's
errors are the SDK's.

Which conversation a request may touch::

    message without contextId   a new context: a new session (default), or the one the app's
                                ``session(request, new_id)`` picks; its id is the session's
    message with contextId      default: a session this app minted, else TaskNotFound (-32001);
                                with ``session=``: the one it picks (LookupError: -32001,
                                PermissionError: HTTP 403)
    taskId (follow-up, Get,     a task of this app whose context the caller may reach, else
    Cancel)                     TaskNotFound: another conversation's id is never confirmed

A follow-up on an INPUT_REQUIRED task carries its decisions and continues the same run; no
decisions, a bad one, or a message for a task that is working or ended is -32602, and nothing
changes. The app's own ``session=``/``deps=`` failing is -32603, redacted and logged once
(``agentloop.ui._sessions.call_app``, which the UI apps use too).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from starlette.exceptions import HTTPException

from agentloop.engine.agent import Agent
from agentloop.engine.pause import check_continuable
from agentloop.engine.session import Session
from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.pausing import check_decisions
from agentloop.safety.redact import redact_secrets
from agentloop.ui._sessions import AppFailed, call_app, refusal

from . import _wire as wire
from ._tasks import Listener, Opener, TaskRecord

__all__ = ["AgentHandler"]

_log = logging.getLogger("agentloop")

_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


def _guarded(method: _F) -> _F:
    """The SDK words any other exception with its text: ours are A2A errors, redacted."""

    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except (A2AError, HTTPException):
            raise
        except InvalidInput as exc:
            raise InvalidParamsError(message=redact_secrets(str(exc))) from None
        except AppFailed as exc:
            raise InternalError(message=str(exc)) from None
        except PermissionError as exc:
            raise HTTPException(403, refusal(exc)) from None

    return wrapper  # type: ignore[return-value]


def _not_ended(record: TaskRecord, *, cancelled: bool = False) -> None:
    """-32002 for a task that ended (``cancelled``: but a task this cancel ended is answered)."""
    if record.state not in wire.TERMINAL:
        return
    if cancelled and record.state == pb.TASK_STATE_CANCELED:
        return
    state = wire.state_name(record.state)
    raise TaskNotCancelableError(message=f"task {record.id} is {state}")


async def _cancel_parked(record: TaskRecord) -> None:
    """End a parked task's run through ``cancel_run`` (SPEC 17): finalized as ``Cancelled``."""
    record.busy = True
    try:
        await record.session.cancel_run()
    except MemoryBackendError:  # another process holds the session: it continues the run now
        record.busy = False
        record.refresh()
        _not_ended(record)
        raise TaskNotCancelableError(
            message=f"task {record.id} is being continued by another process of the "
            "application; it cannot be cancelled from here"
        ) from None
    except BaseException:
        record.busy = False  # decided or polled elsewhere meanwhile: as it is now
        record.refresh()
        _not_ended(record)
        raise
    record.cancelled()


class AgentHandler(RequestHandler):
    """The four methods A2A 1.0 asks of an agent, over ``agent``'s sessions (module)."""

    def __init__(self, agent: Agent[Any], session: Any = None, deps: Any = None) -> None:
        self.agent = agent
        self._picker = session
        self._deps = deps
        self._minted: dict[str, Session[Any]] = {}
        self._tasks: dict[str, TaskRecord] = {}
        guardrails = agent._guardrails
        inputs = () if guardrails is None else guardrails.blocking + guardrails.parallel
        self._inputs = frozenset(g.name for g in inputs)

    # -- SendMessage / SendStreamingMessage ---------------------------------------------------

    @_guarded
    async def on_message_send(
        self, params: pb.SendMessageRequest, context: ServerCallContext
    ) -> pb.Task:
        """Start (or continue) the task; answer when it settles (or at once, when asked)."""
        record = await self._send(params, context, None)
        if not params.configuration.return_immediately:
            await record.settled.wait()
        length = params.configuration.history_length
        has_length = params.configuration.HasField("history_length")
        return record.task(length if has_length else None)

    async def on_message_send_stream(
        self, params: pb.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        """The Task as its run starts, then its updates until it settles."""
        listener: Listener = asyncio.Queue()
        record = await _guarded(self._send)(params, context, listener)
        try:
            yield record.task(working=True)
            while (update := await listener.get()) is not None:
                yield update
        finally:  # a dropped stream lets go of the task; its run goes on
            record.listeners.discard(listener)

    async def _send(
        self, params: pb.SendMessageRequest, context: ServerCallContext, listener: Listener | None
    ) -> TaskRecord:
        message = params.message
        request = context.state.get("request")
        wire.refuse_files(message)
        if message.task_id:
            record = await self._task(request, message.task_id, message.context_id)
            opener = await self._follow_up(record, request, message)
        else:
            text = wire.text_of(message)
            if not text:
                raise InvalidParamsError(message="the message has no text part: send the input")
            session, context_id = await self._session(request, message.context_id)
            deps = await self._app_deps(request, message)
            record = TaskRecord(session, context_id, self._inputs)

            def opener(cancel: Any) -> Any:
                return session.stream(text, deps=deps, cancel=cancel)

        if listener is not None:
            record.listeners.add(listener)
        try:
            await record.start(opener)
        except BaseException:
            if listener is not None:
                record.listeners.discard(listener)
            raise
        self._tasks[record.id] = record
        stored = pb.Message()
        stored.CopyFrom(message)
        stored.task_id, stored.context_id = record.id, record.context_id
        record.history.append(stored)
        return record

    async def _follow_up(self, record: TaskRecord, request: Any, message: pb.Message) -> Opener:
        """A follow-up's decisions, checked against the run's pending calls (or -32602)."""
        record.refresh()
        if record.state in wire.TERMINAL:
            state = wire.state_name(record.state)
            raise InvalidParamsError(message=f"task {record.id} is {state}: it takes no message")
        if not record.waiting:
            raise InvalidParamsError(
                message=f"task {record.id} is working: a follow-up answers an input-required task"
            )
        record.hold()  # until the run is continued: a second follow-up is refused
        try:
            run = record.session.current_run
            pending = () if run is None else run.pending
            decisions = check_decisions(pending, wire.decisions(message, pending))
            last = None if run is None else run.last_agent  # a receiver's call (SPEC 26)
            await check_continuable(self.agent, pending, decisions, last)
            deps = await self._app_deps(request, message)
        except BaseException:
            record.release()
            raise
        session = record.session
        return lambda cancel: session.continue_stream(decisions=decisions, deps=deps, cancel=cancel)

    # -- GetTask / CancelTask -----------------------------------------------------------------

    @_guarded
    async def on_get_task(
        self, params: pb.GetTaskRequest, context: ServerCallContext
    ) -> pb.Task | None:
        """The task as it is now."""
        record = await self._task(context.state.get("request"), params.id, "")
        record.refresh()
        return record.task(params.history_length if params.HasField("history_length") else None)

    @_guarded
    async def on_cancel_task(
        self, params: pb.CancelTaskRequest, context: ServerCallContext
    ) -> pb.Task | None:
        """End the task's run as ``Cancelled``; a task that ended is -32002.

        Whoever runs it: A2A's own driver, another face of the app continuing it in this
        process (``Session.cancel``), or nobody (paused or waiting: ``cancel_run``). A run that
        another process continues cannot be cancelled from here: -32002 says so.
        """
        record = await self._task(context.state.get("request"), params.id, "")
        record.refresh()
        _not_ended(record)
        if not record.parked and await record.stop_elsewhere():  # another face's continuation
            record.refresh()
            _not_ended(record, cancelled=True)
        if record.parked:  # paused, or waiting in a provider batch: no driver runs it
            await _cancel_parked(record)
        elif record.state not in wire.TERMINAL:
            held = record.held  # a follow-up's checks: its continuation starts cancelled
            record.cancel.cancel()
            await record.settled.wait()
            if held and record.parked:  # the checks failed: the run still waits, end it
                await _cancel_parked(record)
        return record.task()

    # -- whose is it --------------------------------------------------------------------------

    async def _session(self, request: Any, context_id: str) -> tuple[Session[Any], str]:
        """The session a message runs on, and its context id (module)."""
        if self._picker is None:
            if not context_id:
                session = self.agent.session()
                self._minted[session.id] = session
                return session, session.id
            minted = self._minted.get(context_id)
            if minted is None:
                raise TaskNotFoundError(message=f"no context {context_id!r} here")
            return minted, context_id
        chosen = await self._pick(request, context_id or uuid.uuid4().hex)
        return chosen, context_id or chosen.id

    async def _pick(self, request: Any, context_id: str) -> Session[Any]:
        try:
            chosen = await call_app(
                "session", self._picker, request, context_id, passes=(LookupError,)
            )
        except LookupError:
            raise TaskNotFoundError(message=f"no context {context_id!r} here") from None
        if not isinstance(chosen, Session):
            got = type(chosen).__name__
            _log.error("the application's session= callable returned %s, not a Session", got)
            raise AppFailed(f"the application's session= callable returned {got}, not a Session")
        return chosen

    async def _task(self, request: Any, task_id: str, context_id: str) -> TaskRecord:
        record = self._tasks.get(task_id)
        if record is None or (context_id and context_id != record.context_id):
            raise TaskNotFoundError(message=f"no task {task_id!r} here")
        if self._picker is not None:
            try:
                chosen = await self._pick(request, record.context_id)
            except TaskNotFoundError:
                raise TaskNotFoundError(message=f"no task {task_id!r} here") from None
            if chosen is not record.session:
                raise TaskNotFoundError(message=f"no task {task_id!r} here")
        return record

    async def _app_deps(self, request: Any, message: pb.Message) -> Any:
        return None if self._deps is None else await call_app("deps", self._deps, request, message)

    # -- what this agent does not serve -------------------------------------------------------

    async def on_list_tasks(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Not served: -32601."""
        raise MethodNotFoundError

    on_create_task_push_notification_config = on_list_tasks
    on_get_task_push_notification_config = on_list_tasks
    on_list_task_push_notification_configs = on_list_tasks
    on_delete_task_push_notification_config = on_list_tasks
    on_get_extended_agent_card = on_list_tasks

    async def on_subscribe_to_task(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any]:
        """Not served: -32601."""
        raise MethodNotFoundError
        yield  # an async generator, as the dispatcher expects
