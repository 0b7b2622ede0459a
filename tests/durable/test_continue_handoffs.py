"""``continue_run`` after a real crash inside a handoff receiver (SPEC 14 x 26).

The crash tests' plan (``_plan.py``) run by a receiver: a front desk hands off at once, the
receiver ``worker`` makes the plan's tool calls. A child process SIGKILLs itself inside the
receiver's tool calls and between them; the test process resumes and continues the session:
every call's side effect happened exactly once (a receiver's tool calls are journaled as the
starting agent's are) and the run ends in the receiver: it once went on in the front desk, which
lacks the receiver's tool, so the call the crash cut off never ran (a soft "not available").
A receiver reached through an ``input_filter`` is refused (``InvalidInput``, nothing run): its
filtered transcript is kept with a pause, not a crash.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentloop.errors import InvalidInput

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _plan  # noqa: E402

CHILD = HERE / "_crash_child.py"
POINTS = ["tool:b:1", "tool:e:1", "tool:f:1", "save_step_after:4"]


def _crashed(tmp_path: Path, point: str, how: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    db, effects = tmp_path / "crash.db", tmp_path / "effects"
    env = {**os.environ, "EFFECTS": str(effects), "HANDOFF": how, "KILL": point}
    child = subprocess.run(
        [sys.executable, str(CHILD), str(db), "run"], env=env, capture_output=True, timeout=60
    )
    assert child.returncode == -9, child.stderr.decode()
    monkeypatch.setenv("EFFECTS", str(effects))
    monkeypatch.setenv("HANDOFF", how)
    monkeypatch.delenv("KILL", raising=False)
    return db


@pytest.mark.parametrize("point", POINTS)
async def test_a_run_killed_in_a_receiver_continues_with_every_call_once(
    tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _crashed(tmp_path, point, "1", monkeypatch)
    effects = tmp_path / "effects"
    agent = _plan.build(str(db), resume=True)
    run = await agent.continue_run()
    assert run.output == "done" and run.stop_reason is None and run.last_agent == "worker"
    assert sorted(effects.read_text().split()) == sorted(_plan.KEYS)  # each exactly once


async def test_a_run_killed_in_a_filtered_receiver_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _crashed(tmp_path, "tool:e:1", "filtered", monkeypatch)
    before = (tmp_path / "effects").read_text().split()
    agent = _plan.build(str(db), resume=True)
    with pytest.raises(InvalidInput, match="input_filter"):
        await agent.continue_run()
    assert (tmp_path / "effects").read_text().split() == before == ["a", "b", "c", "d"]
