"""``VercelAIApp``: an agent behind the Vercel AI SDK's ``useChat`` (SPEC 18).

An ASGI app (extra ``ui``: Starlette) that takes the chat request ``useChat``'s default transport
POSTs (``{id, messages: UIMessage[], trigger, ...}``) and streams the run in the AI SDK's UI
message stream protocol: server-sent events, one JSON chunk each, ``data: [DONE]`` last, the
header ``x-vercel-ai-ui-message-stream: v1``. Route it where the client posts (it answers any
path)::

    app = Starlette(routes=[Route("/api/chat", VercelAIApp(agent), methods=["POST"])])

- **Sessions.** The chat ``id`` is the thread id. ``session=`` is the application's callable
  ``(request, thread_id) -> Session`` (sync or async) that authenticates the caller and picks or
  refuses the conversation (raise ``PermissionError`` to refuse: 403 with its text; any other
  exception, or a value that is no ``Session``, is a 500, logged once, redacted); by default each
  chat id has its own in-memory session for the app's lifetime, seeded from the request's
  ``UIMessage[]`` when new. The server's session is the conversation: for a known chat only the
  last message counts.
- **A request** whose last message is the user's runs the agent on it. One whose last message
  is the assistant's carries the answers to a paused run's calls: ``addToolApprovalResponse``
  (approved: ``Approve()``; denied: ``Deny(reason)``) and ``addToolOutput`` for an external
  call (its output: ``Answer(output)``; ``state: "output-error"``: ``Deny(errorText)``). They
  are checked against the session's pending calls before anything runs: an approval for a call
  that is not pending is refused (409), a missing or unfitting answer is 400.
- **deps** come from ``deps=``, a callable ``(request, body) -> deps`` (sync or async; refuse and
  fail as ``session=`` does), given to the run as ``deps=``.
- **Refusals** are JSON ``{"error": {"type", "message"}}`` with a 4xx status, before any event:
  a body over ``max_body_bytes`` (413), not JSON (nested beyond the parser's depth included) or
  not a chat request (400: wrong shape, a role other than user or assistant,
  ``regenerate-message``), a chat whose run is busy or waits on decisions (409). Nothing runs
  for a refused request; the app's own callables failing is a 500 (type ``AppFailed``).
- **What the client sees** is the app's choice (``_client_view``): a withheld answer never,
  the guardrails' verdicts (``data-agentloop``) and a ``GuardrailTripped``'s name and reason
  only with ``expose_guardrails=True``, a hard error's class and its redacted message.
- **A client that goes away** (``stop()``, an abort) cancels the run (it is finalized as
  ``Cancelled``); a run that had already paused is ended with ``cancel_run`` (``_abort``). The
  next response tells the page how the calls it left open ended (``_stopped``).

How each event becomes chunks is in ``agentloop.ui._vercel_chunks``; a soft error is a
``tool-output-error`` part, the protocol's own mark for a tool that failed while the model goes
on (the AI SDK sends it for a tool that threw, and the model reads the error text), and a hard
error is the protocol's ``error`` chunk after a ``data-error`` part holding its class, phase and
``request_sent``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from agentloop.batching import refuse_batch
from agentloop.engine.refresh import synced
from agentloop.errors import AgentLoopError, InvalidInput, MemoryBackendError
from agentloop.events import RunFinished
from agentloop.pausing import Decision, Deny, check_decisions
from agentloop.ui import _json_body as json_body
from agentloop.ui._abort import cancel_abandoned
from agentloop.ui._asgi import lifespan
from agentloop.ui._client_view import STORE_MESSAGE, WATCHED, ClientView
from agentloop.ui._sessions import (
    AppFailed,
    SessionPicker,
    ThreadSessions,
    call_app,
    pick_session,
    refusal,
)
from agentloop.ui._settled import settled_run
from agentloop.ui._stopped import ended, stopped_data
from agentloop.ui._vercel_chunks import Chunk, Chunks
from agentloop.ui._vercel_request import (
    BadChat,
    ChatRequest,
    answers,
    parse_chat,
    run_input,
    seed,
    unfinished,
)
from agentloop.ui._vercel_settled import settled_chunks

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import Message, Receive, Scope, Send

    from agentloop.engine.agent import Agent
    from agentloop.engine.session import Session
    from agentloop.engine.stream import RunStream
    from agentloop.run import Run

__all__ = ["HEADERS", "MAX_BODY_BYTES", "DepsHook", "VercelAIApp"]

log = logging.getLogger("agentloop")

HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""The response headers of the protocol (the ``ai`` package's ``UI_MESSAGE_STREAM_HEADERS``)."""

MAX_BODY_BYTES = 4 * 1024 * 1024
"""The default cap on a request body: a larger one is refused with 413 before it is parsed."""

DepsHook: TypeAlias = Callable[[Any, Any], Any]
"""``deps(request, body) -> deps`` (or an awaitable of it); ``body`` is the decoded JSON."""


class _Refused(Exception):
    """A request answered with a 4xx before anything runs."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class VercelAIApp:
    """An ASGI app serving ``agent`` to the Vercel AI SDK's ``useChat`` (see the module)."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        session: SessionPicker | None = None,
        deps: DepsHook | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        expose_guardrails: bool = False,
    ) -> None:
        refuse_batch(agent, "VercelAIApp")  # SPEC 25
        self.agent = agent
        self.max_body_bytes = max_body_bytes
        self.expose_guardrails = expose_guardrails
        self._picker = session
        self._deps = deps
        self._threads = ThreadSessions(agent)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection: a chat request, or the server's lifespan messages."""
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        from starlette.requests import Request

        if scope["type"] != "http":
            raise RuntimeError(f"VercelAIApp serves HTTP, not {scope['type']!r}")
        request = Request(scope, receive)
        if request.method != "POST":
            response: Any = _refusal(_Refused(405, "MethodNotAllowed", "POST a chat request"))
        else:
            response = await self._respond(request)
        await response(scope, receive, send)

    async def _respond(self, request: Request) -> Any:
        try:
            body = await _read_json(request, self.max_body_bytes)
            chat = parse_chat(body)
            session = await self._session(request, chat)
            deps = await self._deps_for(request, body)
            prepared = self._prepare(session, chat, deps)
            view = ClientView(expose_guardrails=self.expose_guardrails)
            if isinstance(prepared, _Settled):
                return prepared.worded(view)
            stream = await _started(*prepared, view, session)
        except _Refused as refused:
            return _refusal(refused)
        except (BadChat, InvalidInput) as exc:  # a media part or a run's input that does not fit
            return _refusal(_Refused(400, type(exc).__name__, str(exc)))
        return stream

    async def _session(self, request: Request, chat: ChatRequest) -> Session[Any]:
        try:
            return await pick_session(
                self._picker, self._threads, request, chat.id, lambda: seed(chat.messages[:-1])
            )
        except (BadChat, AgentLoopError) as exc:  # the client's history is no safe transcript
            raise _Refused(400, type(exc).__name__, str(exc)) from exc
        except PermissionError as exc:  # the application refused the caller
            raise _Refused(403, "Forbidden", refusal(exc)) from exc
        except AppFailed as exc:  # the application's callable failed (logged where it did)
            raise _Refused(500, "AppFailed", str(exc)) from exc

    async def _deps_for(self, request: Request, body: Any) -> Any:
        if self._deps is None:
            return None
        try:
            return await call_app("deps", self._deps, request, body)
        except PermissionError as exc:
            raise _Refused(403, "Forbidden", refusal(exc)) from exc
        except AppFailed as exc:
            raise _Refused(500, "AppFailed", str(exc)) from exc

    def _prepare(
        self, session: Session[Any], chat: ChatRequest, deps: Any
    ) -> tuple[RunStream[Any], Chunks] | _Settled:
        """The run's stream (not entered yet) and the chunk writer of its response.

        An answer for calls that no longer wait (decided elsewhere, or sent twice) is told what
        their run did instead (``_vercel_settled.py``): nothing runs.
        """
        try:
            synced(session)  # the CLI, the viewer or another worker may have moved it on
        except MemoryBackendError as exc:
            raise _Refused(503, "MemoryBackendError", STORE_MESSAGE) from exc
        if chat.last.role == "user":
            _not_paused(session)
            told = _stopped_told(session, chat)
            stream = session.stream(run_input(chat.last), deps=deps)
            return stream, Chunks(f"msg-{secrets.token_hex(12)}", told=told)
        given, outputs = answers(chat.last)
        asked = set(given) or set(outputs)
        settled = settled_run(session.current_run, asked)
        if settled is not None:
            chunks = Chunks(chat.last.id or f"msg-{secrets.token_hex(12)}")
            return _Settled(settled, settled_chunks(chunks, settled, asked))
        decisions = _decisions(session, chat)
        run = session.current_run
        approvals = {p.id for p in run.pending if p.kind == "approval"} if run else set()
        denied = [k for k, d in decisions.items() if isinstance(d, Deny) and k in approvals]
        stream = session.continue_stream(decisions=decisions, deps=deps)
        message_id = chat.last.id or f"msg-{secrets.token_hex(12)}"
        return stream, Chunks(message_id, answered=decisions, denied=denied)


class _Settled:
    """The response to an answer its run no longer waits for: the chunks of what it did."""

    def __init__(self, run: Run[Any], chunks: list[Chunk]) -> None:
        self._run, self._chunks = run, chunks

    def worded(self, view: ClientView) -> _Settled:
        """Itself, a hard error's chunks worded for the client (as a live run's are)."""
        if self._run.stop_reason is not None:
            _worded(self._chunks, self._run.stop_reason, view)
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(_body(encode(self._chunks) + _DONE, more=False))


def _stopped_told(session: Session[Any], chat: ChatRequest) -> list[Chunk]:
    """The chunk telling the page how the calls a stopped chat left open ended (``_stopped``)."""
    calls = unfinished(chat.messages[:-1])
    results = ended(session, calls) if calls else []
    return [stopped_data(results)] if results else []


def _not_paused(session: Session[Any]) -> None:
    run = session.current_run
    if run is not None and run.paused:
        ids = ", ".join(p.id for p in run.pending)
        raise _Refused(
            409,
            "Conflict",
            f"this chat's run waits on decisions for {ids}: answer them "
            "(addToolApprovalResponse, addToolOutput) before sending a new message",
        )


def _decisions(session: Session[Any], chat: ChatRequest) -> dict[str, Decision]:
    """The client's answers, checked against the session's pending calls."""
    run = session.current_run
    pending = run.pending if run is not None else ()
    if not pending:
        raise _Refused(409, "Conflict", "this chat has no run waiting for decisions")
    approvals, outputs = answers(chat.last)
    waiting = {p.id for p in pending}
    forged = [k for k in approvals if k not in waiting]
    if forged:
        raise _Refused(
            409, "Conflict", f"call {forged[0]!r:.80} is not waiting for a decision in this chat"
        )
    decided = {k: d for k, d in outputs.items() if k in waiting} | approvals
    try:
        return check_decisions(pending, decided)
    except InvalidInput as exc:
        raise _Refused(400, "InvalidInput", str(exc)) from exc


async def _started(
    stream: RunStream[Any], chunks: Chunks, view: ClientView, session: Session[Any]
) -> _ChunkStream:
    """Enter the run's stream before any byte is sent, so a busy session is still a 409."""
    try:
        await stream.__aenter__()
    except InvalidInput as exc:
        raise _Refused(409, "Conflict", str(exc)) from exc
    return _ChunkStream(stream, chunks, view, session)


async def _read_json(request: Request, limit: int) -> Any:
    body = await json_body.read_capped(request, limit)
    if body is None:
        raise _Refused(413, "PayloadTooLarge", f"the body is over {limit:,} bytes")
    try:
        return json_body.decode(body)  # nested too deep or a lone surrogate: not JSON
    except ValueError as exc:
        raise _Refused(400, "BadChat", str(exc)) from exc


def _refusal(refused: _Refused) -> Any:
    from starlette.responses import JSONResponse

    error = {"type": refused.kind, "message": str(refused)}
    return JSONResponse({"error": error}, status_code=refused.status)


# -- the response -----------------------------------------------------------------------------

_DONE = b"data: [DONE]\n\n"


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
_STR: Callable[[str], str] = json.encoder.encode_basestring


def _delta(c: Chunk) -> str:
    return f'{{"type":"{c["type"]}","id":{_STR(c["id"])},"delta":{_STR(c["delta"])}}}'


def _input_delta(c: Chunk) -> str:
    call, text = _STR(c["toolCallId"]), _STR(c["inputTextDelta"])
    return f'{{"type":"tool-input-delta","toolCallId":{call},"inputTextDelta":{text}}}'


def _input_start(c: Chunk) -> str:
    call, name = _STR(c["toolCallId"]), _STR(c["toolName"])
    return f'{{"type":"tool-input-start","toolCallId":{call},"toolName":{name}}}'


def _input_available(c: Chunk) -> str:
    call, name, given = _STR(c["toolCallId"]), _STR(c["toolName"]), _JSON(c["input"])
    return (
        f'{{"type":"tool-input-available","toolCallId":{call},"toolName":{name},"input":{given}}}'
    )


def _output(c: Chunk) -> str:
    output = c["output"]
    text = _STR(output) if type(output) is str else _JSON(output)
    return (
        f'{{"type":"tool-output-available","toolCallId":{_STR(c["toolCallId"])},"output":{text}}}'
    )


_BY_HAND: dict[str, Callable[[Chunk], str]] = {  # the chunks of every turn, written directly
    "text-delta": _delta,
    "reasoning-delta": _delta,
    "tool-input-delta": _input_delta,
    "tool-input-start": _input_start,
    "tool-input-available": _input_available,
    "tool-output-available": _output,
    "start-step": lambda c: '{"type":"start-step"}',
    "finish-step": lambda c: '{"type":"finish-step"}',
}


def encode(chunks: list[Chunk]) -> bytes:
    """Chunks as server-sent events: ``data: <json>`` and a blank line each."""
    if len(chunks) == 1:  # most events: one delta
        c = chunks[0]
        by_hand = _BY_HAND.get(c["type"])
        return f"data: {by_hand(c) if by_hand else _JSON(c)}\n\n".encode()
    lines = []
    for c in chunks:
        by_hand = _BY_HAND.get(c["type"])
        lines.append(f"data: {by_hand(c) if by_hand else _JSON(c)}\n\n")
    return "".join(lines).encode()


class _ChunkStream:
    """The SSE response of one run: chunks as events arrive; the client leaving cancels it."""

    def __init__(
        self, stream: RunStream[Any], chunks: Chunks, view: ClientView, session: Session[Any]
    ) -> None:
        self._session = session
        self._complete = False
        self._stream = stream
        self._chunks = chunks
        self._view = view

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            headers = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            pump = asyncio.ensure_future(self._pump(send))
            gone = asyncio.ensure_future(self._aborted(receive))
            await asyncio.wait((pump, gone), return_when=asyncio.FIRST_COMPLETED)
            left = gone.done() and not gone.cancelled() and gone.result()
            for task in (pump, gone):
                task.cancel()
            await asyncio.gather(pump, gone, return_exceptions=True)
        finally:  # leaving the block cancels a run still going (finalized as Cancelled)
            await self._stream.__aexit__(None, None, None)
        if left:  # the client aborted: a run that paused meanwhile is ended too (SPEC 17)
            await cancel_abandoned(self._session, self._stream.run)

    async def _aborted(self, receive: Receive) -> bool:
        """Wait for the client to go; True when it went before the response was complete."""
        await _disconnected(receive)
        return not self._complete

    async def _pump(self, send: Send) -> None:
        feed, shown = self._chunks.feed, self._view.shown
        try:
            async for event in self._stream:
                if type(event) in WATCHED and (event := shown(event)) is None:  # type: ignore[assignment]
                    continue
                chunks = feed(event)
                if (
                    type(event) is RunFinished
                    and event.run.stop_reason is not None
                    and not event.path
                ):
                    _worded(chunks, event.run.stop_reason, self._view)
                if chunks:
                    await send(_body(encode(chunks)))
        except AgentLoopError:
            pass  # the run's hard error: its chunks went out with RunFinished
        except OSError:
            return  # the client went away mid-send
        except Exception:
            log.exception("VercelAIApp: the stream failed")
            failed = [{"type": "error", "errorText": "the server failed while streaming"}]
            await send(_body(encode(failed)))
        self._complete = True  # a disconnect from here on is the response's normal end
        await send(_body(_DONE, more=False))


def _worded(chunks: list[Chunk], error: BaseException, view: ClientView) -> None:
    """A hard error's ``data-error`` and ``error`` chunks, worded for the client (in place).

    ``errorText`` reads ``<class>: <str(error)>`` and then the phase: the message is replaced
    where it stands.
    """
    message, facts = view.message(error, face="VercelAIApp"), view.facts(error)
    head = f"{type(error).__name__}: "
    cut = len(head) + len(str(error))
    for chunk in chunks:
        if chunk["type"] == "data-error":
            chunk["data"] = {**chunk["data"], "message": message, **facts}
        elif chunk["type"] == "error":
            chunk["errorText"] = head + message + chunk["errorText"][cut:]


def _body(data: bytes, *, more: bool = True) -> Message:
    return {"type": "http.response.body", "body": data, "more_body": more}


async def _disconnected(receive: Receive) -> None:
    """Return when the client disconnects (the body was read before the response started)."""
    message: Message | Mapping[str, Any] = {}
    while message.get("type") != "http.disconnect":
        message = await receive()
