"""``Dataset.evaluate(agent, deps=...)``, and a callable task's paused run fails its case.

Found by building an ops service from the docs alone: its agent reads ``ctx.deps`` (a role that
a toolset filter checks, a team that names the memory namespace), and ``evaluate(agent)`` gave
every case ``deps=None``. The way out the docs leave, a callable task ``agent.run(inputs,
deps=...)``, lost what an Agent task does with a pause: a case whose run paused on the
approval-gated, irreversible ``purge_queue`` was judged on ``None`` and its run stayed paused in
the store, where a later approval would purge a queue for an evaluation already reported.
``evaluate`` and ``check`` take ``deps=`` (a value, or ``(case) -> deps``) for an Agent task,
and a callable task whose run is left paused or waiting fails its case (``RunPaused``).

Real parts: the fake provider over HTTP on 127.0.0.1, the real OpenAI adapter, a SQLite store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, RunContext
from agentloop.errors import ConfigurationError
from agentloop.evals import Case, Dataset
from agentloop.model import ToolSpec
from agentloop.providers.openai import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall
from agentloop.toolsets import FunctionToolset

PURGED: list[str] = []


@dataclass
class Caller:
    role: str


def _model(body: Mapping[str, Any]) -> FakeReply:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return FakeReply(f"Done: {last['content']}")
    return FakeReply(tool_calls=[FakeToolCall("purge_queue", {"queue": last["content"]})])


def _agent(url: str, db: Path) -> Agent[Any]:
    ops = FunctionToolset(name="ops")

    @ops.tool(requires_approval=True)
    def purge_queue(queue: str) -> str:
        """Irreversibly delete every message on a queue."""
        PURGED.append(queue)
        return f"purged {queue}"

    def oncall_only(ctx: RunContext[Any], spec: ToolSpec) -> bool:
        return spec.name != "purge_queue" or getattr(ctx.deps, "role", None) == "oncall"

    client = OpenAIClient("gpt-4o-mini", api_key="sk-test-0000", base_url=url)
    return Agent(client, toolsets=[ops.filtered(oncall_only)], store=SQLiteStore(db))


DATASET = Dataset(
    cases=[
        Case(name="viewer", inputs="orders", metadata={"role": "viewer"},
             expected_output="Done: tool 'purge_queue' is not available"),
        Case(name="oncall", inputs="payments", metadata={"role": "oncall"}),
    ],
)  # fmt: skip


async def test_an_agent_task_runs_with_each_cases_deps(tmp_path: Path) -> None:
    PURGED.clear()
    async with FakeProviderServer(default=_model) as server:
        agent = _agent(server.base_url, tmp_path / "runs.db")
        report = await DATASET.evaluate(
            agent, max_concurrency=1, deps=lambda case: Caller(case.metadata["role"])
        )
        await agent.aclose()
    viewer, oncall = report.cases
    assert viewer.error is None and viewer.output == "Done: tool 'purge_queue' is not available"
    assert oncall.error == "RunPaused" and not oncall.passed  # offered to on-call: it paused
    store = SQLiteStore(tmp_path / "runs.db")
    assert store.load_runs(status="paused") == []  # ended Cancelled, never left to approve
    assert PURGED == []


async def test_a_callable_tasks_paused_run_fails_its_case(tmp_path: Path) -> None:
    PURGED.clear()
    async with FakeProviderServer(default=_model) as server:
        agent = _agent(server.base_url, tmp_path / "runs.db")

        async def leaves_it(queue: str) -> Any:
            return (await agent.run(queue, deps=Caller("oncall"), history=[])).output

        async def decides(queue: str) -> Any:
            run = await agent.run(queue, deps=Caller("oncall"), history=[])
            session = agent.session(run.session_id)
            decisions = {p.id: Approve() for p in run.pending}
            return (await session.continue_run(decisions=decisions, deps=Caller("oncall"))).output

        case = Case(name="purge", inputs="payments")
        left = (await Dataset(cases=[case]).evaluate(leaves_it)).cases[0]
        decided = (await Dataset(cases=[case]).evaluate(decides)).cases[0]
        await agent.aclose()
    assert left.error == "RunPaused" and not left.passed and left.output is None
    assert "cancel_run()" in (left.error_message or "")
    assert decided.error is None and decided.output == "Done: purged payments"
    assert PURGED == ["payments"]


def test_deps_with_a_callable_task_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="evaluate the Agent itself"):
        DATASET.evaluate_sync(str.upper, deps=Caller("oncall"))


APP = """
import os
from dataclasses import dataclass

from agentloop import Agent, RunContext, tool
from agentloop.providers.openai import OpenAIClient


@dataclass
class Caller:
    role: str


@tool
def whoami(ctx: RunContext[Caller]) -> str:
    '''The caller's role.'''
    return ctx.deps.role


client = OpenAIClient("gpt-4o-mini", api_key="sk-test-0000", base_url=os.environ["OPS_URL"])
agent = Agent(client, tools=[whoami])


def for_case(case):
    return Caller(case.metadata["role"])
"""

CASES = """\
cases:
- name: oncall
  inputs: who am I
  metadata: {role: oncall}
  expected_output: "Done: oncall"
evaluators: [EqualsExpected]
"""


def _whoami(body: Mapping[str, Any]) -> FakeReply:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return FakeReply(f"Done: {last['content']}")
    return FakeReply(tool_calls=[FakeToolCall("whoami", {})])


def test_agentloop_eval_deps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentloop.cli import main

    from .conftest import serving

    (tmp_path / "opsdeps.py").write_text(APP)
    (tmp_path / "cases.yaml").write_text(CASES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with serving([]) as server:
        server.default = _whoami
        monkeypatch.setenv("OPS_URL", server.base_url)
        command = ["eval", "cases.yaml", "--agent", "opsdeps:agent"]
        assert main([*command, "--deps", "opsdeps:for_case"]) == 0
        assert main([*command, "--deps", "opsdeps"]) == 2
    assert "a function (case) -> deps" in capsys.readouterr().err
