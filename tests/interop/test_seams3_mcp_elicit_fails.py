"""An MCP client whose elicitation fails while the served agent waits on an approval (SPEC 26 x 17).

``MCPApp`` asks a pending call's decision through elicitation when the client has it. When the
client's elicitation handler fails (the official client answers the request with a JSON-RPC
error), the call's failure left ``_Call`` as an exception: the MCP client got a JSON-RPC error
carrying its own handler's text instead of the ``isError`` result every other failure is. Now
it reads as a client that cannot decide: ``isError`` ``agent '<name>' paused: '<tool>' needs a
decision this client cannot give``, and the run is ended ``Cancelled`` (stored so) without
running the call: no approval is made up. Official ``mcp`` client over streamable HTTP on
127.0.0.1; the run kept in a real ``SQLiteStore``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types

from agentloop import Agent, tool
from agentloop.errors import Cancelled
from agentloop.mcp import MCPApp
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import ScriptedModel, call

from .test_mcp_app import over_http, text

BOOKED: list[str] = []


@tool(requires_approval=True)
def book(city: str) -> str:
    """Book a trip."""
    BOOKED.append(city)
    return f"booked {city}"


async def failing(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise RuntimeError("the approval dialog crashed")


async def test_a_failed_elicitation_is_a_decision_this_client_cannot_give(tmp_path: Path) -> None:
    BOOKED.clear()
    with SQLiteStore(tmp_path / "runs.db") as store:
        model = ScriptedModel([call("book", {"city": "Oslo"}), call("book", {"city": "Oslo"})])
        app = MCPApp(Agent(model, tools=[book], store=store), name="travel")
        async with over_http(app, elicitation_callback=failing) as session:
            result = await session.call_tool("travel", {"input": "book Oslo"})
            again = await session.call_tool("travel", {"input": "book Oslo"})  # still serving
        [first, second] = store.load_runs()
    assert result.is_error and again.is_error
    said = "agent 'travel' paused: 'book' needs a decision this client cannot give"
    assert text(result) == said == text(again)
    assert BOOKED == []
    assert isinstance(first.run.stop_reason, Cancelled) and not first.run.paused
    assert isinstance(second.run.stop_reason, Cancelled)
