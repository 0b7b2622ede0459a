"""The viewer's ASGI app (Starlette): pages, their live updates, the static files, decisions.

Routes:

- ``GET /`` the runs, filtered by ``?status=&model=&error=``; ``GET /events`` its live table.
- ``GET /runs/{id}`` one run; ``GET /runs/{id}/events`` its live updates.
- ``POST /runs/{id}/decide`` decisions for a paused run's pending calls: 403 unless the app
  was made with ``allow_decisions=True`` and a ``continuer`` that continues runs.
- ``GET /static/...`` the stylesheet and the script, from the package.

Live updates are Server-Sent Events: the server reads the store every ``poll_seconds`` and
pushes the page's live part again when it changed (an ``update`` event whose data is HTML the
script puts in place); a run that ended says ``end`` and the stream closes. The page gives the
digest of what it shows (``?seen=``), so an unchanged run costs no update.

A request whose ``Host`` is not one of the app's allowed host names (the loopback names by
default) is refused first, whatever its path (``_hosts``: DNS rebinding). Every response
carries a Content-Security-Policy allowing only this origin's own files: the page can make no
request to any other host, even if some stored text tried. A POST must come from the viewer's
own page (its ``Origin``), so another site open in the browser cannot decide.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentloop.errors import AgentLoopError, ConfigurationError, InvalidInput, MemoryBackendError
from agentloop.ui.viewer._decide import (
    decisions_from_form,
    refuse_taken,
    refuse_unrunnable,
    with_deps,
)
from agentloop.ui.viewer._hosts import allowed_names, host_name
from agentloop.ui.viewer._html import live, page, text
from agentloop.ui.viewer._list_page import filters_form, runs_table, store_problem
from agentloop.ui.viewer._records import RunFilter, StoreReader, Unreadable, status_of
from agentloop.ui.viewer._run_page import run_body, unreadable_body
from agentloop.ui.viewer._turns import Nesting

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from agentloop.pausing import Decision

__all__ = ["Continuer", "ViewerApp"]

logger = logging.getLogger("agentloop")

Continuer = Callable[[str, str, Mapping[str, "Decision"]], Awaitable[object]]
"""``continuer(session_id, run_id, decisions)``: continue a paused run with the decisions."""

STATIC = Path(__file__).with_name("static")
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def _digest(html: str) -> str:
    return hashlib.sha256(html.encode()).hexdigest()[:16]


def _event(name: str, data: str) -> str:
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"event: {name}\n{lines}\n"


class ViewerApp:
    """The run viewer over one store, as an ASGI app (``agentloop ui`` serves it with uvicorn).

    Args:
        store: A SQLite file or a ``postgresql://`` URL, opened read-only.
        allow_decisions: Whether the page may decide pending calls (off: read-only).
        continuer: What continues a paused run with decisions (needed for them to do anything).
        deps: What a decided tool reads as ``ctx.deps``, for ``agent_continuer(agent)``'s
            continuer: a value or a factory ``(run) -> deps``.
        poll_seconds: How often a live page's stream reads the store.
        allowed_hosts: The host names a request may name in its ``Host`` header, any port
            (default: the loopback names ``127.0.0.1``, ``localhost``, ``[::1]``; ``["*"]``:
            any name). Every other request is refused with 400 before the origin check, so a
            page of another site that rebinds its DNS name to 127.0.0.1 can neither read the
            viewer nor decide (``_hosts``).
        hosts: The older spelling of ``allowed_hosts`` (give one of the two).
    """

    def __init__(
        self,
        store: str,
        *,
        allow_decisions: bool = False,
        continuer: Continuer | None = None,
        poll_seconds: float = 1.0,
        allowed_hosts: Sequence[str] | None = None,
        hosts: Sequence[str] | None = None,
        deps: Any = None,
    ) -> None:
        self.reader = StoreReader(store)
        self.allow_decisions = allow_decisions
        self.continuer = with_deps(continuer, deps)
        self.poll_seconds = poll_seconds
        self.hosts = _host_names(allowed_hosts, hosts)
        self._continuing: set[asyncio.Task[object]] = set()
        self.app = Starlette(
            routes=[
                Route("/", self.runs_page),
                Route("/events", self.runs_events),
                Route("/runs/{run_id}", self.run_page),
                Route("/runs/{run_id}/events", self.run_events),
                Route("/runs/{run_id}/decide", self.decide, methods=["POST"]),
                Mount("/static", StaticFiles(directory=STATIC), name="static"),
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI: a request for another host name is refused; every response is secured."""

        async def secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"content-security-policy", POLICY.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                headers.append((b"referrer-policy", b"same-origin"))  # no-referrer: Origin null
                message = {**message, "headers": headers}
            await send(message)

        if scope["type"] == "http" and not self._host_allowed(scope):  # no WebSocket routes
            await _unknown_host(scope)(scope, receive, secured)
            return
        await self.app(scope, receive, secured)

    def _host_allowed(self, scope: Scope) -> bool:
        """Whether the request's ``Host`` names an allowed host (any port), before all else."""
        if self.hosts is None:
            return True
        return host_name(_host_headers(scope)) in self.hosts

    # -- the runs ---------------------------------------------------------------------------

    def _runs_live(self, chosen: RunFilter, before: int | None) -> tuple[str, str]:
        """The filter form and the live table (or what is wrong with the store)."""
        try:
            found = self.reader.page(chosen, before)
            offered = found if found.before is None and not chosen.active else None
            offered = offered or self.reader.page(RunFilter())  # the newest runs' choices
        except (MemoryBackendError, InvalidInput) as error:
            return "", store_problem(self.reader.location, error.message)
        return filters_form(offered.runs, chosen), runs_table(found, chosen)

    async def runs_page(self, request: Request) -> Response:
        """``GET /`` (``?before=`` an older page)."""
        chosen = RunFilter.from_query(request.query_params)
        before = _cursor(request.query_params.get("before"))
        form, table = await run_in_threadpool(self._runs_live, chosen, before)
        older = "" if before is None else f"&before={before}"
        stream = f"/events?{chosen.query()}{older}&seen={_digest(table)}".replace("?&", "?")
        return HTMLResponse(page("runs", form + live(table, stream)))

    async def runs_events(self, request: Request) -> Response:
        """``GET /events``: the runs table again whenever it changes."""
        chosen = RunFilter.from_query(request.query_params)
        before = _cursor(request.query_params.get("before"))

        def render() -> tuple[str, bool]:
            return self._runs_live(chosen, before)[1], False

        return self._stream(request, render)

    # -- one run ----------------------------------------------------------------------------

    def _run_live(self, run_id: str) -> tuple[str, bool] | None:
        """A run's live part and whether it has ended for good; None when there is no run."""
        try:
            found = self.reader.load(run_id)
            if found is None:
                return None
            if isinstance(found, Unreadable):
                return unreadable_body(found), True
            nesting = Nesting(self.reader.during(run_id))
        except (MemoryBackendError, InvalidInput) as error:
            return store_problem(self.reader.location, error.message), False
        body = run_body(found, nesting, allow_decisions=self.allow_decisions)
        return body, status_of(found) in ("completed", "failed")

    async def run_page(self, request: Request) -> Response:
        """``GET /runs/{id}``."""
        run_id = request.path_params["run_id"]
        shown = await run_in_threadpool(self._run_live, run_id)
        if shown is None:
            body = f'<section class="problem"><h1>no stored run {text(run_id)}</h1></section>'
            return HTMLResponse(page("no such run", body), status_code=404)
        body, ended = shown
        stream = None if ended else f"/runs/{run_id}/events?seen={_digest(body)}"
        return HTMLResponse(page(f"run {run_id[:12]}", live(body, stream)))

    async def run_events(self, request: Request) -> Response:
        """``GET /runs/{id}/events``: the run again whenever it changes, until it ends."""
        run_id = request.path_params["run_id"]

        def render() -> tuple[str, bool]:
            shown = self._run_live(run_id)
            return shown if shown is not None else ("", True)

        return self._stream(request, render)

    def _stream(self, request: Request, render: Callable[[], tuple[str, bool]]) -> Response:
        seen = request.query_params.get("seen", "")

        async def events() -> AsyncIterator[str]:
            last = seen
            while True:
                body, ended = await run_in_threadpool(render)
                if _digest(body) != last:
                    last = _digest(body)
                    yield _event("update", body)
                if ended:
                    yield _event("end", "")
                    return
                await asyncio.sleep(self.poll_seconds)

        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    # -- decisions --------------------------------------------------------------------------

    async def decide(self, request: Request) -> Response:
        """``POST /runs/{id}/decide``: check the decisions, continue the run, show it again."""
        run_id = request.path_params["run_id"]
        if not self.allow_decisions or self.continuer is None:
            why = "the viewer is read-only (start it with --allow-decisions)"
            return self._refused(why, 403)
        if not _same_origin(request):
            return self._refused("a decision must come from the viewer's own page", 403)
        fields = parse_qs((await request.body()).decode("utf-8", "replace"))
        found = await run_in_threadpool(self.reader.load, run_id)
        if found is None or isinstance(found, Unreadable) or not found.run.paused:
            return self._refused(f"run {run_id} is not waiting on any call", 409)
        try:
            lease = await run_in_threadpool(self.reader.lease, found.session_id)
            refuse_taken(found.run, lease)
        except InvalidInput as error:  # another face has it: say so, never drop it silently
            return self._refused(error.message, 409)
        except MemoryBackendError as error:
            return self._refused(f"the store cannot be read now: {error.message}", 503)
        try:
            decisions = decisions_from_form(found.run.pending, fields)
            await refuse_unrunnable(
                self.continuer, found.run.pending, decisions, found.run.last_agent, found.run
            )
        except InvalidInput as error:
            return self._refused(error.message, 400)
        task = asyncio.create_task(self._continue(found.session_id, run_id, decisions))
        self._continuing.add(task)
        task.add_done_callback(self._continuing.discard)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    async def _continue(self, session_id: str, run_id: str, decisions: Any) -> object:
        assert self.continuer is not None
        try:
            return await self.continuer(session_id, run_id, decisions)
        except AgentLoopError as error:  # the run records it; the page shows the record
            return error
        except Exception as error:  # nobody awaits this task: say it where a person looks
            logger.exception("agentloop ui: continuing run %s failed", run_id)
            return error

    @staticmethod
    def _refused(why: str, status: int) -> Response:
        body = f'<section class="problem" id="refused"><h1>not done</h1><p>{text(why)}</p>'
        body += "</section>"
        return HTMLResponse(page("not done", body), status_code=status)

    def close(self) -> None:
        """Close the store connection."""
        self.reader.close()


def _cursor(value: str | None) -> int | None:
    """A page cursor from the query string (anything but a whole number: the newest page)."""
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


def _host_names(
    allowed_hosts: Sequence[str] | None, hosts: Sequence[str] | None
) -> frozenset[str] | None:
    """``ViewerApp``'s host names from either spelling (None: any name)."""
    if allowed_hosts is not None and hosts is not None:
        raise ConfigurationError(
            "give ViewerApp(allowed_hosts=...) or its older spelling hosts=..., not both",
            field="allowed_hosts",
        )
    return allowed_names(allowed_hosts if allowed_hosts is not None else hosts)


def _host_headers(scope: Scope) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers", []) if key == b"host"]


def _unknown_host(scope: Scope) -> Response:
    """400 for a ``Host`` the viewer does not serve, naming the keyword that allows it."""
    shown = (", ".join(_host_headers(scope)) or "none")[:100]
    why = (
        f"this viewer does not answer to the host name {shown!r} (a page on another name that "
        "resolves here, DNS rebinding, is refused); an application that serves it under that "
        "name passes it in ViewerApp(allowed_hosts=[...])"
    )
    body = f'<section class="problem" id="unknown-host"><h1>unknown host</h1><p>{text(why)}</p>'
    return HTMLResponse(page("unknown host", body + "</section>"), status_code=400)


def _same_origin(request: Request) -> bool:
    """Whether a POST came from a page of this server (its Origin, else its Referer)."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source:
        return False
    return urlsplit(source).netloc == request.headers.get("host")
