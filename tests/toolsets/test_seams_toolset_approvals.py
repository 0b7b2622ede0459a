"""An approval for a toolset's tool is never spent on nothing (SPEC 17 x SPEC 22).

A run paused on a call to a tool of ``Agent(toolsets=...)`` may be decided by an agent whose
toolsets resolve differently: another process after a deploy, a worker or a face built with
other toolsets, a filter or a dynamic toolset that no longer offers the tool. Approving the
call there is ``InvalidInput`` naming the tool, nothing recorded, the run still paused; the
same decision with the toolset that has the tool still runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, Deny, tool
from agentloop.engine.pause import check_continuable
from agentloop.errors import InternalError, InvalidInput
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import AbstractToolset, DynamicToolset, FunctionToolset

WIPED: list[str] = []


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Wipe a path."""
    WIPED.append(path)
    return f"wiped {path}"


@tool
def other() -> str:
    """Another tool."""
    return "x"


def admin() -> FunctionToolset:
    return FunctionToolset([wipe], name="admin")


ELSEWHERE: dict[str, Callable[[], list[AbstractToolset]]] = {
    "another static toolset": lambda: [FunctionToolset([other], name="misc")],
    "the toolset prefixed": lambda: [admin().prefixed("fs")],
    "a filter that drops it": lambda: [admin().filtered(lambda ctx, spec: spec.name != "wipe")],
    "a dynamic toolset without it": lambda: [DynamicToolset(lambda ctx: [other])],
}


async def paused(db: Path) -> tuple[Agent[Any], str]:
    agent = Agent(
        ScriptedModel([call("wipe", {"path": "a"})]), store=SQLiteStore(db), toolsets=[admin()]
    )
    run = await agent.run("go")
    assert [p.call.name for p in run.pending] == ["wipe"]
    return agent, run.pending[0].id


@pytest.mark.parametrize("toolsets", ELSEWHERE.values(), ids=ELSEWHERE.keys())
async def test_approving_where_the_toolsets_lack_the_tool_is_refused(
    tmp_path: Path, toolsets: Callable[[], list[AbstractToolset]]
) -> None:
    WIPED.clear()
    db = tmp_path / "s.db"
    agent, call_id = await paused(db)
    model = ScriptedModel([reply("done")])
    elsewhere = Agent(model, store=SQLiteStore(db), toolsets=toolsets()).session(agent.session_id)
    with pytest.raises(InvalidInput, match=r"would run tool 'wipe'.*stays paused"):
        await elsewhere.continue_run(decisions={call_id: Approve()})
    stored = SQLiteStore(db).load_run(elsewhere.runs[-1].id)
    assert stored is not None and stored.run.pending and not stored.run.decisions
    assert model.requests == [] and WIPED == []
    # the run can still be decided where the tool is
    here = Agent(model, store=SQLiteStore(db), toolsets=[admin()]).session(agent.session_id)
    done = await here.continue_run(decisions={call_id: Approve()})
    assert done.output == "done" and WIPED == ["a"]


@pytest.mark.parametrize("toolsets", ELSEWHERE.values(), ids=ELSEWHERE.keys())
async def test_a_deny_needs_no_tool(
    tmp_path: Path, toolsets: Callable[[], list[AbstractToolset]]
) -> None:
    db = tmp_path / "s.db"
    agent, call_id = await paused(db)
    model = ScriptedModel([reply("ok")])
    elsewhere = Agent(model, store=SQLiteStore(db), toolsets=toolsets()).session(agent.session_id)
    done = await elsewhere.continue_run(decisions={call_id: Deny()})
    assert done.output == "ok"


async def test_a_face_s_check_refuses_a_static_toolset_without_the_tool(tmp_path: Path) -> None:
    """The check every face runs first (CLI, viewer, A2A, Temporal) names the tool too."""
    db = tmp_path / "s.db"
    agent, call_id = await paused(db)
    run = SQLiteStore(db).load_run(agent.runs[-1].id)
    assert run is not None
    face = Agent(ScriptedModel([]), toolsets=[FunctionToolset([other], name="misc")])
    with pytest.raises(InvalidInput, match="would run tool 'wipe'"):
        await check_continuable(face, run.run.pending, {call_id: Approve()})
    await check_continuable(Agent(ScriptedModel([]), toolsets=[admin()]), run.run.pending,
                            {call_id: Approve()})  # fmt: skip


class Breaking(AbstractToolset):
    """The admin toolset until ``broken``; then its own bug raises."""

    def __init__(self) -> None:
        self.inner, self.broken, self.name = admin(), False, "breaking"

    async def entries(self, scope: Any) -> Any:
        if self.broken:
            raise RuntimeError("boom")
        return await self.inner.entries(scope)


async def test_a_toolset_s_own_bug_while_checking_ends_typed() -> None:
    toolset = Breaking()
    agent = Agent(ScriptedModel([call("wipe", {"path": "a"}), reply("done")]), toolsets=[toolset])
    run = await agent.run("go")
    toolset.broken = True
    with pytest.raises(InternalError, match="RuntimeError"):
        await agent.continue_run(decisions={run.pending[0].id: Approve()})
