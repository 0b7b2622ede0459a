"""A sub-agent's paused call on an append-only conversation (SPEC 17 x 26 x 28), on the twin.

The parent calls a child agent (``as_tool``) whose tool needs approval: the parent pauses with
the child. The decision comes to agents built again over the same SQLite store (another
process's view), whose prompts have changed since. The child's continued request extends its
paused one and the parent's extends its own: each conversation keeps its base, the
continuations reuse the stored instructions, and no thinking block is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentloop import Agent, Approve, tool
from agentloop.store import SQLiteStore

from .test_seams5_appendonly_retry import CONFIG, answer, one_conversation, twin_client
from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

WIRED: list[int] = []


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Wire money."""
    WIRED.append(amount)
    return f"wired {amount}"


def parent_of(server: AnthropicTwin, store: SQLiteStore, version: int) -> Agent[Any]:
    """The parent (version 1: new; later: ``Agent.resume`` over the store) and its child."""
    client = twin_client(server)
    child = Agent(client, name="banker", instructions=f"You move money. v{version}",
                  tools=[wire], config=CONFIG)  # fmt: skip
    banker = child.as_tool(name="banker", description="Moves money.")
    options: dict[str, Any] = {"instructions": f"You pay bills. v{version}", "tools": [banker]}
    if version > 1:
        return Agent.resume("top", store=store, client=client, config=CONFIG, **options)
    return Agent(client, config=CONFIG, store=store, session_id="top", **options)


async def test_a_childs_pause_decided_by_agents_built_again_keeps_both_prefixes(
    tmp_path: Path,
) -> None:
    WIRED.clear()
    script = [
        TwinReply([twin.thinking("p"), twin.tool_use("banker", {"input": "pay 5"})], "tool_use"),
        TwinReply([twin.thinking("c"), twin.tool_use("wire", {"amount": 5})], "tool_use"),
        answer("child done"),
        answer("paid"),
        TwinReply([twin.thinking("p2"), twin.tool_use("banker", {"input": "pay 6"})], "tool_use"),
        TwinReply([twin.thinking("c2"), twin.tool_use("wire", {"amount": 6})], "tool_use"),
        answer("child done again"),
        answer("paid again"),
    ]
    async with AnthropicTwin(script) as server:
        with SQLiteStore(tmp_path / "runs.db") as store:
            before = parent_of(server, store, 1)  # held, then closed: an agent dropped while
            run = await before.run("pay the bill")  # the loop runs leaves its pool to the GC
            assert [p.call.name for p in run.pending] == ["wire"]
            again = parent_of(server, store, 2)
            done = await again.continue_run(decisions={run.pending[0].id: Approve()})
            later = await again.run("pay another")
            last = await again.continue_run(decisions={later.pending[0].id: Approve()})
            await before.aclose()
            await again.aclose()
    assert (done.output, last.output) == ("paid", "paid again") and WIRED == [5, 6]
    assert server.rejected == []
    parent = [b for b in server.requests if "You pay bills." in json.dumps(b["system"])]
    child = [b for b in server.requests if b not in parent]
    assert len(parent) == 4 and len(child) == 4
    one_conversation(parent)
    for first, second in (child[:2], child[2:]):  # each call: a fresh child conversation
        one_conversation([first, second])
    assert "v2" in json.dumps(parent[-1]["messages"])  # the later run's prompt, an entry
