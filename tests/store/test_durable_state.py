"""The safety state outlives the process: snapshot/restore of each part, and ``Agent.resume``.

Also the store's schema versioning: an older store opens and is upgraded, a newer one and a
corrupted safety row are clear ``MemoryBackendError``s.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, FallbackClient, RunConfig, tool
from agentloop.engine.guards import BREAKER_TEXT
from agentloop.errors import LoopDetected, MemoryBackendError, ProviderUnavailable
from agentloop.messages import Usage
from agentloop.providers.fallback import Health
from agentloop.safety.breaker import ToolBreaker, ToolBreakers
from agentloop.safety.budget import Budget, BudgetGate
from agentloop.safety.convergence import ConvergenceDetector
from agentloop.safety.loops import LoopDetector
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply


def _json(data: object) -> Any:
    return json.loads(json.dumps(data))


def test_loop_detector_round_trips_its_window() -> None:
    first = LoopDetector()
    for _ in range(9):
        first.record("read", {"p": 1}, "same", is_error=False)
    second = LoopDetector()
    second.restore(_json(first.snapshot()))
    assert second.check() is None
    second.record("read", {"p": 1}, "same", is_error=False)
    stop = second.check()
    assert isinstance(stop, LoopDetected) and "repeated 10 times" in str(stop)
    with pytest.raises(ValueError, match="not a LoopDetector snapshot"):
        LoopDetector().restore({"window": "nope"})


def test_convergence_and_budget_round_trip() -> None:
    first = ConvergenceDetector()
    first.record("the same answer")
    first.record("the same answer")
    second = ConvergenceDetector()
    second.restore(_json(first.snapshot()))
    assert second.streak == 2 and second.record("the same answer") is not None
    now = [100.0]
    gate = BudgetGate(Budget(tokens=10), clock=lambda: now[0])
    gate.record_usage(Usage(4, 5), "m")
    now[0] = 130.0
    other = BudgetGate(Budget(tokens=10), clock=lambda: 5.0)
    other.restore(_json(gate.snapshot()))
    assert other.spent("tokens") == 9 and other.spent("wall_clock") == 30.0


def test_an_open_breaker_stays_open_across_clocks() -> None:
    mono = [1000.0]
    breakers = ToolBreakers(ToolBreaker(failure_threshold=1, recovery_seconds=30), lambda: mono[0])
    admission = breakers.admit("flaky")
    assert admission is not None
    breakers.record(admission, "sick")
    data = _json(breakers.snapshot(wall=50_000.0))
    later = [7.0]  # another process: another monotonic origin
    restored = ToolBreakers(ToolBreaker(failure_threshold=1, recovery_seconds=30), lambda: later[0])
    restored.restore(data, wall=50_010.0)
    assert restored.health("flaky").state == "open" and restored.admit("flaky") is None
    later[0] += 20.0  # 30 s after it opened, by the wall clock
    probe = restored.admit("flaky")
    assert probe is not None and probe.probe


def test_fallback_health_round_trips() -> None:
    now = [10.0]
    first = FallbackClient([ScriptedModel([], model="a"), ScriptedModel([], model="b")],
                           trip_threshold=1, clock=lambda: now[0])  # fmt: skip
    first._health[0] = first._health[0].__class__(Health.OPEN, 0, 10.0, 0)
    data = _json(first.snapshot(wall=1000.0))
    second = FallbackClient([ScriptedModel([], model="a"), ScriptedModel([], model="b")],
                            trip_threshold=1, clock=lambda: 500.0)  # fmt: skip
    second.restore(data, wall=1030.0)
    assert second.health[0].state is Health.OPEN
    assert second.health[0].opened_at == pytest.approx(470.0)
    elsewhere = FallbackClient([ScriptedModel([], model="x")])
    elsewhere.restore(data)  # other models: ignored
    assert elsewhere.health[0].state is Health.CLOSED


calls: list[str] = []


@tool
async def flaky() -> str:
    """Always crashes."""
    calls.append("flaky")
    raise RuntimeError("boom")


@tool
def read(path: str) -> str:
    """Read."""
    return "same"


def test_a_breaker_opened_before_a_crash_is_open_after_resume(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    calls.clear()
    model = ScriptedModel([call("flaky"), call("flaky"), call("flaky"), reply("x")])
    agent = Agent(model, tools=[flaky], store=SQLiteStore(db), session_id="s")
    agent.run_sync("go")
    assert calls == ["flaky"] * 3
    assert agent.safety.breakers.health("flaky").state == "open"
    resumed = Agent.resume(
        "s", store=SQLiteStore(db), client=ScriptedModel([call("flaky"), reply("ok")]),
        tools=[flaky],
    )  # fmt: skip
    assert resumed.safety.breakers.health("flaky").state == "open"
    run = resumed.run_sync("again")
    assert calls == ["flaky"] * 3  # refused, not called
    assert run.turns[0].tool_results[0].content == BREAKER_TEXT


def test_loop_counts_continue_after_resume(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    same = [call("read", {"path": "x"})]
    agent = Agent(ScriptedModel([*same * 6, reply("a")]), tools=[read], store=SQLiteStore(db),
                  session_id="s")  # fmt: skip
    agent.run_sync("go")
    resumed = Agent.resume("s", store=SQLiteStore(db), tools=[read],
                           client=ScriptedModel([*same * 6, reply("b")]))  # fmt: skip
    with pytest.raises(LoopDetected, match="repeated 10 times"):
        resumed.run_sync("again")
    assert len(resumed.runs[-1].turns) == 5  # 6 + 4 = 10 recorded; the 11th refused


def test_model_health_persists_with_a_fallback_client(tmp_path: Path) -> None:
    db = tmp_path / "s.db"

    def chain(*steps: object) -> FallbackClient:
        return FallbackClient(
            [ScriptedModel(list(steps), model="a"), ScriptedModel([reply("b")] * 3, model="b")],
            trip_threshold=1,
        )

    agent = Agent(chain(ProviderUnavailable("down")), store=SQLiteStore(db), session_id="s")
    assert agent.run_sync("go").output == "b"
    resumed = Agent.resume("s", store=SQLiteStore(db), client=chain(reply("a")))
    assert isinstance(resumed.client, FallbackClient)
    assert resumed.client.health[0].state is Health.OPEN
    assert resumed.run_sync("again").output == "b"  # a is still cooling down


def test_an_older_store_opens_and_is_upgraded(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    SQLiteStore(db).close()
    with sqlite3.connect(db) as conn:  # back to the schema-1 layout
        for table in ("agentloop_meta", "agentloop_sessions", "agentloop_steps",
                      "agentloop_resumptions"):  # fmt: skip
            conn.execute(f"DROP TABLE {table}")
    store = SQLiteStore(db)
    assert store.load_safety("s") is None
    store.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM agentloop_meta").fetchall() == [("3",)]


def test_a_newer_store_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    SQLiteStore(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE agentloop_meta SET value = '9' WHERE key = 'schema_version'")
    with pytest.raises(MemoryBackendError, match="schema version 9, newer than"):
        SQLiteStore(db)


def test_a_corrupted_safety_row_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    Agent(ScriptedModel([reply("x")]), store=SQLiteStore(db), session_id="s").run_sync("go")
    with sqlite3.connect(db) as conn:
        conn.execute('UPDATE agentloop_sessions SET safety = \'{"format": 1, "loops": 3}\'')
    with pytest.raises(MemoryBackendError, match="stored safety state is unreadable"):
        Agent.resume("s", store=SQLiteStore(db), client=ScriptedModel([]))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE agentloop_sessions SET safety = 'not json'")
    with pytest.raises(MemoryBackendError, match="unreadable"):
        Agent.resume("s", store=SQLiteStore(db), client=ScriptedModel([]))
    store = SQLiteStore(db)
    assert store.load_history("s")  # nothing stored was lost
    store.close()


def test_config_keeps_working_with_detection_off(tmp_path: Path) -> None:
    config = RunConfig()
    agent = Agent(ScriptedModel([reply("x")]), config=config, store=SQLiteStore(tmp_path / "d.db"))
    agent.run_sync("go")
    assert agent.safety.snapshot()["format"] == 1
