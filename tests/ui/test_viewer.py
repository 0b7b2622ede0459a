"""The run viewer (``agentloop ui``) over HTTP: its pages, filters, live stream and decisions.

The store is filled by real agent runs: the real OpenAI adapter against the fake provider
server (usage, reasoning, tool calls with a fake key in the arguments, a soft error, a 503
retried to exhaustion) and ``ScriptedModel`` (a paused run on an approval tool). The app is
driven with Starlette's ``TestClient``; ``test_viewer_browser.py`` drives the same pages in
Chromium. ``fill_store`` is shared with it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agentloop import Agent, RetryingClient, Run, tool
from agentloop.cli import main
from agentloop.errors import LoopDetected, ProviderUnavailable, ToolError
from agentloop.messages import Usage
from agentloop.pausing import Decision
from agentloop.providers import OpenAIClient
from agentloop.run import Turn
from agentloop.store import SQLiteStore, StoredRun
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault, ScriptedModel
from agentloop.testing import call as scripted_call
from agentloop.testing import reply as scripted_reply
from agentloop.ui.viewer import ViewerApp, agent_continuer
from agentloop.ui.viewer._run_page import run_body
from agentloop.ui.viewer._turns import Nesting

FAKE_KEY = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
"""A key-shaped secret the model puts in a tool's arguments: the page must never show it."""
PRICED_MODEL = "gpt-4o-mini"
LOCAL = "http://127.0.0.1"
"""The viewer answers to loopback names only (not Starlette's ``testserver``)."""


@tool
def lookup(key: str) -> str:
    """Look a key up (a key named 'missing' is a soft error)."""
    if key == "missing":
        raise ToolError("no entry named 'missing'; try 'weather'")
    return f"the entry for {key}"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs a person's approval)."""
    return f"deleted {path}"


async def _no_wait(seconds: float) -> None:
    return None


@dataclass(frozen=True)
class Filled:
    """The runs ``fill_store`` made, by what they show."""

    completed: str
    failed: str
    paused: str


async def _completed_and_failed(store: SQLiteStore) -> tuple[str, str]:
    steps = [
        FakeReply(
            thinking="The user wants the weather; the lookup tool has it.",
            tool_calls=[
                FakeToolCall("lookup", {"key": FAKE_KEY}),
                FakeToolCall("lookup", {"key": "missing"}),
            ],
            input_tokens=1200,
            output_tokens=40,
        ),
        FakeReply("It is sunny.", input_tokens=1500, output_tokens=12),
    ]
    async with (
        FakeProviderServer(steps, model=PRICED_MODEL) as good,
        FakeProviderServer(default=Fault.server_error(503), model="model-down") as down,
    ):
        client = OpenAIClient(PRICED_MODEL, api_key="test-key", base_url=good.base_url)
        agent = Agent(client, tools=[lookup], store=store, session_id="weather")
        try:
            completed = await agent.run("What is the weather?")
        finally:
            await client.aclose()
        inner = OpenAIClient("model-down", api_key="test-key", base_url=down.base_url)
        failing = RetryingClient(inner, max_retries=2, sleep=_no_wait)
        broken = Agent(failing, store=store, session_id="outage")
        try:
            with pytest.raises(ProviderUnavailable):
                await broken.run("Anyone there?")
        finally:
            await failing.aclose()
    return completed.id, broken.runs[-1].id


def fill_store(path: Path) -> Filled:
    """A store with a completed run, a failed run and a paused run, made by real runs."""
    store = SQLiteStore(path)
    try:
        completed, failed = asyncio.run(_completed_and_failed(store))
        model = ScriptedModel(
            [scripted_call("delete_file", {"path": "notes.txt"})], model="model-b"
        )
        agent = Agent(model, tools=[delete_file], store=store, session_id="cleanup")
        paused = agent.run_sync("Tidy up")
        assert paused.paused
    finally:
        store.close()
    return Filled(completed, failed, paused.id)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Filled]:
    path = tmp_path_factory.mktemp("viewer") / "agentloop.db"
    return path, fill_store(path)


@pytest.fixture
def client(filled: tuple[Path, Filled]) -> Iterator[TestClient]:
    app = ViewerApp(str(filled[0]), poll_seconds=0.01)
    with TestClient(app, base_url=LOCAL) as test_client:
        yield test_client
    app.close()


def listed(html: str) -> list[str]:
    """The run ids of the runs table, in the order shown."""
    return re.findall(r'<tr class="run [^"]*" data-run="([^"]+)"', html)


# -- the runs page -------------------------------------------------------------------------------


def test_the_runs_page_lists_every_run_newest_first(
    client: TestClient, filled: tuple[Path, Filled]
) -> None:
    runs = filled[1]
    page = client.get("/")
    assert page.status_code == 200
    assert listed(page.text) == [runs.paused, runs.failed, runs.completed]
    assert "3 of 3 runs" in page.text
    assert 'class="badge status-failed">failed' in page.text
    assert "ProviderUnavailable" in page.text and "waiting on 1 pending call" in page.text


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status=failed", ["failed"]),
        ("status=completed", ["completed"]),
        ("status=paused", ["paused"]),
        ("status=running", []),
        (f"model={PRICED_MODEL}", ["completed"]),
        ("model=model-b", ["paused"]),
        ("error=ProviderUnavailable", ["failed"]),
        ("error=AuthError", []),
        ("status=completed&model=model-b", []),
        ("status=nonsense", ["paused", "failed", "completed"]),
    ],
)
def test_filters_by_status_model_and_error_class(
    client: TestClient, filled: tuple[Path, Filled], query: str, expected: list[str]
) -> None:
    page = client.get(f"/?{query}")
    assert listed(page.text) == [getattr(filled[1], name) for name in expected]
    if not expected:
        assert "no run matches" in page.text


def test_the_filter_form_offers_the_models_and_error_classes_the_runs_have(
    client: TestClient,
) -> None:
    form = client.get("/?status=failed").text.split("</form>")[0]
    assert '<option value="failed" selected>' in form
    assert f'<option value="{PRICED_MODEL}">' in form and '<option value="model-b">' in form
    assert '<option value="ProviderUnavailable">' in form


# -- one run -------------------------------------------------------------------------------------


def test_a_failed_run_shows_its_class_phase_request_sent_and_attempt_log(
    client: TestClient, filled: tuple[Path, Filled]
) -> None:
    page = client.get(f"/runs/{filled[1].failed}").text
    error = page.split('id="hard-error"')[1].split("</section>")[0]
    assert "ProviderUnavailable" in error
    assert re.search(r'attr-phase"><th>phase</th><td>status<', error)
    assert re.search(r'attr-request_sent"><th>request_sent</th><td>true<', error)
    assert re.search(r'attr-status_code"><th>status_code</th><td>503<', error)
    log = error.split('id="attempt-log"')[1]
    rows = re.findall(r"<tr><td>(\d)</td><td>([A-Za-z]+)</td><td>(\d+)</td><td>(\w+)</td>", log)
    assert rows == [(str(n), "ProviderUnavailable", "503", "status") for n in (1, 2, 3)]


def test_a_turn_shows_model_tokens_cost_reasoning_and_soft_errors(
    client: TestClient, filled: tuple[Path, Filled]
) -> None:
    page = client.get(f"/runs/{filled[1].completed}").text
    first = page.split('id="turn-0-0"')[1].split("</section>")[0]
    assert PRICED_MODEL in first and "1,200 in · 40 out" in first
    assert re.search(r"\$0\.0\d+", first)  # priced by agentloop.pricing
    assert '<details class="reasoning" id="reasoning-0-0"><summary>' in first  # collapsed
    assert "the lookup tool has it" in first
    calls = re.findall(r'<div class="call( soft-error)?" data-call', first)
    assert calls == ["", " soft-error"]
    soft = first.split('<div class="call soft-error"')[1]
    assert '<span class="badge soft-error">soft error</span>' in soft
    assert "no entry named &#x27;missing&#x27;; try &#x27;weather&#x27;" in soft
    assert '<svg class="chart"' in page and page.count('class="bar-out"') == 2
    assert 'class="cost-line"' in page  # every turn priced: the cumulative cost is drawn


def test_no_key_reaches_any_page_or_stream(client: TestClient, filled: tuple[Path, Filled]) -> None:
    runs = filled[1]
    texts = [client.get("/").text, client.get(f"/runs/{runs.completed}").text]
    with client.stream("GET", f"/runs/{runs.completed}/events") as events:
        texts.append(events.read().decode())
    assert all(FAKE_KEY not in text and "4f9a8b7c6d5e" not in text for text in texts)
    assert "[REDACTED]" in texts[1] and "[REDACTED]" in texts[2]


def test_a_paused_run_lists_its_pending_calls_read_only(
    client: TestClient, filled: tuple[Path, Filled]
) -> None:
    page = client.get(f"/runs/{filled[1].paused}").text
    pending = page.split('id="pending"')[1].split("</section>")[0]
    assert '<span class="badge pending">approval</span>' in pending
    assert "delete_file" in pending and "notes.txt" in pending
    assert "<form" not in pending and "--allow-decisions" in pending
    refused = client.post(f"/runs/{filled[1].paused}/decide", data={"decision:x": "approve"})
    assert refused.status_code == 403 and "read-only" in refused.text


def test_an_unknown_run_is_a_404_page(client: TestClient) -> None:
    page = client.get("/runs/nope")
    assert page.status_code == 404 and "no stored run nope" in page.text


# -- live updates --------------------------------------------------------------------------------


def test_a_running_run_streams_its_new_turn_then_ends(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    writer = SQLiteStore(path)
    run = Run(id="live-run", input="count", started_at=1.0, session_id="s")
    writer.begin_run("s", run)
    app = ViewerApp(str(path), poll_seconds=0.01)
    with TestClient(app, base_url=LOCAL) as client:
        page = client.get("/runs/live-run").text
        assert 'id="run-status">running<' in page and "no recorded end yet" in page
        stream = re.search(r'data-stream="([^"]+)"', page)
        assert stream is not None
        with client.stream("GET", stream.group(1).replace("&amp;", "&")) as events:
            lines = events.iter_lines()
            turn = Turn(index=0, model="model-live", text="one", usage=Usage(7, 3))
            writer.save_turn("live-run", 0, turn, [])  # the stream sees this, not the page
            update = _next_event(lines)
            assert update[0] == "update" and "model-live" in update[1]
            run.turns.append(turn)
            run.output = "done"
            writer.finish_runs("s", [run], keep=0, append=[])
            while (event := _next_event(lines))[0] == "update":
                assert 'id="run-status">completed<' in event[1]
            assert event[0] == "end"
    writer.close()
    app.close()


def _next_event(lines: Iterator[str]) -> tuple[str, str]:
    name, data = "", list[str]()
    for line in lines:
        if not line:
            if name:
                return name, "\n".join(data)
            continue
        field, _, value = line.partition(": ")
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    raise AssertionError("the stream ended without an event")


def test_a_finished_run_page_has_no_stream(client: TestClient, filled: tuple[Path, Filled]) -> None:
    assert "data-stream" not in client.get(f"/runs/{filled[1].completed}").text
    assert "data-stream" in client.get(f"/runs/{filled[1].paused}").text  # it may continue


# -- decisions -----------------------------------------------------------------------------------


def _paused_agent(path: Path) -> tuple[Agent[Any], Run[Any], SQLiteStore]:
    store = SQLiteStore(path)
    steps = [scripted_call("delete_file", {"path": "old.log"}), scripted_reply("Deleted old.log.")]
    agent = Agent(ScriptedModel(steps, model="model-b"), tools=[delete_file], store=store)
    run = agent.session("tidy").run_sync("Tidy up")
    assert run.paused
    return agent, run, store


def test_decisions_posted_from_the_page_continue_the_run(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    agent, paused, store = _paused_agent(path)
    finished = threading.Event()
    continued: list[object] = []
    continue_run = agent_continuer(agent)

    async def continuer(session_id: str, run_id: str, decisions: Mapping[str, Decision]) -> object:
        try:
            continued.append(await continue_run(session_id, run_id, decisions))
        finally:
            finished.set()
        return continued[-1]

    app = ViewerApp(str(path), allow_decisions=True, continuer=continuer, poll_seconds=0.01)
    origin = {"origin": LOCAL}
    call_id = paused.pending[0].id
    with TestClient(app, base_url=LOCAL) as client:
        page = client.get(f"/runs/{paused.id}").text
        assert f'name="decision:{call_id}" value="approve" checked' in page
        forged = {f"decision:{call_id}": "approve", "decision:call_forged": "approve"}
        answer = client.post(f"/runs/{paused.id}/decide", data=forged, headers=origin)
        assert answer.status_code == 400 and "call_forged" in answer.text
        elsewhere = {"origin": "http://evil.example"}
        answer = client.post(f"/runs/{paused.id}/decide", data=forged, headers=elsewhere)
        assert answer.status_code == 403
        assert not continued  # nothing ran
        answer = client.post(
            f"/runs/{paused.id}/decide",
            data={f"decision:{call_id}": "approve"},
            headers=origin,
            follow_redirects=False,
        )
        assert answer.status_code == 303 and answer.headers["location"] == f"/runs/{paused.id}"
        assert finished.wait(timeout=30)
        done = client.get(f"/runs/{paused.id}").text
    app.close()
    store.close()
    assert isinstance(continued[0], Run) and continued[0].output == "Deleted old.log."
    assert 'id="run-status">completed<' in done and "deleted old.log" in done
    assert 'id="decided"' in done and "approve" in done


def test_a_viewer_without_a_continuer_refuses_decisions(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    _, paused, store = _paused_agent(path)
    store.close()
    app = ViewerApp(str(path), allow_decisions=True)
    with TestClient(app, base_url=LOCAL) as client:
        answer = client.post(
            f"/runs/{paused.id}/decide",
            data={f"decision:{paused.pending[0].id}": "approve"},
            headers={"origin": LOCAL},
        )
    app.close()
    assert answer.status_code == 403


# -- a damaged or unreadable store ---------------------------------------------------------------


def test_a_damaged_record_is_named_and_the_other_runs_still_listed(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    runs = fill_store(path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE agentloop_runs SET record = ? WHERE run_id = ?",
            (json.dumps({"id": runs.failed, "turns": "abc"}), runs.failed),
        )
    app = ViewerApp(str(path))
    with TestClient(app, base_url=LOCAL) as client:
        listing = client.get("/").text
        one = client.get(f"/runs/{runs.failed}")
        other = client.get(f"/runs/{runs.completed}")
    app.close()
    assert listed(listing) == [runs.paused, runs.failed, runs.completed]
    row = listing.split(f'<tr class="run unreadable" data-run="{runs.failed}">')[1]
    assert f"run {runs.failed} cannot be read" in row.split("</tr>")[0]
    assert "is damaged: record: " in row.split("</tr>")[0]
    assert "3 of 3 runs, 1 unreadable" in listing
    assert one.status_code == 200 and f"run {runs.failed} cannot be read" in one.text
    assert other.status_code == 200 and "It is sunny." in other.text


def test_a_store_that_cannot_be_read_is_said_on_the_page(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    runs = fill_store(path)
    app = ViewerApp(str(path))
    app.reader.timeout = 0.05
    with TestClient(app, base_url=LOCAL) as client:
        assert runs.completed in client.get("/").text
        app.reader.close()  # another process takes the file for itself, then the page reads
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("PRAGMA locking_mode=EXCLUSIVE")
        locker.execute("BEGIN EXCLUSIVE")
        locker.execute("UPDATE agentloop_runs SET absorbed = absorbed")
        locked = client.get("/").text
        run_page = client.get(f"/runs/{runs.completed}").text
        locker.execute("COMMIT")
        locker.close()
        again = client.get("/").text
    app.close()
    assert 'id="store-problem"' in locked and "The store cannot be read" in locked
    assert "locked" in locked
    assert 'id="store-problem"' in run_page
    assert runs.completed in again  # the page recovers with the store


# -- the page itself -----------------------------------------------------------------------------


def test_every_asset_is_the_packages_own_and_the_policy_allows_nothing_else(
    client: TestClient, filled: tuple[Path, Filled]
) -> None:
    page = client.get(f"/runs/{filled[1].completed}")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    links = re.findall(r'(?:src|href|action)="([^"]*)"', page.text)
    assert links and all(link.startswith("/") for link in links)
    for asset in ("/static/viewer.js", "/static/viewer.css"):
        served = client.get(asset)
        assert served.status_code == 200 and "http" not in served.text.replace("https", "http")


def test_a_request_naming_another_host_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    SQLiteStore(path).close()
    app = ViewerApp(str(path), hosts=["127.0.0.1", "localhost"])
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert client.get("/").status_code == 200
        assert client.get("/", headers={"host": "rebound.example"}).status_code == 400
    app.close()


@dataclass(eq=False)
class _ChildRun(Run[Any]):
    """A run carrying the parent link the engine records for a child agent's run."""

    parent: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "parent": self.parent}


def test_a_sub_agent_run_is_drawn_inside_the_parents_tool_call() -> None:
    from agentloop.messages import ToolCallPart, ToolResultPart

    call = ToolCallPart(id="call_r", name="researcher", arguments={"input": "find it"})
    result = ToolResultPart(call_id="call_r", name="researcher", content="found it")
    parent: Run[Any] = Run(id="parent-run", input="go", session_id="s", output="ok")
    parent.turns.append(Turn(index=0, model="m", tool_calls=[call], tool_results=[result]))
    child = _ChildRun(id="child-run", input="find it", session_id="c", output="found it")
    child.turns.append(Turn(index=0, model="child-model", text="found it"))
    child.parent = {"session_id": "s", "run_id": "parent-run", "call_id": "call_r", "tool": "r"}
    scanned = [StoredRun("s", parent, True), StoredRun("c", child, True)]
    body = run_body(scanned[0], Nesting(scanned), allow_decisions=False)
    inside = body.split('data-call="call_r"')[1]
    assert '<details class="child-run" id="child-child-run" open data-run="child-run">' in inside
    assert "child-model" in inside.split("</details>")[0]
    child_body = run_body(scanned[1], Nesting(scanned), allow_decisions=False)
    assert '<dt>parent</dt><dd><a href="/runs/parent-run">' in child_body


def test_agentloop_ui_is_a_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", "--store", str(tmp_path / "missing.db")]) == 2
    assert "no store at" in capsys.readouterr().err
    assert main(["ui", "--store", str(tmp_path / "x.db"), "--allow-decisions"]) == 2
    assert "--allow-decisions needs --agent" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["ui", "--help"])
    shown = capsys.readouterr().out
    assert all(flag in shown for flag in ("--store", "--port", "--host", "--allow-decisions"))


def test_the_runs_stream_pushes_a_run_that_appears(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    writer = SQLiteStore(path)
    app = ViewerApp(str(path), poll_seconds=0.01)
    with TestClient(app, base_url=LOCAL) as client:
        page = client.get("/?status=running").text
        assert listed(page) == [] and "no run matches" in page
        stream = re.search(r'data-stream="([^"]+)"', page)
        assert stream is not None and "status=running" in stream.group(1)
        with client.stream("GET", stream.group(1).replace("&amp;", "&")) as events:
            writer.begin_run("s", Run(id="new-run", input="hello", started_at=2.0))
            name, table = _next_event(events.iter_lines())
    writer.close()
    app.close()
    assert name == "update" and listed(table) == ["new-run"]


# -- PostgreSQL, and sub-agents recorded by the engine -------------------------------------------

_CONTRACT = Path(__file__).parents[1] / "store" / "test_store_contract.py"
_spec = importlib.util.spec_from_file_location("_viewer_store_contract", _CONTRACT)
assert _spec is not None and _spec.loader is not None
_contract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_contract)
postgres_dsn = _contract.postgres_dsn  # the same throwaway PostgreSQL server


def test_a_postgresql_store_by_url(postgres_dsn: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from agentloop.store import PostgresStore

    PostgresStore(postgres_dsn).close()
    _contract._truncate(postgres_dsn)
    parts = conninfo_to_dict(postgres_dsn)
    url = f"postgresql://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"
    store = PostgresStore(postgres_dsn)
    steps = [scripted_call("lookup", {"key": "missing"}), scripted_reply("Nothing there.")]
    agent = Agent(ScriptedModel(steps, model="model-pg"), tools=[lookup], store=store)
    run = agent.session("pg").run_sync("Look it up")
    store.close()
    app = ViewerApp(url)
    with TestClient(app, base_url=LOCAL) as client:
        listing = client.get("/?model=model-pg").text
        page = client.get(f"/runs/{run.id}").text
    app.close()
    assert listed(listing) == [run.id]
    assert '<span class="badge soft-error">soft error</span>' in page and "Nothing there." in page


def test_a_child_agents_recorded_run_is_nested_in_the_parents_page(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    store = SQLiteStore(path)
    child = Agent(ScriptedModel([scripted_reply("42")], model="child-model"))
    steps = [scripted_call("researcher", {"input": "the answer?"}), scripted_reply("It is 42.")]
    tools = [child.as_tool(name="researcher", description="Finds answers.")]
    parent = Agent(ScriptedModel(steps, model="parent-model"), tools=tools, store=store)
    run = parent.session("lead").run_sync("Ask the researcher")
    store.close()
    app = ViewerApp(str(path))
    children = [
        found
        for found in app.reader.scan()
        if isinstance(found, StoredRun) and found.run.id != run.id
    ]
    if not children or "parent" not in children[0].run.to_dict():
        app.close()
        pytest.skip("the engine does not record a child agent's run with its parent link yet")
    with TestClient(app, base_url=LOCAL) as client:
        page = client.get(f"/runs/{run.id}").text
    app.close()
    call_id = run.turns[0].tool_calls[0].id
    inside = page.split(f'data-call="{call_id}"')[1]
    assert f'data-run="{children[0].run.id}"' in inside and "child-model" in inside


@tool
def flaky_backend() -> str:
    """A tool whose backend is down (each failure counts against its breaker)."""
    raise ToolError("backend down", sick=True)


@tool
def same_search(q: str) -> str:
    """A search that always answers the same."""
    return "the same answer"


def test_the_breakers_refusal_is_marked_and_a_loop_stop_is_the_hard_error(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    store = SQLiteStore(path)
    steps = [scripted_call("flaky_backend")] * 4 + [scripted_reply("I gave up.")]
    sick = Agent(ScriptedModel(steps), tools=[flaky_backend], store=store)
    tripped = sick.session("sick").run_sync("try it")
    looping_steps = [scripted_call("same_search", {"q": "a"})] * 30
    looping = Agent(ScriptedModel(looping_steps), tools=[same_search], store=store)
    with pytest.raises(LoopDetected):
        looping.session("loop").run_sync("search")
    looped = looping.session("loop").runs[-1]
    store.close()
    app = ViewerApp(str(path))
    with TestClient(app, base_url=LOCAL) as client:
        breaker = client.get(f"/runs/{tripped.id}").text
        loop = client.get(f"/runs/{looped.id}").text
    app.close()
    last = breaker.split('id="turn-0-3"')[1].split("</section>")[0]
    assert '<span class="badge breaker">breaker open</span>' in last
    assert breaker.count('<span class="badge soft-error">soft error</span>') == 4
    assert '<span class="error-class">LoopDetected</span>' in loop
    assert "repeated 10 times" in loop
    assert 'id="ended"><h3>the run stopped after turn 10' in loop


def test_agent_names_an_agent_the_command_can_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    SQLiteStore(tmp_path / "agentloop.db").close()
    (tmp_path / "viewer_app_module.py").write_text("agent = 'not an agent'\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec, said in [
        ("viewer_app_module", "--agent takes MODULE:NAME"),
        ("no_such_module_here:agent", "No module named 'no_such_module_here'"),
        ("viewer_app_module:missing", "has no attribute 'missing'"),
        ("viewer_app_module:agent", "--agent names a str, not an Agent"),
    ]:
        assert main(["ui", "--allow-decisions", "--agent", spec]) == 2
        assert said in capsys.readouterr().err


def test_the_form_gives_one_fitting_decision_per_pending_call() -> None:
    from agentloop import Answer, Deny
    from agentloop.errors import InvalidInput
    from agentloop.messages import ToolCallPart
    from agentloop.pausing import PendingCall
    from agentloop.ui.viewer._decide import decisions_from_form

    asked = PendingCall(ToolCallPart(id="c1", name="ask_user", arguments={}), "external")
    risky = PendingCall(ToolCallPart(id="c2", name="delete_file", arguments={}), "approval")
    form = {
        "decision:c1": ["answer"],
        "answer:c1": ["blue"],
        "decision:c2": ["deny"],
        "message:c2": ["not today"],
    }
    assert decisions_from_form([asked, risky], form) == {
        "c1": Answer("blue"),
        "c2": Deny("not today"),
    }
    for bad in (
        {**form, "decision:c1": ["approve"]},  # an external call cannot be approved
        {**form, "decision:c2": ["explode"]},
        {"decision:c1": ["answer"]},  # c2 has no decision
    ):
        with pytest.raises(InvalidInput):
            decisions_from_form([asked, risky], bad)


def test_stored_text_is_never_markup(tmp_path: Path) -> None:
    from agentloop.messages import ToolCallPart, ToolResultPart

    path = tmp_path / "agentloop.db"
    store = SQLiteStore(path)
    evil = '<img src=x onerror="alert(1)"><script>fetch("https://evil.example")</script>'
    run: Run[Any] = Run(id="r-evil", input=evil, session_id=evil, output=evil)
    call = ToolCallPart(id=evil, name=evil, arguments={evil: evil})
    result = ToolResultPart(call_id=evil, name=evil, content=evil, is_error=True)
    run.turns.append(Turn(0, evil, [call], [result], text=evil, thinking=evil))
    store.begin_run(evil, run)
    store.finish_runs(evil, [run], keep=0, append=[])
    store.close()
    app = ViewerApp(str(path))
    with TestClient(app, base_url=LOCAL) as client:
        pages = [client.get("/").text, client.get("/runs/r-evil").text]
    app.close()
    for page in pages:
        assert "<script>fetch" not in page and "<img src=x" not in page
        assert "&lt;script&gt;" in page


def test_a_turns_latency_tool_durations_and_loop_warnings_are_shown(tmp_path: Path) -> None:
    """The record keeps them (Turn.latency_seconds, durations, warnings); the page shows them."""
    import asyncio

    from agentloop import Agent, tool
    from agentloop.store import SQLiteStore
    from agentloop.testing import ScriptedModel, call, reply
    from agentloop.ui.viewer import ViewerApp

    @tool
    def look(k: str) -> str:
        """Look."""
        return k

    db = tmp_path / "runs.db"
    steps = [call("look", {"k": "a"}) for _ in range(3)] + [reply("done")]
    agent = Agent(ScriptedModel(steps), tools=[look], store=SQLiteStore(db), session_id="s")
    run = asyncio.run(agent.run("x"))
    from starlette.testclient import TestClient

    page = TestClient(ViewerApp(str(db)), base_url=LOCAL).get(f"/runs/{run.id}").text
    assert "latency" in page
    assert 'class="duration"' in page
    assert "loop: look" in page


def test_the_runs_page_shows_a_page_and_links_to_the_older_runs(
    client: TestClient, filled: tuple[Path, Filled], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentloop.ui.viewer import _records

    monkeypatch.setattr(_records, "PAGE", 2)
    runs = filled[1]
    first = client.get("/").text
    assert listed(first) == [runs.paused, runs.failed] and "2 shown of 3 runs" in first
    older = re.search(r'<a class="older" href="/\?before=(\d+)">older runs</a>', first)
    assert older is not None and 'class="newest"' not in first
    second = client.get(f"/?before={older.group(1)}").text
    assert listed(second) == [runs.completed] and "1 shown of 3 runs" in second
    assert 'class="older"' not in second and '<a class="newest" href="/?">' in second
    assert f"/events?before={older.group(1)}&amp;seen=" in second  # the live table is that page
    failed = client.get("/?status=failed&before=junk").text  # a bad cursor: the newest page
    assert listed(failed) == [runs.failed] and "1 of 1 failed run" in failed
