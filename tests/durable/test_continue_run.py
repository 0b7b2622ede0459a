"""``continue_run`` after a real crash: child processes SIGKILLed at many points, then continued.

Each child runs the plan of ``_plan.py`` (4 acting turns, 7 tool calls, then ``done``) on its
own SQLite file and kills itself at one point: inside a model call, inside a tool call (before
its side effect), between tool calls, before and after a turn's commit, in the middle of a commit
transaction, at run start and before finalize. The children run in parallel. The test process
then resumes each session and continues it: the run finishes, every tool call's side effect
happened exactly once, the history is valid to send, and the stored run shows its resumption.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.store import SQLiteStore
from agentloop.transcript import validate_transcript

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _plan  # noqa: E402

CHILD = HERE / "_crash_child.py"

KILL_POINTS = [
    "begin_run:1",
    "mid_commit:1",
    "model:1",
    "model:2",
    "model:3",
    "model:5",
    "tool:a:1",
    "tool:b:1",
    "tool:c:1",
    "tool:e:1",
    "tool:f:1",
    "tool:g:1",
    "save_step_before:1",
    "save_step_after:2",
    "save_step_after:4",
    "save_step_after:8",
    "save_turn_before:1",
    "save_turn_after:1",
    "save_turn_before:3",
    "save_turn_after:4",
    "save_turn_before:5",
    "mid_commit:4",
    "mid_commit:8",
    "mid_commit:9",
    "mid_commit:14",
    "finish_before:1",
]
"""Where the children die (``point:n`` = the n-th time the child reaches ``point``)."""

NOT_STARTED = {"begin_run:1", "mid_commit:1", "mid_commit:2", "mid_commit:4"}
"""Points before the run's start is committed (schema creation, the lease, the run row)."""


def _env(effects: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "EFFECTS": str(effects), **extra}
    env.pop("KILL", None)
    env.update(extra)
    return env


def _spawn(tmp: Path, name: str, mode: str = "run", **extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(tmp / f"{name}.db"), mode],
        env=_env(tmp / f"{name}.effects", **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _effects(path: Path) -> list[str]:
    return sorted(path.read_text().split()) if path.exists() else []


async def _continue(db: Path) -> tuple[Any, bool]:
    """Resume and continue; (the agent, whether there was anything to continue)."""
    agent = _plan.build(str(db), resume=True)
    try:
        run = await agent.continue_run()
    except InvalidInput:
        return agent, False
    assert run.output == "done" and run.stop_reason is None
    return agent, True


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every kill point's child, run in parallel and SIGKILLed; their files stay for the tests."""
    tmp = tmp_path_factory.mktemp("crashes")
    children = {point: _spawn(tmp, point.replace(":", "_"), KILL=point) for point in KILL_POINTS}
    for point, child in children.items():
        _, err = child.communicate(timeout=60)
        assert child.returncode == -9, f"{point}: exited {child.returncode}: {err.decode()}"
    return tmp


@pytest.mark.parametrize("point", KILL_POINTS)
async def test_a_killed_run_continues_and_every_call_ran_once(
    crashed: Path, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = point.replace(":", "_")
    db, effects = crashed / f"{name}.db", crashed / f"{name}.effects"
    monkeypatch.setenv("EFFECTS", str(effects))
    monkeypatch.delenv("KILL", raising=False)
    before = _effects(effects)
    assert len(before) == len(set(before))  # the crashed child did each effect at most once
    agent, continued = await _continue(db)
    if point in NOT_STARTED:  # it died before its run was recorded: nothing ran, nothing to do
        assert not continued and not agent.runs and before == []
        return
    assert _effects(effects) == sorted(_plan.KEYS)
    validate_transcript(agent.history)
    assert agent.history[0].role == "user"
    assert agent.runs[-1].output == "done"
    assert sum(len(t.tool_calls) for t in agent.runs[-1].turns) == len(_plan.KEYS)
    stored = SQLiteStore(db)
    try:
        last = stored.load_runs("crash")[-1]
        assert last.finished and last.run.stop_reason is None
        assert bool(last.resumptions) == continued
        assert len(stored.load_runs("crash")) == 1
        assert stored.load_history("crash") == agent.history
    finally:
        stored.close()
    if point.startswith("finish_before"):
        assert not continued  # its final reply was saved: the run had completed
    else:
        assert continued
        again = _plan.build(str(db), resume=True)
        with pytest.raises(InvalidInput, match="no run to continue"):
            await again.continue_run()


def test_a_second_process_cannot_continue_a_session_being_continued(tmp_path: Path) -> None:
    crash = _spawn(tmp_path, "s", KILL="tool:c:1")
    crash.communicate(timeout=60)
    assert crash.returncode == -9
    hold, release = tmp_path / "holding", tmp_path / "release"
    first = _spawn(
        tmp_path, "s", "continue", HOLD="tool:d", HOLD_FILE=str(hold), RELEASE_FILE=str(release)
    )
    deadline = time.monotonic() + 30
    while not hold.exists():
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    second = _spawn(tmp_path, "s", "continue")
    try:
        out, err = second.communicate(timeout=60)
    finally:
        release.touch()  # the first process holds until the second has tried
    assert second.returncode == 1
    assert b"MemoryBackendError" in err and b"being run by another process" in err
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err.decode()
    assert out.decode().strip() == "done"
    assert _effects(tmp_path / "s.effects") == sorted(_plan.KEYS)
    store = SQLiteStore(tmp_path / "s.db")
    try:
        [only] = store.load_runs("crash")
        assert only.finished and only.run.output == "done" and len(only.resumptions) == 1
        validate_transcript(store.load_history("crash"))
    finally:
        store.close()


async def test_continue_run_without_a_store_or_a_crash_is_invalid(tmp_path: Path) -> None:
    from agentloop import Agent
    from agentloop.testing import ScriptedModel

    with pytest.raises(InvalidInput, match="needs an agent with a store"):
        await Agent(ScriptedModel([])).continue_run()
    agent = _plan.build(str(tmp_path / "x.db"), resume=False)
    with pytest.raises(InvalidInput, match="no run to continue"):
        await agent.continue_run()


async def test_a_live_lease_refuses_continue_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash = _spawn(tmp_path, "s", KILL="tool:c:1")
    crash.communicate(timeout=60)
    store = SQLiteStore(tmp_path / "s.db")
    now = time.time()
    holder = store.claim("crash", "elsewhere:1", now + 60, now=now)  # the dead child held it
    assert store.claim("crash", "elsewhere:1", now + 60, now=now, replace=holder) is None
    store.close()
    monkeypatch.setenv("EFFECTS", str(tmp_path / "s.effects"))
    agent = _plan.build(str(tmp_path / "s.db"), resume=True)
    with pytest.raises(MemoryBackendError, match="elsewhere:1"):
        await agent.continue_run()
    assert _effects(tmp_path / "s.effects") == ["a", "b"]  # nothing ran, nothing changed
    store = SQLiteStore(tmp_path / "s.db")
    store.claim("crash", "elsewhere:1", now - 1, now=now)  # the lease expires
    store.close()
    run = await agent.continue_run()
    assert run.output == "done"
    assert _effects(tmp_path / "s.effects") == sorted(_plan.KEYS)


async def test_a_tool_that_returned_but_was_not_journaled_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit of exactly-once: the process died between a tool's return and its journal write."""
    crash = _spawn(tmp_path, "s", KILL="save_step_before:2")  # tool a's output, unwritten
    crash.communicate(timeout=60)
    assert crash.returncode == -9
    assert _effects(tmp_path / "s.effects") == ["a"]
    monkeypatch.setenv("EFFECTS", str(tmp_path / "s.effects"))
    _, continued = await _continue(tmp_path / "s.db")
    assert continued
    assert _effects(tmp_path / "s.effects") == sorted(["a", *_plan.KEYS])
