"""At most once across processes (SPEC 25): two pollers race, a poller is SIGKILLed mid-apply.

The fake provider server runs in this process (its own thread and loop); each poller is a real
process on one SQLite store.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

CHILD = Path(__file__).with_name("_poller.py")


@pytest.fixture
def server_url() -> Iterator[str]:
    """A fake server in a thread: two tool calls in one turn, then the answer."""
    steps = [
        FakeReply(tool_calls=[FakeToolCall("lookup", {"city": c}) for c in ("Oslo", "Bergen")]),
        FakeReply("done"),
    ]
    loop = asyncio.new_event_loop()
    server = FakeProviderServer(steps)
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(30)
    try:
        yield server.base_url
    finally:
        asyncio.run_coroutine_threadsafe(server.aclose(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def child(db: Path, url: str, mode: str, effects: Path, **env: str) -> list[str]:
    return [sys.executable, str(CHILD), str(db), url, mode]


def run(db: Path, url: str, mode: str, effects: Path, **env: str) -> Any:
    done = subprocess.run(
        child(db, url, mode, effects),
        env={**os.environ, "EFFECTS": str(effects), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done


def effects_of(path: Path) -> list[str]:
    return path.read_text().split("\n")[:-1] if path.exists() else []


def test_two_racing_pollers_apply_a_result_once(tmp_path: Path, server_url: str) -> None:
    db, effects, hold = tmp_path / "runs.db", tmp_path / "effects", tmp_path / "hold"
    submitted = run(db, server_url, "submit", effects)
    assert submitted.returncode == 0, submitted.stderr
    run_id = json.loads(submitted.stdout)
    env = {**os.environ, "EFFECTS": str(effects), "HOLD": str(hold)}
    first = subprocess.Popen(
        child(db, server_url, "poll", effects), env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not effects.exists():  # the first poller is applying the result
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.02)
        second = run(db, server_url, "poll", effects)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["continued"] == []
    finally:
        hold.touch()
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert json.loads(out)["continued"] == [run_id]
    late = run(db, server_url, "poll", effects)  # the next turn's result: the answer
    assert json.loads(late.stdout)["continued"] == [run_id], late.stderr
    assert effects_of(effects) == ["Oslo", "Bergen"]  # each call once
    stored = SQLiteStore(db).load_run(run_id)
    assert stored is not None and stored.run.output == "done"


def test_a_poller_killed_mid_apply_leaves_the_run_to_the_next(
    tmp_path: Path, server_url: str
) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects"
    run_id = json.loads(run(db, server_url, "submit", effects).stdout)
    killed = run(db, server_url, "poll", effects, KILL="Bergen")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert effects_of(effects) == ["Oslo"]
    stored = SQLiteStore(db).load_run(run_id)
    assert stored is not None and stored.run.waiting is not None  # still waiting in the store
    again = run(db, server_url, "poll", effects)
    assert json.loads(again.stdout)["continued"] == [run_id], again.stderr
    final = run(db, server_url, "poll", effects)
    assert json.loads(final.stdout)["continued"] == [run_id], final.stderr
    assert effects_of(effects) == ["Oslo", "Bergen"]  # Oslo's journaled result was not redone
    stored = SQLiteStore(db).load_run(run_id)
    assert stored is not None and stored.run.output == "done" and len(stored.run.turns) == 2


def test_the_command_line_polls_a_store(tmp_path: Path) -> None:
    module = tmp_path / "nightly.py"
    module.write_text(
        "from agentloop import Agent, RunConfig\n"
        "from agentloop.providers.openai import OpenAIClient\n"
        "client = OpenAIClient('gpt-test', api_key='sk-test', base_url='http://127.0.0.1:9/v1')\n"
        "agent = Agent(client, config=RunConfig(batch=True))\n"
    )
    SQLiteStore(tmp_path / "s.db").close()
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "batch", "poll", "--store", "s.db",
         "--agent", "nightly:agent"],
        cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "continued 0, waiting 0, paused 0, failed 0"
