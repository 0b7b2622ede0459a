"""A provider's failure reaches the end user as what failed, never where (SPEC 18, 26).

A model provider that cannot be reached fails with the transport's own text: ``openai: connect
failed (ClientConnectorError: Cannot connect to host 10.0.3.7:4000 ...)``, the host and port of
the app's provider or its gateway. The UI apps' error event, the A2A task's status and the MCP
result showed it to the end user, and so did the custom event of a fallback (``FellBack``) or a
retry (``RetryScheduled``), which carried the error's whole text. Now every served face reads
``openai: connect failed``; a 4xx reply's own words (``Incorrect API key``) stay, a 5xx loses
its body (a gateway's diagnostics: ``openai HTTP 503``), a 404 its URL and a refused redirect
its target host. The run's own events, the log and the store keep the whole text. Real
clients: ``@ag-ui/client`` (``node/agui_events.mjs``), the ``ai`` package's chat
(``node/vercel_chat.mjs``), the official A2A and MCP clients; the raw bytes on the wire too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent
from agentloop import events as ev
from agentloop.errors import (
    BudgetExhausted,
    Cancelled,
    InternalError,
    ProviderUnavailable,
    RateLimitEscalation,
    UnexpectedRedirect,
)
from agentloop.observers import Observer
from agentloop.providers import FallbackClient, OpenAIClient, RetryingClient
from agentloop.providers._classify import error_for_status, redirect_error
from agentloop.safety._client_text import (
    INTERNAL_MESSAGE,
    served_error,
    served_failure,
    served_message,
)
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, Fault
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

from .test_seams_guardrails import Tap, agui, node_or_skip, serving, vercel

CONNECT_FAILED = "openai: connect failed"


@contextlib.contextmanager
def dead_port() -> Iterator[int]:
    """A port of 127.0.0.1 bound and not listening: a connect there is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def dead_client(port: int) -> OpenAIClient:
    return OpenAIClient("dead-model", api_key="k", base_url=f"http://127.0.0.1:{port}/v1")


class Seen(Observer):
    """An observer: the run's own events, whole."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)


@contextlib.asynccontextmanager
async def falling_back(port: int, seen: Seen) -> AsyncIterator[Agent[Any]]:
    """A dead primary, then a live model that answers 503 once (retried) and then ``ok``."""
    async with FakeProviderServer([Fault.server_error(503), FakeReply("ok")]) as fake:
        live = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
        retrying = RetryingClient(live, base_delay=0.0, jitter=0.0)
        client = FallbackClient([dead_client(port), retrying])
        async with client:
            yield Agent(client, observers=[seen])


def the_runs_own(seen: Seen, port: int) -> None:
    """The app's observers read the whole text: only the served faces reword it."""
    [fell] = [e for e in seen.events if isinstance(e, ev.FellBack)]
    assert f"127.0.0.1:{port}" in str(fell.error)
    [retry] = [e for e in seen.events if isinstance(e, ev.RetryScheduled)]
    assert "503" in str(retry.error)


def logged_once(caplog: pytest.LogCaptureFixture, face: str, port: int) -> None:
    """The operator's log has the whole text once: the face, the class, the host and port."""
    lines = [r.getMessage() for r in caplog.records if r.name == "agentloop"]
    [line] = [m for m in lines if "a served run ended" in m]
    assert line.startswith(f"{face}: a served run ended in ProviderUnavailable: ")
    assert f"127.0.0.1:{port}" in line


# -- the words -------------------------------------------------------------------------------------


async def test_a_refused_connect_is_what_failed_without_where() -> None:
    with dead_port() as port:
        with pytest.raises(ProviderUnavailable) as caught:
            await Agent(dead_client(port)).run("hello")
    error = caught.value
    assert f"127.0.0.1:{port}" in str(error)  # the caller's code and the log read it all
    assert served_message(error) == CONNECT_FAILED
    shown = served_error(error)
    assert type(shown) is ProviderUnavailable and str(shown) == CONNECT_FAILED
    assert (shown.phase, shown.request_sent, shown.provider) == ("connect", False, "openai")
    assert f"127.0.0.1:{port}" in str(error)  # the copy left the original alone
    assert str(pickle.loads(pickle.dumps(shown))) == CONNECT_FAILED


def test_a_404_loses_its_url_and_keeps_the_providers_words() -> None:
    url = "http://gateway.ops-internal.example:4000/chat/completions?key=1"
    body = '{"error": {"message": "Not found"}}'
    error = error_for_status(404, {}, body, provider="openai", url=url)
    assert "gateway.ops-internal.example" in str(error)
    said = served_message(error)
    assert said.startswith("openai HTTP 404: Not found")
    assert "ops-internal" not in said and "http" not in said.split(": ", 1)[1].split(";")[0]


def test_a_refused_redirect_loses_its_target_host() -> None:
    headers = {"location": "https://sso.ops-internal.example/login"}
    error = redirect_error(302, headers, "https://api.openai.com/v1/chat", "openai")
    assert isinstance(error, UnexpectedRedirect) and "sso.ops-internal.example" in str(error)
    said = served_message(error)
    assert said == "openai HTTP 302: redirect refused (redirects are never followed)"


def test_a_5xx_loses_its_body() -> None:
    """A gateway's 500 (LiteLLM's proxy words it so) names its backend: the server's to read."""
    body = (
        '{"error": {"message": "litellm.APIConnectionError: Connection error to '
        'http://vllm-7.ops-internal.example:8000/v1 (Traceback: ...)", "code": "500"}}'
    )
    error = error_for_status(500, {}, body, provider="openai")
    assert "vllm-7.ops-internal.example" in str(error)
    assert served_message(error) == "openai HTTP 500"
    assert served_message(error_for_status(503, {}, "", provider="openai")) == "openai HTTP 503"


def test_a_replys_own_words_stay() -> None:
    body = '{"error": {"message": "Incorrect API key provided: sk-abc...xyz."}}'
    error = error_for_status(401, {}, body, provider="openai")
    assert served_message(error) == str(error)
    assert served_error(error) is error  # nothing to change: no copy


def test_an_error_whose_args_are_not_its_text_copies_whole() -> None:
    key = "sk-proj-" + "a1b2c3d4" * 6
    error = RateLimitEscalation(4, 2.5)  # its args are (attempts, retry_after)
    error.message = f"{error.message}; the gateway said: key {key} is over its limit"
    shown = served_error(error)
    assert type(shown) is RateLimitEscalation and (shown.attempts, shown.retry_after) == (4, 2.5)
    again = pickle.loads(pickle.dumps(shown))
    assert key not in str(shown) and key not in str(again) and again.attempts == 4
    assert key in str(error)


def test_a_served_failure_is_logged_only_when_its_words_hide_something(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentloop")
    spent = BudgetExhausted("tokens", 100, 120)
    assert served_failure(spent, "A2A") == str(spent)  # the client read it all: no line
    assert served_failure(Cancelled(), "A2A") == "Agent cancelled"
    assert served_failure(KeyError("x"), "A2A") == INTERNAL_MESSAGE  # the face logs a bug
    assert [r for r in caplog.records if r.name == "agentloop"] == []
    key = "sk-proj-" + "a1b2c3d4" * 6
    hidden = InternalError(f"hook raised: db.ops-internal.example refused {key}")
    assert served_failure(hidden, "MCPApp") == INTERNAL_MESSAGE
    [record] = [r for r in caplog.records if r.name == "agentloop"]
    assert record.levelno == logging.WARNING and "db.ops-internal.example" in record.getMessage()
    assert key not in record.getMessage()  # redacted of secrets


def test_a_bug_in_an_event_is_the_internal_words() -> None:
    shown = served_error(KeyError("row 7 of db.ops-internal.example"))
    assert type(shown) is InternalError and str(shown) == INTERNAL_MESSAGE
    assert str(served_error(InternalError("hook raised: host x"))) == INTERNAL_MESSAGE


# -- AG-UI and Vercel ------------------------------------------------------------------------------

FACES = {"ag_ui": (AGUIApp, agui, "@ag-ui/client"), "vercel": (VercelAIApp, vercel, "ai")}


async def served(face: str, agent: Agent[Any]) -> tuple[dict[str, Any], str]:
    """What the face's real client saw, and everything visible: the wire and the client's."""
    app, drive, package = FACES[face]
    node_or_skip(package)
    tap = Tap(app(agent))
    async with serving(tap) as url:
        seen = await drive(url)
    return seen, tap.sent.decode() + json.dumps(seen)


async def fell_back(face: str) -> dict[str, Any]:
    """A run that fell back from a dead model and retried a 503, through ``face``."""
    seen_here = Seen()
    with dead_port() as port:
        async with falling_back(port, seen_here) as agent:
            seen, visible = await served(face, agent)
    assert f":{port}" not in visible
    the_runs_own(seen_here, port)
    return seen


@pytest.mark.parametrize("face", sorted(FACES))
async def test_ui_a_dead_provider_is_connect_failed(
    face: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentloop")
    with dead_port() as port:
        seen, visible = await served(face, Agent(dead_client(port)))
    assert f":{port}" not in visible
    logged_once(caplog, {"ag_ui": "AGUIApp", "vercel": "VercelAIApp"}[face], port)
    if face == "vercel":
        [said] = seen["errors"]
        assert said.startswith(f"ProviderUnavailable: {CONNECT_FAILED}")
        return
    [run] = seen["runs"]
    assert run["error"]["code"] == "ProviderUnavailable"
    assert run["error"]["message"] == CONNECT_FAILED
    assert run["error"]["metadata"]["agentloop"]["phase"] == "connect"


async def test_ag_ui_a_fallback_and_a_retry_say_what_failed() -> None:
    [run] = (await fell_back("ag_ui"))["runs"]
    assert run["error"] is None and run["events"][-1]["result"] == "ok"
    custom = {e["name"]: e["value"] for e in run["events"] if e["type"] == "CUSTOM"}
    assert custom["agentloop:FellBack"]["error"] == CONNECT_FAILED
    assert custom["agentloop:RetryScheduled"]["error"] == "openai HTTP 503"


async def test_vercel_a_fallback_and_a_retry_say_what_failed() -> None:
    seen = await fell_back("vercel")
    assert seen["errors"] == []
    told = {p["data"]["kind"]: p["data"] for p in seen["data"] if p["type"] == "data-agentloop"}
    assert told["FellBack"]["error"] == f"ProviderUnavailable: {CONNECT_FAILED}"
    assert told["RetryScheduled"]["error"] == "ProviderUnavailable: openai HTTP 503"


# -- A2A and MCP -----------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("face", ["a2a", "mcp"])
async def test_a2a_and_mcp_a_dead_provider_is_connect_failed(
    face: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.interop.test_seams2_served_internals import _said

    caplog.set_level(logging.WARNING, logger="agentloop")
    with dead_port() as port, SQLiteStore(tmp_path / "runs.db") as store:
        said = await _said(face, Agent(dead_client(port), store=store))
        [record] = store.load_runs()
        assert f"127.0.0.1:{port}" in str(record.run.stop_reason)  # the store keeps it all
    assert said == f"ProviderUnavailable: {CONNECT_FAILED}"
    logged_once(caplog, {"a2a": "A2A", "mcp": "MCPApp"}[face], port)
