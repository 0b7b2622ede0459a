"""``AGUIApp``: an agent behind the AG-UI protocol (1.0), as an ASGI app (SPEC 18; extra ``ui``).

A client POSTs a ``RunAgentInput`` (any path: mount the app where you like) and reads the run
as AG-UI events over SSE, made with the official ``ag-ui-protocol`` types and ``EventEncoder``.
One request, in order::

    body      at most ``max_body_bytes`` (default 4 MiB)                    else 413
    schema    JSON (nested beyond the parser's depth: not JSON), a
              ``RunAgentInput``, every message one we can take             else 400 / 422
    session   ``session(request, thread_id)`` or one per thread           a refusal is 403
    deps      ``deps(request, run_input)`` (sync or async), to the run's ``ctx.deps``
              (either callable failing, or a session= giving no Session: 500, logged)
    run       ``resume`` given: its answers, checked against the session's pending calls,
              continue the paused run (``session.continue_stream``); else the last message
              (a user message) starts a run (``session.stream``)   a misfit is RUN_ERROR
    stream    RUN_STARTED, the run's events (``_ag_ui_events`` has the table), then
              RUN_FINISHED (success, interrupt or cancelled) or RUN_ERROR; a resumed run
              first echoes the client's ``messages`` as MESSAGES_SNAPSHOT, so the calls its
              results answer (streamed by the interrupted run) are known in this one; so does
              a new message's run when the client shows calls open that the session closed
              (the user stopped the chat mid-tool), then a TOOL_CALL_RESULT each (``_stopped``)

Nothing runs before the request passed every check above: a forged interrupt id, a missing
answer or a new message on a thread that waits for answers is a RUN_ERROR (``code``
``InvalidInput``), as the AG-UI interrupt rules ask, and no tool runs. A client that
disconnects (an abort) fires the run's cancel token: the run is finalized as ``Cancelled``; when
its run has already paused, the paused run is ended with ``cancel_run`` (``_abort``).

The default session picker keeps one in-memory session per thread id (``ThreadSessions``),
seeded from the request's ``messages`` (all but the last) when the thread is new; after that
the session's own history is the conversation and a client's copy is not read again.

What the client sees is the app's choice (``_client_view``): a withheld answer never, the
guardrails' names and reasons only with ``expose_guardrails=True``, a hard error's class and its
redacted message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import pydantic
from ag_ui import core
from ag_ui.encoder import EventEncoder
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from agentloop import events as ev
from agentloop.batching import refuse_batch
from agentloop.cancel import CancelToken
from agentloop.engine.refresh import synced
from agentloop.errors import AgentLoopError, InvalidInput
from agentloop.ui import _ag_ui_input as read
from agentloop.ui import _json_body as json_body
from agentloop.ui._abort import cancel_abandoned
from agentloop.ui._ag_ui_elsewhere import settled_frames, stopped_frames
from agentloop.ui._ag_ui_events import AGUIEvents
from agentloop.ui._ag_ui_frames import error_event
from agentloop.ui._asgi import lifespan
from agentloop.ui._client_view import WATCHED, ClientView
from agentloop.ui._sessions import (
    AppFailed,
    SessionPicker,
    ThreadSessions,
    call_app,
    pick_session,
    refusal,
)
from agentloop.ui._settled import settled_run
from agentloop.ui._stopped import ended, open_calls

if TYPE_CHECKING:
    from agentloop.engine.agent import Agent
    from agentloop.engine.session import Session
    from agentloop.messages import ToolResultPart
    from agentloop.run import Run

__all__ = ["MAX_BODY_BYTES", "AGUIApp", "DepsHook"]

MAX_BODY_BYTES = 4 * 1024 * 1024
"""The default cap on a request body: a larger one is refused with 413 before it is parsed."""

DepsHook: TypeAlias = Callable[[Request, core.RunAgentInput], Any]
"""``deps(request, run_input) -> deps`` (or an awaitable of it): the run's ``ctx.deps``."""

_log = logging.getLogger("agentloop")


class _Refused(Exception):
    """A request answered with an HTTP error before any run: ``status`` and ``detail``."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class AGUIApp:
    """An ASGI app that runs ``agent`` per AG-UI request and streams the run as AG-UI events.

    Args:
        agent: The agent every request runs on (each thread on its own session).
        session: ``(request, thread_id) -> Session`` (sync or async): authenticate the caller
            and pick its conversation, or raise ``PermissionError`` to refuse (403 with its
            text); any other exception is a 500. A thread id from a client is never trusted by
            itself. Default: one in-memory session per thread, seeded from the request's
            messages when new.
        deps: ``(request, run_input) -> deps`` (sync or async): the run's ``ctx.deps``
            (``PermissionError`` refuses, as for ``session``).
        max_body_bytes: The largest request body read (413 above it).
        expose_guardrails: Let the client see the guardrails' verdicts (``CUSTOM``
            ``agentloop:GuardrailChecked``) and a ``GuardrailTripped``'s name and reason.
            Default: neither (a withheld answer is never shown either way).
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        session: SessionPicker | None = None,
        deps: DepsHook | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        expose_guardrails: bool = False,
    ) -> None:
        refuse_batch(agent, "AGUIApp")  # SPEC 25
        self.agent = agent
        self.sessions = ThreadSessions(agent)
        self.max_body_bytes = max_body_bytes
        self.expose_guardrails = expose_guardrails
        self._picker = session
        self._deps = deps
        self._encoder = EventEncoder()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI request (see the module's docstring for the order of checks)."""
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets: nothing to do
        request = Request(scope, receive)
        try:
            if request.method != "POST":
                raise _Refused(405, "POST a RunAgentInput (AG-UI 1.0) here")
            run_input = _parse(await self._body(request))
            stream = await self._prepare(request, run_input)
        except _Refused as refused:
            response = JSONResponse({"error": refused.detail}, status_code=refused.status)
            await response(scope, receive, send)
            return
        await self._respond(receive, send, stream)

    # -- the checks --------------------------------------------------------------------------

    async def _body(self, request: Request) -> bytes:
        body = await json_body.read_capped(request, self.max_body_bytes)
        if body is None:
            raise _Refused(413, f"the request body is larger than {self.max_body_bytes} bytes")
        return body

    async def _prepare(self, request: Request, run_input: core.RunAgentInput) -> _RunStream:
        """Everything before the first byte: history, session, deps, and what to run."""
        try:
            history = read.history(run_input.messages)
            if not run_input.resume:
                read.user_input(run_input.messages)  # a request without an input is a 422
        except InvalidInput as exc:
            raise _Refused(422, str(exc)) from exc
        seed = history[:-1] if history and history[-1].role == "user" else history
        try:
            session = await pick_session(
                self._picker, self.sessions, request, run_input.thread_id, lambda: seed
            )
            deps = (
                None
                if self._deps is None
                else await call_app("deps", self._deps, request, run_input)
            )
        except PermissionError as exc:  # the app refused the caller
            raise _Refused(403, refusal(exc)) from exc
        except AppFailed as exc:  # the app's own callable failed (logged where it did)
            raise _Refused(500, str(exc)) from exc
        except AgentLoopError as exc:  # a seed or an input that is no safe transcript
            raise _Refused(422, str(exc)) from exc
        view = ClientView(expose_guardrails=self.expose_guardrails)
        stream = _RunStream(self._encoder, run_input, session, deps, view)
        stream.stopped = [] if run_input.resume else open_calls(seed)
        return stream

    # -- the response ------------------------------------------------------------------------

    async def _respond(self, receive: Receive, send: Send, stream: _RunStream) -> None:
        headers = [
            (b"content-type", self._encoder.get_content_type().encode()),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        watcher = asyncio.ensure_future(_watch_disconnect(receive, stream.cancel))
        try:
            async with contextlib.aclosing(stream.chunks()) as chunks:
                async for chunk in chunks:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if stream.cancel.cancelled:  # the client left (an abort): a paused run ends too (17)
                await cancel_abandoned(stream.session, stream.run)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


class _RunStream:
    """One request's run, as the bytes of its SSE stream."""

    def __init__(
        self,
        encoder: EventEncoder,
        run_input: core.RunAgentInput,
        session: Session[Any],
        deps: Any,
        view: ClientView,
    ) -> None:
        self.encoder = encoder
        self.run_input = run_input
        self.session = session
        self.deps = deps
        self.view = view
        self.cancel = CancelToken()
        self.run: Run[Any] | None = None
        self.stopped: list[str] = []  # calls the client shows open (a stopped chat, _stopped)
        self.told: list[ToolResultPart] = []  # how they ended, said before the run's events

    def _elsewhere(self, out: AGUIEvents) -> bytes | None:
        """What happened to the calls ``resume`` answers when another process settled them.

        None when the thread's run still waits on them (or they are no calls of its latest
        run): the answers are then checked and continue the run as usual.
        """
        resume = self.run_input.resume
        if not resume:
            return None
        try:
            synced(self.session)  # the CLI, the viewer or another worker may have moved it on
        except AgentLoopError as error:  # the store failed: said as any run's failure is
            return (out.withdrawn() + self._fail(error)).encode()
        settled = settled_run(self.session.current_run, {e.interrupt_id for e in resume})
        if settled is None:
            return None
        known = self.encoder.encode(core.MessagesSnapshotEvent(messages=self.run_input.messages))
        return (known + settled_frames(out, settled, resume) + self._finish(out, settled)).encode()

    def _open(self) -> Any:
        """The run's event stream: a continued run for ``resume``, else a new one."""
        session, run_input = self.session, self.run_input
        synced(session)  # the CLI, the viewer or another worker may have moved the thread on
        current = session.current_run
        paused = current is not None and current.paused
        if run_input.resume:
            if current is None or not paused:
                raise InvalidInput("resume given, but no run of this thread waits for answers")
            decisions = read.decisions(current.pending, run_input.resume)
            return session.continue_stream(decisions=decisions, deps=self.deps, cancel=self.cancel)
        if paused:
            assert current is not None
            waiting = ", ".join(repr(p.id) for p in current.pending)
            raise InvalidInput(
                f"this thread waits for answers to its interrupts ({waiting}): send them in "
                "`resume` before a new message"
            )
        if self.stopped:
            self.told = ended(session, self.stopped)
        return session.stream(
            read.user_input(run_input.messages), deps=self.deps, cancel=self.cancel
        )

    async def chunks(self) -> AsyncGenerator[bytes]:
        """RUN_STARTED, the run's events, and one terminal event; never a traceback."""
        run_input = self.run_input
        out = AGUIEvents(run_input.thread_id, run_input.run_id, self.encoder)
        out.history = run_input.messages  # what the client holds: a withdrawal's snapshot keeps it
        yield self.encoder.encode(_started(run_input, self.session)).encode()
        ended = self._elsewhere(out)
        if ended is not None:  # decided (or cancelled) elsewhere: what happened there, its end
            yield ended
            return
        async with contextlib.aclosing(self._streamed(out)) as rest:
            async for chunk in rest:
                yield chunk

    async def _streamed(self, out: AGUIEvents) -> AsyncGenerator[bytes]:
        """The run's events and its one terminal event (RUN_STARTED is out already)."""
        run_input = self.run_input
        finished = False
        feed, finished_kind, shown = out.feed, ev.RunFinished, self.view.shown
        try:
            async with self._open() as events:  # the answers were checked: now the snapshot
                self.run = events.run
                lead = self._lead(out)
                if lead:
                    yield lead.encode()
                async for event in events:
                    if type(event) in WATCHED and (event := shown(event)) is None:
                        continue
                    text = feed(event)
                    if type(event) is finished_kind and not event.path:
                        text += self._finish(out, event.run)
                        finished = True
                    if text:
                        yield text.encode()
        except AgentLoopError as error:  # after RunFinished: already told; before: RUN_ERROR
            if not finished:
                yield (out.withdrawn() + self._fail(error)).encode()
        except Exception as error:
            _log.exception("AG-UI run on thread %r failed", run_input.thread_id)
            if not finished:
                yield (out.withdrawn() + self._fail(error)).encode()

    def _lead(self, out: AGUIEvents) -> str:
        """What comes before the run's events once the answers or the input were checked.

        A resumed run echoes the client's messages (the interrupted calls, known again before
        their results); a new one after a stopped chat does too, then says how the calls the
        client left open ended (``_stopped``).
        """
        if not self.run_input.resume and not self.told:
            return ""
        snapshot = core.MessagesSnapshotEvent(messages=self.run_input.messages)
        return self.encoder.encode(snapshot) + stopped_frames(out, self.told)

    def _finish(self, out: AGUIEvents, run: Run[Any]) -> str:
        """RUN_FINISHED, or RUN_ERROR worded for the client when the run ended in a hard error."""
        error = run.stop_reason
        if error is not None and not error.is_cancelled():
            return out.withdrawn() + self._fail(error)  # a reply cut mid-stream: withdrawn first
        return out.finish(run)

    def _fail(self, error: BaseException) -> str:
        """RUN_ERROR: the error's class, and its message as the client may read it."""
        said = self.view.message(error, face="AGUIApp")
        event = error_event(error, said, self.view.facts(error))
        return self.encoder.encode(event)


def _started(run_input: core.RunAgentInput, session: Session[Any]) -> core.RunStartedEvent:
    return core.RunStartedEvent(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        protocol_version=core.PROTOCOL_VERSION,
        metadata={"agentloop": {"session_id": session.id}},
    )


def _parse(body: bytes) -> core.RunAgentInput:
    """The request's ``RunAgentInput``, or a 400 (not JSON) / 422 (not the schema)."""
    try:
        data = json_body.decode(body)  # nested too deep or a lone surrogate: not JSON
    except ValueError as exc:
        raise _Refused(400, str(exc)) from exc
    try:
        return core.RunAgentInput.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = [
            {"at": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]}
            for e in exc.errors(include_url=False, include_input=False)[:20]
        ]
        detail = {"message": "not an AG-UI RunAgentInput", "problems": problems}
        raise _Refused(422, detail) from exc


async def _watch_disconnect(receive: Receive, cancel: CancelToken) -> None:
    """Fire ``cancel`` when the client goes away (the run then ends as ``Cancelled``)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            cancel.cancel()
            return
