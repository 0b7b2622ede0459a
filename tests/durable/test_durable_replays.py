"""What a recovered durable run tells its observers and traces, and its guardrail verdicts.

DBOS, in child processes on SQLite: a run SIGKILLed in its third turn's first tool call is
recovered by the next process; across both processes every model call, tool call and guardrail
verdict is seen once live, and the recovering process sees the ones it took from the record
marked ``replayed`` (events), ``agentloop.replayed`` (spans) with no token usage on the
replayed chat spans. Its moderation check, which trips in the recovering process, is not asked
again: the recorded verdict stands. In process: a replayed run (a fork of the finished
workflow) takes its guardrails' verdicts from their steps, and the usage of a check's own model
calls with them. Temporal, on the dev server: a worker process SIGKILLed in a tool call, and a
second one that replays the workflow from its history and finishes it, see each call live once
between them, the second one the rest marked, its moderation check not asked again; and a worker
that keeps no workflow in its cache (it replays the history at every workflow task) asks a check
whose verdict changes after its first answer once. A paused DBOS run's continuation retraces the
run to its pause: that stretch's events and run span are marked, and its usage not counted.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the replay tests trace with the otel extra")

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _plan  # noqa: E402
import _replay_plan  # noqa: E402
from _replay_plan import INPUT, OUTPUT, lines  # noqa: E402

from agentloop import Agent  # noqa: E402
from agentloop import events as ev  # noqa: E402
from agentloop.guardrails import GuardrailContext, InputGuardrail, OutputGuardrail  # noqa: E402
from agentloop.model import ModelRequest  # noqa: E402
from agentloop.observers import Observer  # noqa: E402
from agentloop.testing import FunctionModel, reply  # noqa: E402

TURNS = len(_plan.PLAN) + 1  # the plan's tool turns, then the answer


def _env(tmp: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k != "KILL"}
    names = ("EVENTS", "SPANS", "CHECKS", "VERDICT", "EFFECTS")
    environ.update({name: str(tmp / name.lower()) for name in names})
    environ["DBOS_URL"] = f"sqlite:///{tmp / 'dbos.sqlite'}"
    return environ


def _child(env: dict[str, str], mode: str, **extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(HERE / "_dbos_replay_child.py"), mode, "wf-replayed"]
    return subprocess.run(argv, env={**env, **extra}, capture_output=True, text=True, timeout=120)


def test_dbos_a_recovered_run_marks_what_it_replayed(tmp_path: Path) -> None:
    pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")
    env = _env(tmp_path)
    Path(env["VERDICT"]).write_text("pass")
    killed = _child(env, "run", KILL="tool:d:1")
    assert killed.returncode == -9, killed.stderr[-2000:]
    Path(env["VERDICT"]).write_text("flagged by today's moderation model")  # it changed its mind
    recovered = _child(env, "recover")
    assert recovered.returncode == 0, recovered.stderr[-2000:]
    assert recovered.stdout.split() == ["done", str(INPUT * TURNS)]
    assert len(lines(Path(env["CHECKS"]))) == 1  # asked once, by the first process

    seen = lines(Path(env["EVENTS"]))
    first, second = seen[0][0], seen[-1][0]
    live = sorted((kind, key) for pid, kind, key, replayed in seen if not replayed)
    everything = [("model", str(t)) for t in range(TURNS)] + [("tool", k) for k in _plan.KEYS]
    assert live == sorted([*everything, ("guardrail", "moderation:False")])  # each once
    replayed = [(kind, key) for pid, kind, key, replayed in seen if replayed]
    assert replayed == [  # the recovering process, in the run's order
        ("guardrail", "moderation:False"),
        ("model", "0"), ("tool", "a"), ("tool", "b"),
        ("model", "1"), ("tool", "c"),
        ("model", "2"),
    ]  # fmt: skip
    assert {pid for pid, *_, replayed in seen if replayed} == {second} != {first}

    spans = lines(Path(env["SPANS"]))
    chats = [(pid, attrs) for pid, name, attrs in spans if name.startswith("chat")]
    counted = [a for _, a in chats if "gen_ai.usage.input_tokens" in a]
    assert len(counted) == TURNS and all(not a.get("agentloop.replayed") for a in counted)
    assert sum(a["gen_ai.usage.input_tokens"] for a in counted) == INPUT * TURNS
    assert sum(a["gen_ai.usage.output_tokens"] for a in counted) == OUTPUT * TURNS
    marked = [(pid, a) for pid, a in chats if a.get("agentloop.replayed")]
    assert len(marked) == 3 and {pid for pid, _ in marked} == {second}
    assert all("gen_ai.usage.input_tokens" not in a for _, a in marked)
    tools = {a["gen_ai.tool.call.id"]: a for _, n, a in spans if n.startswith("execute_tool")}
    assert sum(1 for a in tools.values() if a.get("agentloop.replayed")) == 3
    guards = [(pid, a) for pid, n, a in spans if n.startswith("guardrail")]
    assert [(pid, a.get("agentloop.replayed", False)) for pid, a in guards] == [
        (first, False),
        (second, True),
    ]
    (run,) = [a for _, n, a in spans if n.startswith("invoke_agent")]  # the killed one never ended
    assert run["agentloop.replayed_calls"] == 3 and run["agentloop.replayed"] is False
    assert run["gen_ai.usage.input_tokens"] == INPUT * TURNS  # the run's own total, once


checked: list[str] = []


def _answering(request: ModelRequest) -> Any:
    """The run's model, and the model the output check asks through ``ctx.client``."""
    if any("judge:" in m.text for m in request.messages if m.role == "user"):
        return reply("fine")
    return _plan.plan_step(request)


async def _judged(ctx: GuardrailContext[Any], value: Any) -> str | None:
    checked.append(f"{ctx.kind} {value}")
    answer = await ctx.client.complete(ModelRequest(messages=[_user(f"judge: {value}")]))
    return None if answer.message.text == "fine" else "judged unfit"


def _user(text: str) -> Any:
    from agentloop.messages import Message

    return Message.user(text)


def _moderated(ctx: GuardrailContext[Any], value: Any) -> str | None:
    checked.append(f"{ctx.kind} {value}")
    return None


_Marked = ev.ModelResponded | ev.ToolCallFinished | ev.GuardrailChecked


class _Events(Observer):
    def __init__(self) -> None:
        self.events: list[_Marked] = []

    def on_event(self, event: ev.Event) -> None:
        if isinstance(event, _Marked):
            self.events.append(event)


def _guarded(observer: Observer) -> Agent[str | None]:
    return Agent(
        _replay_plan.Priced(FunctionModel(_answering)),
        tools=[_plan.work],
        guardrails=[
            InputGuardrail(_moderated, parallel=True, tool_results=True),
            OutputGuardrail(_judged),
        ],
        observers=[observer],
    )


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("EFFECTS", str(tmp_path / "effects"))
    checked.clear()
    yield tmp_path / "effects"


async def test_dbos_a_replay_takes_every_verdict_and_its_usage_from_the_steps(
    effects: Path, tmp_path: Path
) -> None:
    pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")
    from dbos import DBOS

    from agentloop.durable.dbos import DBOSAgent

    seen = _Events()
    durable = DBOSAgent(_guarded(seen), name="verdicts")
    url = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS(config={"name": "agentloop-tests", "system_database_url": url, "log_level": "ERROR"})
    DBOS.launch()
    try:
        run = await durable.run("go", workflow_id="wf-verdicts")
        assert run.output == "done" and len(checked) == 1 + len(_plan.KEYS) + 1
        steps = await DBOS.list_workflow_steps_async("wf-verdicts")
        names = [s["function_name"] for s in steps]
        assert names.count("verdicts.guardrail._moderated") == 1 + len(_plan.KEYS)
        assert names.count("verdicts.guardrail._judged") == 1
        assert all(not e.replayed for e in seen.events)
        live = len(seen.events)
        fork = await DBOS.fork_workflow_async("wf-verdicts", len(steps) + 1)
        again = await fork.get_result()
        assert len(checked) == 1 + len(_plan.KEYS) + 1  # no check ran again
        assert again.output == "done"
        assert again.usage == run.usage  # the judge's own model call counted again, from its step
        assert run.usage.input_tokens == INPUT * (TURNS + 1)
        replayed = seen.events[live:]
        assert len(replayed) == live and all(e.replayed for e in replayed)
    finally:
        DBOS.destroy(destroy_registry=True)


def _write(path: str, text: str) -> None:
    Path(path).write_text(text)


def _temporal_worker(server: str, env: dict[str, str], name: str, **extra: str) -> Any:
    ready = Path(env["EVENTS"]).with_name(f"ready-{name}")
    argv = [sys.executable, str(HERE / "_temporal_child.py"), server]
    environ = {**env, "AGENT": "replays", "READY": str(ready), "HEARTBEAT": "2", **extra}
    worker = subprocess.Popen(argv, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, f"worker {name} did not start"
        time.sleep(0.05)
    return worker


async def test_temporal_a_killed_workers_run_is_marked_where_it_is_replayed(
    server: str, client: Any, tmp_path: Path
) -> None:
    pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")
    from agentloop.durable.temporal import TemporalAgent
    from agentloop.testing import ScriptedModel

    env = {**_env(tmp_path), "STOP": str(tmp_path / "stop")}
    _write(env["VERDICT"], "pass")
    first = _temporal_worker(server, env, "first", KILL="b")
    starter = TemporalAgent(Agent(ScriptedModel([])), name="replays")  # starts; never works
    await starter.start("go", client=client, workflow_id="replays-1")
    first.communicate(timeout=120)
    assert first.returncode == -9  # killed inside the tool call "b", in the second turn
    _write(env["VERDICT"], "flagged by today's moderation model")
    second = _temporal_worker(server, env, "second")
    try:
        run = await starter.get_run("replays-1", client=client).result()
    finally:
        _write(env["STOP"], "")
        second.communicate(timeout=120)
    assert run.output == "done" and run.usage.input_tokens == INPUT * 3
    assert len(lines(Path(env["CHECKS"]))) == 1  # the moderation check ran once, in "first"

    seen = lines(Path(env["EVENTS"]))
    live = sorted((kind, key) for _, kind, key, replayed in seen if not replayed)
    assert live == sorted(
        [("model", "0"), ("model", "1"), ("model", "2"), ("tool", "a"), ("tool", "b"),
         ("guardrail", "moderation:False")]
    )  # fmt: skip
    replayed = [(kind, key) for _, kind, key, replayed in seen if replayed]
    assert replayed == [
        ("guardrail", "moderation:False"), ("model", "0"), ("tool", "a"), ("model", "1")
    ]  # fmt: skip
    assert {pid for pid, *_, replayed in seen if replayed} == {second.pid}

    chats = [a for _, name, a in lines(Path(env["SPANS"])) if name.startswith("chat")]
    counted = [a["gen_ai.usage.input_tokens"] for a in chats if "gen_ai.usage.input_tokens" in a]
    assert counted == [INPUT] * 3  # each model call's tokens once, across both workers
    assert sum(1 for a in chats if a.get("agentloop.replayed")) == 2


class _Changing:
    """A moderation check that passes the first time it is asked and trips every time after."""

    def __init__(self) -> None:
        self.asked = 0
        self.__name__ = "changing"

    def __call__(self, ctx: GuardrailContext[Any], value: Any) -> str | None:
        self.asked += 1
        return None if self.asked == 1 else "flagged on a second look"


async def test_temporal_a_replayed_workflow_marks_what_it_replayed(
    effects: Path, client: Any
) -> None:
    pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentloop.durable.temporal import TemporalAgent
    from agentloop.otel import OtelObserver

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen, changing = _Events(), _Changing()
    agent = Agent(
        _replay_plan.Priced(FunctionModel(_plan.plan_step)),
        tools=[_plan.work],
        guardrails=[InputGuardrail(changing)],
        observers=[seen, OtelObserver(provider.get_tracer("test"))],
    )
    durable = TemporalAgent(agent, name="t-replays")
    async with durable.worker(client, max_cached_workflows=0):  # every task replays the history
        run = await durable.run("go", client=client)
    assert run.output == "done" and changing.asked == 1
    assert run.usage.input_tokens == INPUT * TURNS
    live = [e for e in seen.events if not e.replayed]
    assert sorted(e.turn for e in live if isinstance(e, ev.ModelResponded)) == list(range(TURNS))
    tools = sorted(e.call.arguments["key"] for e in live if isinstance(e, ev.ToolCallFinished))
    assert tools == sorted(_plan.KEYS)
    assert [e.guardrail for e in live if isinstance(e, ev.GuardrailChecked)] == ["changing"]
    assert any(e.replayed for e in seen.events if isinstance(e, ev.ModelResponded))

    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    attributes = [dict(s.attributes or {}) for s in chats]
    counted = [a for a in attributes if "gen_ai.usage.input_tokens" in a]
    assert len(counted) == TURNS and not any(a.get("agentloop.replayed") for a in counted)
    marked = [a for a in attributes if a.get("agentloop.replayed")]
    assert marked and all("gen_ai.usage.input_tokens" not in a for a in marked)


async def test_dbos_a_paused_runs_continuation_marks_what_it_retraced(tmp_path: Path) -> None:
    pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")
    from _pause_plan import ask_customer, plan, refund, refunds
    from dbos import DBOS
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentloop import Answer, Approve
    from agentloop.durable.dbos import DBOSAgent
    from agentloop.otel import OtelObserver

    refunds.clear()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen = _Events()
    agent = Agent(
        _replay_plan.Priced(FunctionModel(plan)),
        tools=[refund, ask_customer],
        observers=[seen, OtelObserver(provider.get_tracer("test"))],
    )
    durable = DBOSAgent(agent, name="paused")
    url = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS(config={"name": "agentloop-tests", "system_database_url": url, "log_level": "ERROR"})
    DBOS.launch()
    try:
        started = await durable.start("refund A1", workflow_id="wf-paused")
        deadline = time.monotonic() + 60
        while not DBOSAgent.pending("wf-paused"):  # the paused workflow published its calls
            assert time.monotonic() < deadline, "the run never paused"
            await asyncio.sleep(0.05)
        DBOSAgent.decide("wf-paused", {"c1": Approve(), "c2": Answer("too late")})
        run = await asyncio.wait_for(started.result(poll_seconds=0.05), 60)
    finally:
        DBOS.destroy(destroy_registry=True)
    assert run.output == "refund: refunded A1; ask_customer: too late" and refunds == ["A1"]
    models = [(e.turn, e.replayed) for e in seen.events if isinstance(e, ev.ModelResponded)]
    assert models == [(0, False), (0, True), (1, False)]  # the continuation retraced turn 0
    roots = [dict(s.attributes or {}) for s in exporter.get_finished_spans()]
    roots = [a for a in roots if a.get("gen_ai.operation.name") == "invoke_agent"]
    paused, retraced, continued = roots
    assert paused["gen_ai.usage.input_tokens"] == INPUT and "agentloop.replayed" not in paused
    assert retraced["agentloop.replayed"] is True and "gen_ai.usage.input_tokens" not in retraced
    assert continued["gen_ai.usage.input_tokens"] == 2 * INPUT  # the run's total, as ever
    assert "agentloop.replayed" not in continued  # its one model call was made here
