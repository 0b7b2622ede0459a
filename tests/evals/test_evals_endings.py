"""A case whose run pauses or waits fails, and its run ends (SPEC 17, 23, 25): none is left.

Nobody decides or polls an evaluated run, so a paused or waiting one is ended ``Cancelled``
(``cancel_run``) once its case has failed: the store does not keep it ``paused``/``waiting``
(where a later approval or ``agentloop batch poll`` would run its tools for a case already
reported), and the agent does not keep a case's stateless session alive. The batch leg runs
the real OpenAI adapter against the fake server's batch API, with a real SQLite store.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.engine.session import Session
from agentloop.errors import InvalidInput
from agentloop.evals import Case, Dataset, Equals
from agentloop.events import Event, RunFinished
from agentloop.model import ModelRequest
from agentloop.observers import Observer
from agentloop.pausing import Approve
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FunctionModel, call

WIPED: list[str] = []


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Wipe a path."""
    WIPED.append(path)
    return "wiped"


def wiping(request: ModelRequest) -> Any:
    return call("wipe", {"path": "/"}) if request.messages[-1].role == "user" else "done"


def live_sessions() -> int:
    gc.collect()
    return sum(isinstance(o, Session) for o in gc.get_objects())


async def test_a_paused_case_run_is_ended_cancelled_and_let_go() -> None:
    WIPED.clear()
    ended: list[Any] = []

    class Ends(Observer):
        def on_event(self, event: Event) -> None:
            if isinstance(event, RunFinished) and not event.run.paused:
                ended.append(event.run)

    async with Agent(FunctionModel(wiping), tools=[wipe], observers=[Ends()]) as agent:
        before = live_sessions()
        cases = [Case(name=f"c{n}", inputs=f"clean up {n}") for n in range(3)]
        report = await Dataset(cases=cases).evaluate(agent)
        assert [c.error for c in report.cases] == ["RunPaused"] * 3
        assert live_sessions() <= before  # the agent keeps no session per paused case
        assert sorted(r.id for r in ended) == sorted(c.run_ids[0] for c in report.cases)
        assert all(r.stop_reason is not None and r.stop_reason.is_cancelled() for r in ended)
        first = ended[0]
        call_id = first.turns[-1].tool_calls[0].id
        with pytest.raises(InvalidInput):  # a late approval finds nothing to run
            await agent.session(first.session_id).continue_run(decisions={call_id: Approve()})
    assert WIPED == []


async def test_a_waiting_case_run_is_ended_cancelled(tmp_path: Path) -> None:
    from agentloop.providers.openai import OpenAIClient

    async with FakeProviderServer(default=FakeReply("x"), batch_after=3600) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        with SQLiteStore(tmp_path / "s.db") as store:
            agent = Agent(client, store=store, config=RunConfig(batch=True))
            dataset = Dataset(cases=[Case(name="later", inputs="hi")], evaluators=[Equals("x")])
            report = await dataset.evaluate(agent)
            await agent.aclose()
            [stored] = store.load_runs()
    (case,) = report.cases
    assert case.error == "RunWaiting" and case.run_ids == [stored.run.id]
    assert stored.finished and stored.run.waiting is None
    assert stored.run.stop_reason is not None and stored.run.stop_reason.is_cancelled()
