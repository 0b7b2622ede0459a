"""The viewer and another process deciding the same paused run (SPEC 17, 18).

A process that continues a paused run records its decisions in the store before any decided
call runs, and the store says ``paused`` until the run ends. The viewer used to show the
decision form for such a run and answer a person's POST with 303, then drop the decision
(the continue failed on the session's lease, unseen): the person believed their decision was in
effect. Now the page asks nothing and says the run is decided, and ``decide`` is refused (409,
nothing sent). A real second process (a child Python) holds the run inside its approved call;
one ``SQLiteStore`` file between them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")

from starlette.testclient import TestClient

from agentloop import Agent, tool
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.ui.viewer import ViewerApp, agent_continuer

LOCAL = "http://127.0.0.1"

CHILD = """
import pathlib, sys, time
from agentloop import Agent, Approve, tool
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, reply

where = pathlib.Path(sys.argv[1])

@tool(requires_approval=True)
def delete_file(path: str) -> str:
    '''Delete a file.'''
    (where / "inside").write_text("yes")
    while not (where / "release").exists():
        time.sleep(0.02)
    return f"deleted {path}"

agent = Agent(ScriptedModel([reply("done elsewhere")]), tools=[delete_file],
              store=SQLiteStore(where / "runs.db"))
run = agent.session("tidy").continue_run_sync(decisions={sys.argv[2]: Approve()})
print(run.output)
"""


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path} here"


def test_a_run_another_process_decided_is_not_offered_to_decide(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    steps = [call("delete_file", {"path": "old.log"}), reply("unused")]
    agent = Agent(ScriptedModel(steps), tools=[delete_file], store=store)
    paused = agent.session("tidy").run_sync("Tidy up")
    call_id = paused.pending[0].id
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), call_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    continued: list[Any] = []
    viewer_agent = Agent(ScriptedModel([reply("done here")]), tools=[delete_file], store=store)
    continue_run = agent_continuer(viewer_agent)

    async def continuer(session_id: str, run_id: str, decisions: Any) -> object:
        continued.append(await continue_run(session_id, run_id, decisions))
        return continued[-1]

    app = ViewerApp(str(tmp_path / "runs.db"), allow_decisions=True, continuer=continuer)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "inside").exists():
            assert child.poll() is None, child.communicate()[1]
            assert time.monotonic() < deadline, "the other process never reached its call"
            time.sleep(0.02)
        with TestClient(app, base_url=LOCAL) as client:
            page = client.get(f"/runs/{paused.id}").text
            answer = client.post(
                f"/runs/{paused.id}/decide",
                data={f"decision:{call_id}": "approve"},
                headers={"origin": LOCAL},
                follow_redirects=False,
            )
    finally:
        (tmp_path / "release").write_text("go")
        out, err = child.communicate(timeout=60)
        app.close()
    assert 'id="decisions"' not in page and 'id="decided-elsewhere"' in page
    assert answer.status_code == 409 and "already decided" in answer.text
    assert continued == [] and child.returncode == 0, err
    assert out.strip() == "done elsewhere"
    stored = store.load_run(paused.id)
    assert stored is not None and stored.run.output == "done elsewhere"
    store.close()
