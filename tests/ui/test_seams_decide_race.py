"""One paused run decided from two faces at once, in two processes sharing a ``SQLiteStore``.

The CLI (``agentloop continue``, a real subprocess) approves the call and holds the run while
its tool works; meanwhile a person decides the same run in the viewer's page (``ViewerApp``
with ``agent_continuer``, this process). Exactly one decision wins: the tool ran once, the
viewer refuses at once with a page that says the run is being continued elsewhere (before,
it redirected as if it had taken the decision and dropped it in the background), and the store
holds one decision set and the run completed. The model is the fake OpenAI-compatible server
behind the real adapter, in both processes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
import httpx

from agentloop import Agent
from agentloop.providers import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall
from agentloop.ui.viewer import ViewerApp, agent_continuer

SRC = Path(__file__).resolve().parents[2] / "src"
LOCAL = "http://127.0.0.1"

TOOLS = '''
import os
import time
from pathlib import Path

from agentloop import tool


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    with Path(os.environ["RACE_EFFECTS"]).open("a") as effects:
        effects.write(order + "\\n")
    release = Path(os.environ["RACE_RELEASE"])
    for _ in range(3000):  # the test lets it finish once the other face has tried
        if release.exists():
            break
        time.sleep(0.01)
    return f"refunded {order}"


tools = [refund]
'''


async def wait_for(path: Path, proc: asyncio.subprocess.Process) -> None:
    for _ in range(3000):
        if await asyncio.to_thread(path.exists):
            return
        assert proc.returncode is None, await proc.communicate()
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


async def test_the_cli_holds_the_run_and_the_viewer_is_told_not_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "racetools.py").write_text(textwrap.dedent(TOOLS))
    effects, release = tmp_path / "effects", tmp_path / "release"
    monkeypatch.setenv("RACE_EFFECTS", str(effects))
    monkeypatch.setenv("RACE_RELEASE", str(release))
    monkeypatch.syspath_prepend(str(tmp_path))
    import racetools  # type: ignore[import-not-found]

    db = tmp_path / "agentloop.db"
    script = [
        FakeReply(tool_calls=[FakeToolCall("refund", {"order": "A-1"}, id="call_r1")]),
        FakeReply("Refunded."),
    ]
    async with FakeProviderServer(script) as fake:
        client = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
        async with client:
            first = Agent(client, tools=racetools.tools, store=SQLiteStore(db))
            paused = await first.session("shop").run("refund A-1")
            assert paused.paused
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(tmp_path)])}
            argv = ["continue", paused.id, "--store", str(db), "--provider", "openai"]
            argv += ["--model", "fake-model", "--base-url", fake.base_url]
            argv += ["--tools", "racetools:tools", "--approve", "call_r1"]
            cli = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentloop", *argv, cwd=tmp_path, env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            await wait_for(effects, cli)  # the CLI's approval runs the tool, and holds the run

            worker = Agent(client, tools=racetools.tools, store=SQLiteStore(db))
            viewer = ViewerApp(str(db), allow_decisions=True, continuer=agent_continuer(worker))
            transport = httpx.ASGITransport(app=viewer)
            async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as http:
                answer = await http.post(
                    f"/runs/{paused.id}/decide",
                    data={"decision:call_r1": "deny", "message:call_r1": "no refunds today"},
                    headers={"origin": LOCAL},
                )
            release.touch()
            _, err = await asyncio.wait_for(cli.communicate(), 60)
            viewer.close()
    assert cli.returncode == 0, err.decode()
    assert answer.status_code == 409, answer.text
    assert "being continued" in answer.text and paused.id in answer.text
    assert effects.read_text() == "A-1\n"  # the tool ran once
    store = SQLiteStore(db)
    try:
        [record] = store.load_runs("shop")
    finally:
        store.close()
    run: Any = record.run
    assert run.output == "Refunded." and run.stop_reason is None and not run.paused
    assert len(run.decisions) == 1  # one decision set: the CLI's approval
    assert [r.content for r in run.turns[0].tool_results] == ["refunded A-1"]
