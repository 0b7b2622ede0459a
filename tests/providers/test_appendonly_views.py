"""A filtered receiver's tool change on the append-only twin, through a pause and a store.

The receiver of a filtered handoff runs a conversation of its own (SPEC 26, 28); a tool its
toolset adds mid-run is an entry of that conversation. The twin binds each thinking block to its
prefix, so the receiver's request after a pause, continued by another ``Agent`` over the same
SQLite file, is refused unless the entry is sent again exactly where it was. The session's
next run must carry none of it: its history goes on against its own base, with no entry for a
tool it never offered and no removal of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentloop import Agent, Approve, RunConfig, RunContext, handoff, tool
from agentloop.handoffs import remove_tool_calls
from agentloop.model import ModelSettings, ToolSpec
from agentloop.providers.settings import Settings, build_client
from agentloop.store import SQLiteStore
from agentloop.toolsets import FunctionToolset

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

KEY = "sk-ant-twin-0123456789"
MODEL = "claude-fable-5-1"
CONFIG = RunConfig(model_settings=ModelSettings(reasoning_effort="low"))

files = FunctionToolset(name="files")


@files.tool
def look(path: str) -> str:
    """Look at a file."""
    return f"contents of {path}"


@files.tool
def erase(path: str) -> str:
    """Erase a file."""
    return f"erased {path}"


@tool
def read(page: int) -> str:
    """Read a page."""
    return f"page {page}"


def late_erase(ctx: RunContext[Any], spec: ToolSpec) -> bool:
    return spec.name != "erase" or ctx.turn >= 3  # offered from the receiver's second call on


def step(n: int, name: str, arguments: dict[str, Any]) -> TwinReply:
    return TwinReply([twin.thinking(f"s{n}"), twin.tool_use(name, arguments, f"toolu_{n}")])


def build(server: AnthropicTwin, store: SQLiteStore, session_id: str | None = None) -> Agent[Any]:
    client = build_client(
        Settings(provider="anthropic", model=MODEL, api_key=KEY, base_url=server.url)
    )
    tools = files.filtered(late_erase).approval_required(lambda c, s, a: s.name == "erase")
    billing = Agent(client, name="billing", instructions="You keep files.", toolsets=[tools])
    return Agent(
        client,
        instructions="You route.",
        tools=[read],
        handoffs=[handoff(billing, input_filter=remove_tool_calls)],
        config=CONFIG,
        store=store,
        session_id=session_id,
    )


def system_entries(body: dict[str, Any]) -> list[Any]:
    return [m for m in body["messages"] if m["role"] == "system"]


async def test_the_receivers_entry_survives_its_pause_and_stays_out_of_the_session(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    script = [
        step(0, "read", {"page": 1}),
        step(1, "transfer_to_billing", {}),
        step(2, "look", {"path": "a"}),
        step(3, "erase", {"path": "a"}),  # pauses: erase needs approval
        TwinReply([twin.thinking("done"), twin.text("erased")]),
        step(5, "read", {"page": 2}),
        TwinReply([twin.thinking("two"), twin.text("two")]),
    ]
    async with AnthropicTwin(script) as server:
        paused = await build(server, store, "s1").run("erase a")
        assert paused.paused and paused.last_agent == "billing"
        later = build(server, store).session("s1")  # another process, the same file
        done = await later.continue_run(decisions={paused.pending[0].id: Approve()})
        again = await later.run("page two")
    assert (done.output, again.output) == ("erased", "two")
    assert server.rejected == []  # the receiver's thinking went back after the same prefix
    requests = server.requests
    assert len(requests) == 7
    billing = requests[2:5]
    assert [t["name"] for t in billing[0]["tools"]] == ["look"]  # the receiver's base
    change = json.dumps(system_entries(billing[1]))
    assert "tool_addition" in change and "erase" in change  # its change, an entry
    assert system_entries(billing[2]) == system_entries(billing[1])  # after the pause: again
    session = requests[5:]  # the session's own conversation again
    assert all(system_entries(b) == [] for b in session)  # no entry of the receiver's
    assert "tool_removal" not in json.dumps(session)  # nor a removal of its tool
    assert "tool_addition" not in json.dumps(session)
    assert {json.dumps(b["tools"]) for b in session} == {json.dumps(requests[0]["tools"])}
    stored = store.load_history("s1")
    assert [m.role for m in stored].count("system") == 1  # the session's base alone
