"""A mounted viewer refuses DNS rebinding: a ``Host`` it was not given, before the origin check.

The attack, over real HTTP: a page on ``rebound.example``, whose DNS now answers 127.0.0.1,
posts to the viewer on this machine. The browser sends ``Host: rebound.example:PORT`` and an
``Origin`` of the same name, so an origin check comparing the two passes. The viewer is built
as ``docs/ui.md`` builds it (``ViewerApp(store, allow_decisions=True, continuer=...)``, no host
argument) and served by a real uvicorn server on 127.0.0.1; requests are sent with
``http.client`` so the ``Host`` header is exactly the forged one. A refused decision must leave
the stored run paused with no decision recorded and the tool not run.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest
import uvicorn

from agentloop import Agent, tool
from agentloop.errors import ConfigurationError
from agentloop.pausing import Decision
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.ui.viewer import ViewerApp, agent_continuer
from agentloop.ui.viewer._hosts import allowed_names, host_name

RAN: list[str] = []
"""What the approval tool did (it must not run on a refused decision)."""


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (needs a person's approval)."""
    RAN.append(order)
    return f"refunded {order}"


@contextmanager
def serving(app: ViewerApp) -> Iterator[int]:
    """``app`` on a real uvicorn server on 127.0.0.1; yields its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listener.close()
        app.close()


def send(
    port: int, method: str, path: str, *, host: str, body: str = "", origin: str | None = None
) -> tuple[int, str]:
    """One request with exactly this ``Host`` header; the status and the body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        connection.putheader("Host", host)
        if origin is not None:
            connection.putheader("Origin", origin)
        if body:
            connection.putheader("Content-Type", "application/x-www-form-urlencoded")
        connection.putheader("Content-Length", str(len(body.encode())))
        connection.endheaders(body.encode())
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


@dataclass
class Paused:
    """The viewer over a store with a run paused on ``refund``; ``continued`` when it went on."""

    viewer: ViewerApp
    run_id: str
    path: Path
    continued: threading.Event


@pytest.fixture
def paused(tmp_path: Path) -> Iterator[Paused]:
    """A store with a run paused on ``refund``, and the viewer as docs/ui.md mounts it."""
    RAN.clear()
    path = tmp_path / "viewer.db"
    store = SQLiteStore(str(path))
    model = ScriptedModel([call("refund", {"order": "A-17"}), reply("Refunded A-17.")])
    agent = Agent(model, tools=[refund], store=store)
    run = agent.session("support").run_sync("Refund order A-17")
    assert run.paused
    continued = threading.Event()
    continue_run = agent_continuer(agent)

    async def continuer(session_id: str, run_id: str, decisions: Mapping[str, Decision]) -> object:
        try:
            return await continue_run(session_id, run_id, decisions)
        finally:
            continued.set()

    viewer = ViewerApp(str(path), allow_decisions=True, continuer=continuer)
    yield Paused(viewer, run.id, path, continued)
    store.close()


def stored(path: Path, run_id: str) -> tuple[bool, list[object]]:
    """Whether the stored run is still paused, and the decisions it recorded."""
    store = SQLiteStore(str(path), read_only=True)
    try:
        found = store.load_run(run_id)
        assert found is not None and not isinstance(found, Exception)
        return found.run.paused, list(found.run.decisions)
    finally:
        store.close()


def test_a_rebound_page_cannot_approve_a_pending_call(paused: Paused) -> None:
    viewer, run_id, path = paused.viewer, paused.run_id, paused.path
    form = urlencode({"decision:call_1": "approve"})
    with serving(viewer) as port:
        rebound = f"rebound.example:{port}"
        status, body = send(
            port, "POST", f"/runs/{run_id}/decide", host=rebound, body=form,
            origin=f"http://{rebound}",
        )  # fmt: skip
        assert status == 400
        assert "unknown host" in body and "allowed_hosts" in body
        assert "rebound.example" in body
        assert send(port, "GET", "/", host=rebound)[0] == 400  # nor read the pages
        assert send(port, "GET", f"/runs/{run_id}", host=rebound)[0] == 400
        assert send(port, "GET", "/static/viewer.js", host=rebound)[0] == 400
    assert stored(path, run_id) == (True, [])  # still paused, nothing recorded
    assert not paused.continued.is_set() and RAN == []


def test_the_loopback_names_still_decide(paused: Paused) -> None:
    viewer, run_id, path = paused.viewer, paused.run_id, paused.path
    with serving(viewer) as port:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST"):
            assert send(port, "GET", "/", host=host)[0] == 200, host
        local = f"127.0.0.1:{port}"
        form = urlencode({"decision:call_1": "approve"})
        status, _ = send(
            port, "POST", f"/runs/{run_id}/decide", host=local, body=form,
            origin=f"http://{local}",
        )  # fmt: skip
        assert status == 303
        assert paused.continued.wait(timeout=30)
    assert RAN == ["A-17"]
    still_paused, decisions = stored(path, run_id)
    assert not still_paused and len(decisions) == 1


def test_the_origin_check_still_runs_after_the_host_check(paused: Paused) -> None:
    viewer, run_id, path = paused.viewer, paused.run_id, paused.path
    form = urlencode({"decision:call_1": "approve"})
    with serving(viewer) as port:
        status, _ = send(
            port, "POST", f"/runs/{run_id}/decide", host=f"127.0.0.1:{port}", body=form,
            origin="http://evil.example",
        )  # fmt: skip
    assert status == 403
    assert stored(path, run_id) == (True, []) and not paused.continued.is_set()


def test_an_application_names_its_own_hosts(tmp_path: Path) -> None:
    path = tmp_path / "viewer.db"
    SQLiteStore(str(path)).close()
    with serving(ViewerApp(str(path), allowed_hosts=["Viewer.Internal."])) as port:
        assert send(port, "GET", "/", host=f"viewer.internal:{port}")[0] == 200
        assert send(port, "GET", "/", host="viewer.internal")[0] == 200
        assert send(port, "GET", "/", host=f"127.0.0.1:{port}")[0] == 400  # given, not added
        assert send(port, "GET", "/", host="viewer.internal:x")[0] == 400
    with serving(ViewerApp(str(path), allowed_hosts=["*"])) as port:
        assert send(port, "GET", "/", host="anything.example")[0] == 200


def test_a_missing_host_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "viewer.db"
    SQLiteStore(str(path)).close()
    with serving(ViewerApp(str(path))) as port:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.putrequest("GET", "/", skip_host=True)
        connection.endheaders()
        try:
            response = connection.getresponse()
            status = response.status
            response.close()  # its file keeps the socket open past connection.close() otherwise
        finally:
            connection.close()
        assert status == 400  # HTTP/1.1 without Host: uvicorn or the viewer refuses


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("127.0.0.1:8765", "127.0.0.1"),
        ("LocalHost", "localhost"),
        ("localhost.:80", "localhost"),
        ("[::1]:8765", "::1"),
        ("[::1]", "::1"),
        ("[::1]x", None),
        ("[::1", None),
        ("localhost:", None),
        ("localhost:80x", None),
        ("::1", None),  # an IPv6 address in Host is written in brackets
        ("", None),
    ],
)
def test_host_header_names(header: str, name: str | None) -> None:
    assert host_name([header]) == name


def test_two_host_headers_name_no_host() -> None:
    assert host_name(["127.0.0.1", "rebound.example"]) is None
    assert host_name([]) is None


def test_allowed_hosts_are_checked_when_the_app_is_made(tmp_path: Path) -> None:
    assert allowed_names(None) == frozenset({"127.0.0.1", "localhost", "::1"})
    assert allowed_names(["[::1]", "Example.COM"]) == frozenset({"::1", "example.com"})
    assert allowed_names(["example.com", "*"]) is None
    with pytest.raises(ConfigurationError, match="without a port"):
        allowed_names(["example.com:8765"])
    with pytest.raises(ConfigurationError, match="not the string"):
        allowed_names("example.com")
    with pytest.raises(ConfigurationError, match="refuse every request"):
        allowed_names([])
    with pytest.raises(ConfigurationError, match="not both"):
        ViewerApp(str(tmp_path / "x.db"), allowed_hosts=["a"], hosts=["b"])
    assert ViewerApp(str(tmp_path / "x.db"), hosts=["a"]).hosts == frozenset(
        {"a"}
    )  # the older spelling
