"""Cassettes: record a block's real provider HTTP exchanges to a file, replay them offline.

vcrpy's names and modes (``use_cassette``, ``record_mode`` words) over our one HTTP layer::

    with use_cassette("tests/cassettes/weather.yaml", mode="once"):
        run = agent.run_sync("What is the weather in Paris?")

Every provider client's request in the block (the task that entered it and the tasks it
creates: ``run``, ``stream``, sessions, ``continue_run``, ``agentloop.batch``'s submissions,
status reads and downloads, ``_calls``) goes through the cassette, which
``providers._http`` asks through one context variable (``providers._tape``; no cassette, no
cost). ``mode="none"`` (the default) replays and opens no provider socket; ``"once"`` replays
if the file exists, else records; ``"all"`` records afresh. A recording is saved when the block
ends, a hard error's too. The file (``_format``) is YAML or JSON with sorted keys, no request
header, secrets redacted, request media by digest; an SSE reply is kept one event per item, an AWS
event stream (Bedrock's ``ConverseStream``, ``_aws``) one decoded message per item, and either is
replayed as a stream in the same pieces.

Matching: ``"strict"`` gives a request the first unplayed exchange equal to it (method, path
and body after redaction); ``"ordered"`` the next unplayed one, on method and path. Anything
else is the hard ``CassetteMismatch`` naming the first difference: it is no ``ProviderError``,
so no retry or fallback ever answers it, and the run finalizes and raises it.

DBOS and Temporal: a cassette is a context variable of the process, so it holds where the
model calls run in the context that entered the block: DBOS steps of ``durable.run()`` (not a
workflow recovered or dequeued by another process), a Temporal activity only when its worker was
started inside the block.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from contextvars import Token
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from agentloop.cassettes._format import (
    first_difference,
    kept_headers,
    load,
    parse_body,
    request_record,
    save,
    scrub_known,
)
from agentloop.errors import CassetteMismatch, ConfigurationError, FailurePhase, ProviderError
from agentloop.providers._bytestream import EventStream
from agentloop.providers._classify import error_for_status, invalid_body, read_request_id
from agentloop.providers._http import HttpResponse, HttpTransport, SSEStream
from agentloop.providers._http_calls import raise_for_status, send
from agentloop.providers._sse import SSEEvent
from agentloop.providers._tape import TAPE, Tape
from agentloop.providers._wire import decode_json

__all__ = ["Cassette", "use_cassette"]

Mode = Literal["none", "once", "all"]
Match = Literal["strict", "ordered"]
_F = TypeVar("_F", bound=Callable[..., Any])
_MODES = ("none", "once", "all")
_MATCHES = ("strict", "ordered")


class Cassette:
    """One cassette file in use: a sync/async context manager and a decorator.

    ``recording`` says whether this block sends requests and keeps them; ``all_played`` whether
    every recorded exchange was asked for (a replayed block that asked for fewer has changed).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        mode: Mode = "none",
        match: Match = "strict",
        redact: str | Iterable[str] = (),
    ) -> None:
        """Check the arguments; the file is read when the block is entered."""
        if mode not in _MODES:
            raise ConfigurationError(f"mode must be one of {', '.join(_MODES)}", field="mode")
        if match not in _MATCHES:
            raise ConfigurationError(f"match must be one of {', '.join(_MATCHES)}", field="match")
        if isinstance(redact, str):
            redact = (redact,)
        self.path = Path(path)
        self.mode: Mode = mode
        self.match: Match = match
        self.redact: tuple[str, ...] = tuple(str(r) for r in redact)
        self.recording = False
        self.interactions: list[dict[str, Any]] = []
        self._played: list[bool] = []
        self._requests = 0
        self._ids: list[str] = []  # run ids in the block's requests, by first appearance
        self._token: Token[Tape | None] | None = None
        self._lock = threading.Lock()  # sync tasks run their own loops in worker threads

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r}, mode={self.mode!r}, match={self.match!r})"

    @property
    def all_played(self) -> bool:
        """True when every recorded exchange has been played (always, while recording)."""
        return all(self._played)

    @property
    def play_count(self) -> int:
        """How many recorded exchanges were played."""
        return sum(self._played)

    # -- the block -------------------------------------------------------------------------

    def __enter__(self) -> Cassette:
        exists = self.path.is_file()
        if self.mode == "none" and not exists:
            raise ConfigurationError(
                f'cassette {self.path} does not exist; record it with mode="once"', field="path"
            )
        self.recording = self.mode == "all" or not exists
        self.interactions = [] if self.recording else load(self.path)
        self._played = [False] * len(self.interactions)
        self._requests = 0
        self._ids = []
        self._token = TAPE.set(cast("Tape", _Deck(self)))
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            TAPE.reset(self._token)
            self._token = None
        if self.recording:
            save(self.path, self.interactions)

    async def __aenter__(self) -> Cassette:
        return self.__enter__()

    async def __aexit__(self, *exc_info: object) -> None:
        self.__exit__(*exc_info)

    def __call__(self, fn: _F) -> _F:
        """Decorate a sync or async function: each call runs inside the cassette."""
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                async with self._fresh():
                    return await fn(*args, **kwargs)

            return cast("_F", run_async)

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return fn(*args, **kwargs)

        return cast("_F", run)

    def _fresh(self) -> Cassette:
        return Cassette(self.path, mode=self.mode, match=self.match, redact=self.redact)

    # -- requests --------------------------------------------------------------------------

    def _secrets(self, transport: HttpTransport) -> tuple[str, ...]:
        return (*self.redact, *transport.secrets)

    def _take(self, request: dict[str, Any]) -> dict[str, Any]:
        """The exchange that answers ``request`` (marked played), or ``CassetteMismatch``."""
        with self._lock:
            return self._take_locked(request)

    def _take_locked(self, request: dict[str, Any]) -> dict[str, Any]:
        number = self._requests
        self._requests += 1
        unplayed = [i for i, played in enumerate(self._played) if not played]
        chosen = self._choose(unplayed, request)
        if chosen is not None:
            self._played[chosen] = True
            return self.interactions[chosen]
        again = self._again(request)
        if again is not None:
            return again
        if not unplayed:
            raise CassetteMismatch(
                f"request {number + 1}: no recorded request left", path=str(self.path), index=number
            )
        raise self._mismatch(number, self._recorded(unplayed[0]), request)

    def _same(self, index: int, request: dict[str, Any]) -> bool:
        recorded = self._recorded(index)
        if self.match == "strict":
            return recorded == request
        return (recorded.get("method"), recorded.get("path")) == (
            request["method"],
            request["path"],
        )

    def _choose(self, unplayed: list[int], request: dict[str, Any]) -> int | None:
        """Strict: the first unplayed exchange equal to ``request``; ordered: the next one."""
        if self.match == "strict":
            return next((i for i in unplayed if self._same(i, request)), None)
        return unplayed[0] if unplayed and self._same(unplayed[0], request) else None

    def _again(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """A GET (a batch's status) past its recordings: the last recorded answer again."""
        if request["method"] != "GET":
            return None
        for index in reversed(range(len(self.interactions))):
            if self._played[index] and self._same(index, request):
                return self.interactions[index]
        return None

    def _recorded(self, index: int) -> dict[str, Any]:
        request = self.interactions[index].get("request")
        return request if isinstance(request, dict) else {}

    def _mismatch(
        self, number: int, recorded: dict[str, Any], got: dict[str, Any]
    ) -> CassetteMismatch:
        if self.match == "ordered":
            recorded = {k: recorded.get(k) for k in ("method", "path")}
            got = {k: got[k] for k in ("method", "path")}
        where, left, right = first_difference(recorded, got) or ("$", recorded, got)
        return CassetteMismatch(
            f"request {number + 1} differs from the recording at {where}: "
            f"recorded {left!r}, got {right!r}",
            path=str(self.path),
            index=number,
            difference=where,
        )

    def _keep(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        with self._lock:
            self.interactions.append({"request": request, "response": response})
            self._played.append(True)

    def _note_ids(self, found: Iterable[str]) -> None:
        with self._lock:
            self._ids.extend(i for i in dict.fromkeys(found) if i not in self._ids)

    def _number_ids(self, text: str) -> str:
        """``text`` with each run id of the block's requests as ``<run-id N>`` (1-based)."""
        for number, run_id in enumerate(self._ids, 1):
            text = text.replace(run_id, f"<run-id {number}>")
        return text

    def _live_id(self, number: int) -> str | None:
        return self._ids[number - 1] if 0 < number <= len(self._ids) else None


class _Deck:
    """The ``Tape`` a cassette lends the HTTP layer while its block runs."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette

    async def post_json(
        self,
        transport: HttpTransport,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
    ) -> HttpResponse:
        cassette = self.cassette
        secrets = cassette._secrets(transport)
        request = request_record("POST", url, payload, secrets)
        if not cassette.recording:
            return _replayed(cassette._take(request)["response"], transport, url)
        reply = await send(transport, "POST", url, payload=payload, headers=headers)
        text = scrub_known(reply.text, secrets)
        kept = {
            "status": reply.status,
            "headers": kept_headers(reply.headers, secrets),
            "body": parse_body(text.encode()) if text else "",
        }
        cassette._keep(request, kept)  # a refusal too: it replays as the same error
        return _answer(reply.status, reply.headers, reply.text, transport, url)

    def stream_sse(
        self,
        transport: HttpTransport,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
    ) -> SSEStream:
        cassette = self.cassette
        request = request_record("POST", url, payload, cassette._secrets(transport))
        if cassette.recording:
            return _RecordingStream(cassette, request, transport, url, payload, headers)
        return _ReplayStream(cassette, request, transport, url, payload, headers)

    def stream_events(
        self,
        transport: HttpTransport,
        url: str,
        payload: bytes,
        headers: Mapping[str, str],
        accept: str,
    ) -> EventStream:
        from agentloop.cassettes._aws import RecordingEvents, ReplayEvents

        cassette = self.cassette
        request = request_record("POST", url, payload, cassette._secrets(transport))
        kind = RecordingEvents if cassette.recording else ReplayEvents
        return kind(cassette, request, transport, url, payload, headers, accept)

    async def call(
        self,
        transport: HttpTransport,
        method: str,
        url: str,
        payload: Mapping[str, Any] | None,
        form: Any,
        limit: int | None,
    ) -> HttpResponse:
        from agentloop.cassettes._calls import taped_call

        return await taped_call(self.cassette, transport, method, url, payload, form, limit)


def _replayed(response: Mapping[str, Any], transport: HttpTransport, url: str) -> HttpResponse:
    headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
    body = response.get("body")
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return _answer(int(response.get("status", 200)), headers, text, transport, url)


def _answer(
    status: int, headers: Mapping[str, str], text: str, transport: HttpTransport, url: str
) -> HttpResponse:
    """A JSON reply as ``post_json`` gives it, or the error it makes (status, then body)."""
    request_id = read_request_id(headers, transport.secrets)
    reply = HttpResponse(status, headers, None, text, request_id)
    raise_for_status(reply, transport, url)
    try:
        data = decode_json(text)
    except (ValueError, RecursionError) as exc:
        raise invalid_body(
            f"{transport.provider}: response body is not valid JSON ({exc})",
            text, transport.provider, request_id, transport.secrets,
        ) from exc  # fmt: skip
    return HttpResponse(status, headers, data, text, request_id)


def _keep_refusal(
    cassette: Cassette, request: dict[str, Any], error: ProviderError, secrets: tuple[str, ...]
) -> None:
    """A reply with a failure status, kept as it came (as far as the error holds it).

    A replay raises the error its status and body make, as the live request did; a failure
    with no status (a refused connection, a timeout) is not an exchange and is not kept.
    """
    if error.status_code is None or error.phase is not FailurePhase.STATUS:
        return
    headers = {} if error.retry_after is None else {"retry-after": f"{error.retry_after:g}"}
    aws = _aws_type(error)
    if aws is not None:  # a stream's refusal keeps no headers: its AWS type is in its message
        headers["x-amzn-errortype"] = aws
    text = scrub_known(error.body or "", secrets)
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = text
    cassette._keep(request, {"status": error.status_code, "headers": headers, "body": body})


def _aws_type(error: ProviderError) -> str | None:
    """The AWS error type a refusal's message names (``bedrock HTTP 400: ValidationException:``)."""
    from agentloop.providers._aws_errors import AWS_ERROR_TYPES

    head = f"{error.provider} HTTP {error.status_code}: "
    text = str(error)
    if not text.startswith(head):
        return None
    name = text[len(head) :].split(": ", 1)[0]
    return name if name in AWS_ERROR_TYPES else None


def _raise_refusal(
    status: int, headers: Mapping[str, str], text: str, transport: HttpTransport, url: str
) -> None:
    if status >= 400:
        raise error_for_status(
            status, headers, text, provider=transport.provider, secrets=transport.secrets,
            url=url,
        )  # fmt: skip


class _RecordingStream(SSEStream):
    """The real stream, each event kept as it passes (saved with the exchange on exit)."""

    _transport: HttpTransport

    def __init__(self, cassette: Cassette, request: dict[str, Any], *args: Any) -> None:
        super().__init__(*args)
        self._cassette = cassette
        self._request = request
        self._events: list[dict[str, Any]] = []

    async def __aenter__(self) -> SSEStream:
        secrets = self._cassette._secrets(self._transport)
        try:
            await super().__aenter__()
        except ProviderError as error:
            _keep_refusal(self._cassette, self._request, error, secrets)
            raise
        kept = {
            "status": self.status,
            "headers": kept_headers(self.headers, secrets),
            "events": self._events,
        }
        self._cassette._keep(self._request, kept)
        return self

    async def __anext__(self) -> SSEEvent:
        event = await super().__anext__()
        item: dict[str, Any] = {"event": event.event, "data": event.data}
        if event.id is not None:
            item["id"] = event.id
        if event.retry is not None:
            item["retry"] = event.retry
        self._events.append(item)
        return event


class _ReplayStream(SSEStream):
    """A recorded SSE reply, replayed event by event; no socket is opened."""

    _transport: HttpTransport

    def __init__(self, cassette: Cassette, request: dict[str, Any], *args: Any) -> None:
        super().__init__(*args)
        self._cassette = cassette
        self._request = request
        self._queue: list[SSEEvent] = []

    async def __aenter__(self) -> SSEStream:
        response = self._cassette._take(self._request)["response"]
        self.status = int(response.get("status", 200))
        self.headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        if self.status >= 400:
            body = response.get("body")
            text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            _raise_refusal(self.status, self.headers, text, self._transport, self._url)
        self.request_id = read_request_id(self.headers, self._transport.secrets)
        events = response.get("events") or []
        self._queue = [SSEEvent(**e) for e in reversed(events)]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def __anext__(self) -> SSEEvent:
        if not self._queue:
            raise StopAsyncIteration
        return self._queue.pop()


def use_cassette(
    path: str | Path,
    *,
    mode: Mode = "none",
    match: Match = "strict",
    redact: str | Iterable[str] = (),
) -> Cassette:
    """A ``Cassette`` over ``path``: ``with``/``async with`` it, or decorate a function.

    Args:
        path: The cassette file (``.yaml``/``.yml`` or ``.json``).
        mode: ``"none"`` replays (the file must exist), ``"once"`` replays an existing file or
            records a new one, ``"all"`` records afresh.
        match: ``"strict"`` (method, path and body) or ``"ordered"`` (the next exchange, on
            method and path).
        redact: Strings stored as ``<redacted>`` wherever they occur, beside the client's key.
    """
    return Cassette(path, mode=mode, match=match, redact=redact)
