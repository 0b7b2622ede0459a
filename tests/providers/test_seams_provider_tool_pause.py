"""A turn with a server-side web search and a call that waits for approval (SPEC 24 x 17).

The paused turn's assistant message holds the provider's own blocks; decided in another
process (``Agent.resume`` over the store), the continuation sends them back unchanged and in
place, so the Anthropic twin (which rejects a turn whose server-tool blocks changed or
vanished, as the API does) accepts it; the approved call runs once.
"""

from __future__ import annotations

from pathlib import Path

from agentloop import Agent, Approve, tool
from agentloop.provider_tools import WebSearch
from agentloop.store.sqlite import SQLiteStore

from .test_provider_tools import anthropic
from .twins import anthropic as twin
from .twins import anthropic_server_tools as st
from .twins.anthropic import AnthropicTwin, TwinReply

DONE: list[str] = []


@tool(requires_approval=True)
def book(city: str) -> str:
    """Book a trip."""
    DONE.append(city)
    return f"booked {city}"


async def test_a_paused_search_turn_decided_elsewhere_sends_its_blocks_back(tmp_path: Path) -> None:
    DONE.clear()
    search = TwinReply(
        [
            st.server_tool_use("web_search", {"query": "oslo"}, "srvtoolu_1"),
            st.web_search_result("srvtoolu_1", [("https://o.example", "Oslo")]),
            st.cited_text("Oslo is nice.", "https://o.example", "Oslo"),
            twin.tool_use("book", {"city": "Oslo"}),
        ],
        "tool_use",
    )
    db = tmp_path / "s.db"
    async with AnthropicTwin([search, TwinReply([twin.text("Booked.")])]) as server:
        agent = Agent(anthropic(server.url), tools=[book], provider_tools=[WebSearch()],
                      store=SQLiteStore(db))  # fmt: skip
        run = await agent.run("book me oslo")
        assert [p.call.name for p in run.pending] == ["book"]
        elsewhere = Agent.resume(
            agent.session_id, store=SQLiteStore(db), client=anthropic(server.url),
            tools=[book], provider_tools=[WebSearch()],
        )  # fmt: skip
        done = await elsewhere.continue_run(decisions={run.pending[0].id: Approve()})
    assert server.rejected == [] and done.output == "Booked." and DONE == ["Oslo"]
    sent = [b for b in server.requests[1]["messages"][1]["content"] if st.is_server(b)]
    assert [b["type"] for b in sent] == ["server_tool_use", "web_search_tool_result"]
    assert done.usage.provider_tool_calls == {"web_search": 1}
