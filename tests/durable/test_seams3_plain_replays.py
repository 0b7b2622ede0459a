"""The plain store's ``continue_run`` marks what it answers from its journal, as DBOS does.

A child process runs the crash plan (``_plan.py``) on its own SQLite file and is SIGKILLed at a
chosen point; this process continues the run. What the journal answers (the in-flight turn's
model reply, the tool calls that had returned, an approved call whose result was kept) is
emitted again here: those events must say ``replayed`` (and their spans ``agentloop.replayed``
with no usage), so a dashboard counts each call once. Everything else the continuation does
is live and unmarked. Before, nothing was marked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent
from agentloop import events as ev
from agentloop.observers import Observer
from agentloop.store import SQLiteStore
from agentloop.testing import FunctionModel

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _plan  # noqa: E402

CHILD = HERE / "_crash_child.py"
PAUSE_CHILD = HERE.parent / "pausing" / "_child.py"


class Seen(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)

    def calls(self) -> list[tuple[str, Any, bool]]:
        """(kind, turn or tool key, replayed) of each model and tool call, in order."""
        out: list[tuple[str, Any, bool]] = []
        for e in self.events:
            if isinstance(e, ev.ModelResponded):
                out.append(("model", e.turn, e.replayed))
            elif isinstance(e, ev.ToolCallFinished):
                out.append(("tool", e.call.arguments.get("key", e.call.name), e.replayed))
        return out


def _crash(tmp: Path, kill: str) -> Path:
    db, effects = tmp / "s.db", tmp / "s.effects"
    env = {**os.environ, "EFFECTS": str(effects), "KILL": kill}
    done = subprocess.run(
        [sys.executable, str(CHILD), str(db), "run"], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == -9, done.stderr.decode()
    return db


async def test_a_continued_crash_marks_the_journaled_reply_and_tool_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentloop.otel import OtelObserver

    db = _crash(tmp_path, "tool:e:1")  # turn 2 asked for d, e, f: d returned, e was cut
    monkeypatch.setenv("EFFECTS", str(tmp_path / "s.effects"))
    monkeypatch.delenv("KILL", raising=False)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen = Seen()
    observers = [seen, OtelObserver(provider.get_tracer("t"))]
    client = FunctionModel(_plan.plan_step)
    store = SQLiteStore(db)
    agent = Agent.resume(
        "crash", store=store, client=client, tools=[_plan.work], observers=observers
    )
    run = await agent.continue_run()
    assert run.output == "done"
    assert seen.calls() == [
        ("model", 2, True),  # the reply the crashed process announced, from the journal
        ("tool", "d", True),  # returned before the crash: its journaled output
        ("tool", "e", False),
        ("tool", "f", False),
        ("model", 3, False),
        ("tool", "g", False),
        ("model", 4, False),
    ]
    spans = {
        (s.name, dict(s.attributes or {}).get("agentloop.replayed", False))
        for s in exporter.get_finished_spans()
    }
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    marked = [
        dict(s.attributes or {}) for s in chats if (s.attributes or {}).get("agentloop.replayed")
    ]
    assert len(marked) == 1 and not any(k.startswith("gen_ai.usage") for k in marked[0])
    assert ("execute_tool work", True) in spans
    # the next continuation finds nothing: its journal's marks let go with the run
    assert agent.default_session._bus._listeners == ()


def test_an_approved_call_whose_result_was_kept_is_marked_when_continued(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects"

    def child(mode: str, kill: str = "") -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "EFFECTS": str(effects), "KILL": kill}
        return subprocess.run(
            [sys.executable, str(PAUSE_CHILD), str(db), mode],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    assert child("pause").returncode == 0
    assert child("decide", kill="after_turn").returncode == -9  # the result was kept
    continued = child("continue")
    assert continued.returncode == 0, continued.stderr
    result = json.loads(continued.stdout)
    assert result["read"] == ["refunded A1"]
    assert result["finished"] == [["refund", True]]  # answered from the journal: marked


async def test_a_continuation_with_nothing_to_replay_listens_to_nothing(tmp_path: Path) -> None:
    """The marks cost nothing to a continuation that answers nothing from its journal."""
    from agentloop import Approve, tool
    from agentloop.testing import ScriptedModel, call, reply

    listening: list[bool] = []

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        listening.append(agent.default_session._bus.active)
        return f"refunded {order}"

    @tool
    def note(text: str) -> str:
        """Note something (runs before the pause: its output is journaled)."""
        return "noted"

    store = SQLiteStore(tmp_path / "runs.db")
    steps = [call("note", {"text": "x"}, id="n1"), call("refund", {"order": "A1"}, id="c1")]
    again = call("refund", {"order": "A2"}, id="c2")
    model = ScriptedModel([steps, again, reply("done")])
    agent = Agent(model, tools=[refund, note], store=store, session_id="s")
    assert (await agent.run("go")).paused
    assert store.load_steps(agent.runs[-1].id)  # the paused turn journaled its reply and note
    assert (await agent.continue_run(decisions={"c1": Approve()})).paused  # c1's result kept
    run = await agent.continue_run(decisions={"c2": Approve()})
    assert run.output == "done" and listening == [False, False]  # no events built for nobody
    store.close()
