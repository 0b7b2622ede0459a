"""A tool found by tool search, then paused, decided in another process (SPEC 22 x 17 x 28).

On the twin of an append-only Claude: run 1 searches, loads a deferred tool that needs
approval and calls it; the run pauses. Another process (``Agent.resume`` over the store, the
agent built again) approves it: the continuation and the session's next run send the same
top-level ``system`` and ``tools`` as before, the loaded tool is still offered, its thinking
blocks go back unchanged (no prefix failure), and the approved call runs once.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentloop import Agent, Approve, tool
from agentloop.store.sqlite import SQLiteStore

from .test_appendonly_seams import CONFIG, answer, client_of, encoded, step
from .twins.anthropic import AnthropicTwin

ARCHIVED: list[str] = []


@tool(defer_loading=True, requires_approval=True)
def archive(path: str) -> str:
    """Archive a file into cold storage."""
    ARCHIVED.append(path)
    return f"archived {path}"


@tool
def look(path: str) -> str:
    """Look at a file."""
    return f"{path}: 3 lines"


def agent_on(server: AnthropicTwin, db: Path) -> Agent[Any]:
    config = replace(CONFIG, tool_search="local")
    return Agent(client_of(server), instructions="You keep files.", tools=[look, archive],
                 config=config, store=SQLiteStore(db))  # fmt: skip


async def test_a_searched_tool_paused_and_decided_elsewhere_keeps_the_prefix(
    tmp_path: Path,
) -> None:
    ARCHIVED.clear()
    db = tmp_path / "s.db"
    script = [
        step(1, 0, "look", {"path": "a"}),
        step(1, 1, "search_tools", {"query": "archive cold storage", "limit": 1}),
        step(1, 2, "archive", {"path": "a"}),
        answer("one"),
        step(2, 0, "archive", {"path": "b"}),
        answer("two"),
    ]
    async with AnthropicTwin(script) as server:
        agent = agent_on(server, db)
        run = await agent.run("archive a")
        assert [p.call.name for p in run.pending] == ["archive"]
        assert run.loaded_tools == ["archive"]
        elsewhere = agent_on(server, db).session(agent.session_id)
        assert "archive" in elsewhere.loaded_tools
        done = await elsewhere.continue_run(decisions={run.pending[0].id: Approve()})
        later = await elsewhere.run("archive b")
        assert later.pending and later.pending[0].call.name == "archive"
        last = await elsewhere.continue_run(decisions={later.pending[0].id: Approve()})
    assert done.output == "one" and last.output == "two" and ARCHIVED == ["a", "b"]
    assert server.rejected == []
    assert len({encoded(b, "system") for b in server.requests}) == 1
    assert len({encoded(b, "tools") for b in server.requests}) == 1
    offered = json.dumps(server.requests[-1]["messages"])
    assert '"archive"' in offered  # the loaded tool travels as an entry, not a new base
