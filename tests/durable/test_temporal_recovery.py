"""``TemporalAgent``: a dead worker's run goes on elsewhere within seconds, and runs found by id.

A worker process is SIGKILLed inside a tool activity; a second worker process started after it
finishes the run. The activities heartbeat, so Temporal retries the killed one after the
heartbeat timeout (2 s here), not the activity timeout (5 minutes): the run ends well within
60 s of the kill (13.5 s measured). The completed tool call ran once; the killed one started
twice (a call in flight at a crash is at least once) and completed once. ``get_run`` finds the
run by its id in a process that did not start it: its result and its status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")

from temporalio.client import Client

from agentloop import Agent
from agentloop.durable.temporal import HEARTBEAT_TIMEOUT, TemporalAgent
from agentloop.errors import ConfigurationError, MemoryBackendError
from agentloop.testing import ScriptedModel, reply

HERE = Path(__file__).parent
CHILD = HERE / "_temporal_child.py"
sys.path.insert(0, str(HERE))

import _temporal_child  # noqa: E402


def _worker(server: str, tmp: Path, name: str, **env: str) -> subprocess.Popen[str]:
    ready = tmp / f"ready-{name}"
    environ = {k: v for k, v in os.environ.items() if k != "KILL"}
    environ.update(EFFECTS=str(tmp / "effects"), STOP=str(tmp / "stop"), READY=str(ready), **env)
    worker = subprocess.Popen(
        [sys.executable, str(CHILD), server],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, f"worker {name} did not start"
        time.sleep(0.05)
    return worker


async def test_a_killed_workers_run_finishes_on_another_within_the_heartbeat_timeout(
    server: str, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTBEAT", "2")
    durable = _temporal_child.build()
    first = _worker(server, tmp_path, "first", KILL="b")
    await durable.start("go", client=client, workflow_id="hb-1")
    first.communicate(timeout=120)
    assert first.returncode == -9  # killed inside the tool call "b"
    killed_at = time.monotonic()
    second = _worker(server, tmp_path, "second")
    try:
        found = durable.get_run("hb-1", client=client)
        run = await found.result()
        took = time.monotonic() - killed_at
        assert await found.status() == "COMPLETED"
    finally:
        (tmp_path / "stop").touch()
        second.communicate(timeout=120)
    assert run.output == "done" and run.id == "hb-1"
    assert took < 60, f"the run took {took:.1f} s after the kill"  # not the 5-minute timeout
    effects = (tmp_path / "effects").read_text().split("\n")
    assert effects.count("start a") == effects.count("done a") == 1
    assert effects.count("start b") == 2 and effects.count("done b") == 1


async def test_get_run_of_a_running_and_an_unknown_workflow(client: Client) -> None:
    durable = TemporalAgent(Agent(ScriptedModel([reply("hi")])), name="lookup")
    started = await durable.start("hello", client=client, workflow_id="lookup-1")
    assert await durable.get_run("lookup-1", client=client).status() == "RUNNING"  # no worker
    async with durable.worker(client):
        run = await durable.get_run(started.workflow_id, client=client).result()
    assert run.output == "hi"
    assert await durable.get_run("lookup-1", client=client).status() == "COMPLETED"
    with pytest.raises(MemoryBackendError, match="lookup-nobody"):
        await durable.get_run("lookup-nobody", client=client).status()


def test_the_heartbeat_timeout_is_positive() -> None:
    assert timedelta(seconds=30) == HEARTBEAT_TIMEOUT
    with pytest.raises(ConfigurationError, match="heartbeat_timeout"):
        TemporalAgent(Agent(ScriptedModel([])), name="x", heartbeat_timeout=timedelta(0))
