"""A tool the provider's own tool search found, then paused, decided in another process.

SPEC 22 (native search) x SPEC 17: Claude's BM25 tool search references a deferred tool that
needs approval and calls it in the same reply; the run pauses. Another process rebuilds the
agent over the store and approves: the continuation sends the provider's search blocks back in
place and the referenced tool's definition (the fake server answers the API's 400 ``Tool
reference ... has no corresponding tool definition`` otherwise), and the call runs once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentloop import Agent, Approve, tool
from agentloop.providers.settings import Settings, build_client
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall
from agentloop.toolsets import FunctionToolset

SENT: list[str] = []


@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email message."""
    SENT.append(to)
    return f"sent to {to}"


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def built(server: FakeProviderServer, db: Path) -> Agent[Any]:
    settings = Settings(provider="anthropic", model="claude-sonnet-4-5", api_key="sk-ant-x",
                        base_url=server.root_url, max_retries=0)  # fmt: skip
    office = FunctionToolset([send_email], name="office").deferred()
    return Agent(build_client(settings), tools=[echo], toolsets=[office], store=SQLiteStore(db))


async def test_a_natively_found_tool_paused_is_decided_elsewhere(tmp_path: Path) -> None:
    SENT.clear()
    db = tmp_path / "s.db"
    first = FakeReply(
        tool_search={"query": "email", "found": ["send_email"]},
        tool_calls=(FakeToolCall("send_email", {"to": "ada", "body": "hi"}),),
    )
    async with FakeProviderServer([first, FakeReply("Sent.")]) as server:
        agent = built(server, db)
        run = await agent.run("mail ada")
        assert [p.call.name for p in run.pending] == ["send_email"]
        assert run.loaded_tools == ["send_email"]
        elsewhere = built(server, db).session(agent.session_id)
        done = await elsewhere.continue_run(decisions={run.pending[0].id: Approve()})
        await agent.aclose()
    assert done.output == "Sent." and SENT == ["ada"]
    later = server.requests[1]
    tools = {t["name"]: t for t in later["tools"]}
    assert "send_email" in tools  # its definition goes with every request that references it
    assert [b["type"] for b in later["messages"][1]["content"]][:2] == [
        "server_tool_use",
        "tool_search_tool_result",
    ]
