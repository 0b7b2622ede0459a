"""Property: whatever the pending set, the decisions, bad sets tried first, repeats and a switch
of process between pause and continue, every approved call runs exactly once, every denied or
external call never, and the committed transcript stays valid to send (SPEC 17)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import Agent, Answer, Approve, Deny, Edit, tool
from agentloop.errors import InvalidInput
from agentloop.messages import Message, ToolCallPart
from agentloop.model import ModelResponse
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, reply
from agentloop.transcript import validate_transcript

KINDS = st.sampled_from(["plain", "approval", "external"])


def tools(ledger: list[str]) -> list[Any]:
    @tool
    def plain(n: int) -> str:
        """A plain tool."""
        ledger.append(f"plain{n}")
        return "ok"

    @tool(requires_approval=True)
    def approval(n: int) -> str:
        """A tool that needs approval."""
        ledger.append(f"approval{n}")
        return "ok"

    @tool(external=True)
    def external(n: int) -> str:
        """An external tool."""
        ledger.append(f"external{n}")
        return "never"

    return [plain, approval, external]


def turn(kinds: list[str]) -> ModelResponse:
    parts = tuple(ToolCallPart(f"c{i}", k, {"n": i}) for i, k in enumerate(kinds))
    return ModelResponse(Message("assistant", parts), stop_reason="tool_use")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(KINDS, min_size=1, max_size=4).filter(lambda k: set(k) != {"plain"}),
    choices=st.lists(st.integers(0, 2), min_size=4, max_size=4),
    bad_first=st.booleans(),
    switch=st.booleans(),
    repeat=st.booleans(),
)
def test_decided_calls_run_at_most_once(
    kinds: list[str], choices: list[int], bad_first: bool, switch: bool, repeat: bool
) -> None:
    asyncio.run(_scenario(kinds, choices, bad_first, switch, repeat))


async def _scenario(
    kinds: list[str], choices: list[int], bad_first: bool, switch: bool, repeat: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "runs.db")
        ledger: list[str] = []
        agent = Agent(
            ScriptedModel([turn(kinds), reply("done")]),
            tools=tools(ledger),
            store=store,
            session_id="s",
        )
        run = await agent.run("go")
        assert run.paused
        assert ledger == [f"plain{i}" for i, k in enumerate(kinds) if k == "plain"]
        decisions, approved = _decisions(kinds, choices)
        if bad_first:
            await _refused(agent, dict(list(decisions.items())[1:]) or {"nope": Approve()})
            assert run.paused and run.decisions == []
        if switch:
            agent = Agent.resume(
                "s", store=store, client=ScriptedModel([reply("done")]), tools=tools(ledger)
            )
        done = await agent.continue_run(decisions=decisions)
        assert done.output == "done" and not done.paused
        if repeat:
            await _refused(agent, decisions)
        ran = [x for x in ledger if not x.startswith("plain")]
        assert sorted(ran) == sorted(approved)
        assert not any(x.startswith("external") for x in ledger)
        validate_transcript(store.load_history("s"))
        validate_transcript(agent.history)


def _decisions(kinds: list[str], choices: list[int]) -> tuple[dict[str, Any], list[str]]:
    """A decision per pending call, picked by ``choices``; and the calls that should run."""
    decisions: dict[str, Any] = {}
    approved: list[str] = []
    for i, k in enumerate(kinds):
        pick = choices[i]
        if k == "approval":
            decisions[f"c{i}"] = [Approve(), Deny("no"), Edit({"n": i})][pick]
            if pick != 1:
                approved.append(f"approval{i}")
        elif k == "external":
            decisions[f"c{i}"] = [Answer("a"), Deny(), Answer({"x": 1})][pick]
    return decisions, approved


async def _refused(agent: Agent[Any], decisions: dict[str, Any]) -> None:
    try:
        await agent.continue_run(decisions=decisions)
    except InvalidInput:
        return
    raise AssertionError(f"the decision set {decisions} was accepted")
