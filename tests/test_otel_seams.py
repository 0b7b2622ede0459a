"""OpenTelemetry across a run's life (SPEC 10 x 17, 20, 25, 26): handoffs, batches, processes.

Real OTel SDK span processors in memory, real SQLite, a real second process, the fake provider
server's real batch API. Every span a run opens ends; the receiver of a handoff names itself on
its turns, model and tool calls; the spans of one run share ``agentloop.run_id`` and
``gen_ai.conversation.id``; a continuation this observer saw stop links to the span that stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from agentloop import Agent, Approve, RunConfig, tool
from agentloop.batch import poll
from agentloop.otel import OtelObserver
from agentloop.providers.openai import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import (
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
    ScriptedModel,
    call,
    reply,
)

NO_SLEEP = pytest.mark.usefixtures("no_real_sleep")  # not for the test that waits on a process
CHILD = Path(__file__).with_name("_otel_continue.py")


class Tally(SpanProcessor):
    """Every span started and ended, in order of ending."""

    def __init__(self) -> None:
        self.open: set[int] = set()
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.open.add(span.context.span_id)

    def on_end(self, span: ReadableSpan) -> None:
        self.open.discard(span.context.span_id if span.context else 0)
        self.ended.append(span)

    def named(self, name: str) -> list[ReadableSpan]:
        return sorted((s for s in self.ended if s.name == name), key=lambda s: s.start_time or 0)


def traced() -> tuple[OtelObserver, Tally]:
    tally = Tally()
    provider = TracerProvider()
    provider.add_span_processor(tally)
    return OtelObserver(provider.get_tracer("test")), tally


def attrs(span: ReadableSpan) -> Mapping[str, Any]:
    return dict(span.attributes or {})


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


@tool
def step(n: int) -> str:
    """A step of work."""
    return f"step {n} done"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@NO_SLEEP
async def test_a_receivers_turns_model_and_tool_calls_name_it() -> None:
    observer, tally = traced()
    billing = Agent(
        ScriptedModel([call("lookup", {"city": "Oslo"}), reply("billed")], model="recv"),
        name="billing",
        tools=[lookup],
    )
    starter = ScriptedModel([call("transfer_to_billing", {})], model="start")
    agent = Agent(starter, handoffs=[billing], observers=[observer])
    run = await agent.run("bill me")
    assert run.output == "billed" and not tally.open
    turns = tally.named("agentloop.turn")
    assert [attrs(t).get("gen_ai.agent.name") for t in turns] == [None, "billing", "billing"]
    chats = [attrs(c).get("gen_ai.agent.name") for c in tally.named("chat start")]
    assert chats == [None]
    assert [attrs(c)["gen_ai.agent.name"] for c in tally.named("chat recv")] == ["billing"] * 2
    (tool_span,) = tally.named("execute_tool lookup")
    assert attrs(tool_span)["gen_ai.agent.name"] == "billing"
    (transfer,) = tally.named("execute_tool transfer_to_billing")
    assert "gen_ai.agent.name" not in attrs(transfer)
    (root,) = tally.named("invoke_agent agentloop")
    (event,) = [e for e in root.events if e.name == "agentloop.handoff"]  # between the turns
    assert dict(event.attributes or {}) == {"agentloop.handoff.to_agent": "billing"}
    assert attrs(root)["gen_ai.conversation.id"] == run.session_id


def continue_elsewhere(db: Path, session_id: str) -> tuple[list[dict[str, Any]], int]:
    """The paused run continued by a second process; its spans and how many it left open."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(CHILD), str(db), session_id],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *spans, tail = [json.loads(line) for line in done.stdout.splitlines()]
    return spans, tail["open"]


async def test_a_pause_inside_a_receiver_continued_by_another_process(tmp_path: Path) -> None:
    observer, tally = traced()
    db = tmp_path / "runs.db"
    billing = Agent(
        ScriptedModel([call("refund", {"order": "o-1"}, id="c1")]), name="billing", tools=[refund]
    )
    agent = Agent(
        ScriptedModel([call("transfer_to_billing", {})]),
        handoffs=[billing],
        observers=[observer],
        store=SQLiteStore(db),
    )
    run = await agent.run("refund o-1")
    assert run.paused and not tally.open
    (paused,) = tally.named("invoke_agent agentloop")
    (refund_span,) = tally.named("execute_tool refund")
    assert attrs(refund_span)["agentloop.tool.pending"] == "approval"
    assert attrs(refund_span)["gen_ai.agent.name"] == "billing"

    spans, left_open = continue_elsewhere(db, run.session_id)
    assert left_open == 0
    by_name = {s["name"]: s for s in spans}
    continued = by_name["invoke_agent agentloop"]["attributes"]
    assert continued["agentloop.run_id"] == run.id
    assert continued["gen_ai.conversation.id"] == attrs(paused)["gen_ai.conversation.id"]
    assert continued["agentloop.run.continued"] is True
    assert by_name["execute_tool refund"]["attributes"]["gen_ai.agent.name"] == "billing"
    turns = [s["attributes"] for s in spans if s["name"] == "agentloop.turn"]
    assert turns and all(t["gen_ai.agent.name"] == "billing" for t in turns)


@NO_SLEEP
async def test_a_paused_run_continued_here_links_to_its_paused_span(tmp_path: Path) -> None:
    observer, tally = traced()
    steps = [call("refund", {"order": "o-2"}, id="c1"), reply("done")]
    agent = Agent(ScriptedModel(steps), tools=[refund], observers=[observer])
    await agent.run("refund o-2")
    await agent.continue_run(decisions={"c1": Approve()})
    paused, continued = tally.named("invoke_agent agentloop")
    (link,) = continued.links
    assert link.context == paused.context
    assert not tally.open


@NO_SLEEP
async def test_a_batch_run_waits_marked_and_each_poll_links_to_the_last_wait(
    tmp_path: Path,
) -> None:
    observer, tally = traced()
    steps = [FakeReply(tool_calls=[FakeToolCall("lookup", {"city": "Oslo"})]), FakeReply("done")]
    async with FakeProviderServer(steps) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        agent = Agent(
            client,
            tools=[lookup],
            store=SQLiteStore(tmp_path / "s.db"),
            config=RunConfig(batch=True),
            observers=[observer],
        )
        run = await agent.run("weather?")
        assert run.waiting is not None
        batch_id = run.waiting.batch_id
        await poll(agent)
        await poll(agent)
    assert not tally.open
    first, second, third = tally.named("invoke_agent agentloop")
    assert attrs(first)["agentloop.run.waiting"] is True
    (waiting,) = [e for e in first.events if e.name == "agentloop.run.waiting"]
    assert dict(waiting.attributes or {})["agentloop.batch.id"] == batch_id
    assert "agentloop.run.continued" not in attrs(first)
    for earlier, later in ((first, second), (second, third)):
        assert attrs(later)["agentloop.run.continued"] is True
        assert [link.context for link in later.links] == [earlier.context]
    assert "agentloop.run.waiting" not in attrs(third)
    submitted = [attrs(c) for c in tally.named("chat gpt-test") if "agentloop.batch.id" in attrs(c)]
    assert [a["agentloop.batch.request_id"] for a in submitted] == [
        f"{run.id}_0_0",
        f"{run.id}_1_0",
    ]
    answered = [
        attrs(c) for c in tally.named("chat gpt-test") if "gen_ai.usage.input_tokens" in attrs(c)
    ]
    assert len(answered) == 2


def crash_in(db: Path, session_id: str) -> None:
    """A second process runs on ``session_id`` and dies in its second turn."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    died = subprocess.run(
        [sys.executable, str(CHILD), str(db), session_id, "crash"],
        capture_output=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert died.returncode == 3, died.stderr


async def test_a_crashed_run_continued_here_is_marked_continued(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    crash_in(db, "crashed")
    observer, tally = traced()
    agent = Agent.resume(
        "crashed",
        store=SQLiteStore(db),
        client=ScriptedModel([call("step", {"n": 3}), reply("done")]),
        tools=[step],
        observers=[observer],
    )
    run = await agent.continue_run()
    assert run.output == "done" and not tally.open
    (root,) = tally.named("invoke_agent agentloop")
    assert attrs(root)["agentloop.run.continued"] is True
    assert attrs(root)["gen_ai.conversation.id"] == "crashed"
    assert [attrs(s)["gen_ai.tool.call.id"] for s in tally.named("execute_tool step")]
