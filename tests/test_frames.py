"""An unexpected exception keeps its innermost frames on the run's record (engine/frames.py).

Through the public API: a model client with a bug ends the run as ``InternalError``; its
``traceback`` attribute holds the innermost frames, redacted and bounded, is stored with the run
and read back equal. A typed error (what the engine expects) gets none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, Run
from agentloop.engine.frames import MAX_FRAMES, MAX_TEXT
from agentloop.errors import InternalError, ProviderUnavailable
from agentloop.model import ModelRequest
from agentloop.store import SQLiteStore
from agentloop.testing import FunctionModel, ScriptedModel

FAKE_KEY = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"


def _deep(n: int) -> str:
    if n == 0:
        raise KeyError("sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c" + "x" * 300)
    return _deep(n - 1)


def buggy(request: ModelRequest) -> str:
    return _deep(40)


def test_an_unexpected_exception_keeps_its_innermost_frames(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "runs.db"))
    agent = Agent(FunctionModel(buggy), store=store, session_id="s")
    with pytest.raises(InternalError) as raised:
        agent.run_sync("go")
    frames = raised.value.traceback  # type: ignore[attr-defined]
    assert len(frames) == MAX_FRAMES  # the innermost ones only
    innermost = frames[-1]
    assert innermost["function"] == "_deep" and innermost["file"] == __file__
    assert innermost["code"].startswith('raise KeyError("[REDACTED]')
    assert all(len(str(value)) <= MAX_TEXT for frame in frames for value in frame.values())
    assert FAKE_KEY not in repr(frames) and FAKE_KEY not in str(raised.value)
    found = store.load_run(agent.runs[-1].id)
    assert found is not None and not isinstance(found, Exception)
    assert found.run.stop_reason.traceback == frames  # type: ignore[union-attr]
    assert Run.from_dict(agent.runs[-1].to_dict()) == agent.runs[-1]
    store.close()


def test_a_typed_error_gets_no_frames() -> None:
    agent = Agent(ScriptedModel([ProviderUnavailable("down")]))
    with pytest.raises(ProviderUnavailable) as raised:
        agent.run_sync("go")
    assert "traceback" not in raised.value.attributes()
