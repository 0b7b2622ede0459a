"""An MCP server whose tools ask the client's user for input (elicitation), for agentloop's tests.

stdio by default, streamable HTTP with ``--http PORT``. ``book`` asks a form question and says
what came back; ``ask_forever`` asks and leaves marks in ``MARKER_DIR`` (env): ``asking`` once
the question is out, ``cancelled`` when the client cancelled the call; ``ask_stubbornly`` does
not withdraw its question when cancelled (``stubborn-<action>`` once answered); ``ask_raw``
asks with any schema; ``capabilities`` says whether the client advertised elicitation;
``open_page`` asks in URL mode.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

MARKERS = Path(os.environ.get("MARKER_DIR", "."))

server = MCPServer("eliciting")


class Booking(BaseModel):
    """What ``book`` asks for."""

    guests: int = Field(ge=1, le=12, description="How many people")
    confirm: bool = Field(description="Book the table?")
    note: str = Field(default="", description="Anything the restaurant should know")


@server.tool()
async def book(day: str, ctx: Context) -> str:
    """Book a table on a day, asking the user how many guests."""
    answer = await ctx.elicit(f"Book a table on {day}?", schema=Booking)
    if answer.action == "accept":
        data = answer.data
        return f"booked {day} for {data.guests} (confirm={data.confirm}, note={data.note!r})"
    return f"not booked: {answer.action}"


@server.tool()
async def ask_forever(ctx: Context) -> str:
    """Ask a question and wait for the answer, leaving marks as it goes."""
    (MARKERS / "asking").write_text("asking")
    try:
        answer = await ctx.elicit("Still there?", schema=Booking)
    except anyio.get_cancelled_exc_class():
        (MARKERS / "cancelled").write_text("cancelled")
        raise
    return f"answered: {answer.action}"


@server.tool()
async def ask_stubbornly(ctx: Context) -> str:
    """Ask, and keep asking when the client cancels the call (the question is not withdrawn)."""
    with anyio.CancelScope(shield=True):
        answer = await ctx.elicit("Are you sure?", schema=Booking)
    (MARKERS / f"stubborn-{answer.action}").write_text(answer.action)
    return f"answered: {answer.action}"


@server.tool()
async def ask_raw(schema: str, ctx: Context) -> str:
    """Ask with the JSON Schema given as text, as it is (no checks); say what came back."""
    session = ctx.request_context.session
    result = await session.elicit_form("Raw question", json.loads(schema), ctx.request_id)
    return json.dumps({"action": result.action, "content": result.content}, sort_keys=True)


@server.tool()
async def capabilities(ctx: Context) -> str:
    """Whether the client advertised the elicitation capability."""
    declared = ctx.request_context.session.client_capabilities
    advertised = declared is not None and declared.elicitation is not None
    return f"elicitation advertised: {advertised}"


@server.tool()
async def open_page(ctx: Context) -> str:
    """Ask in URL mode (the user would open a page)."""
    answer = await ctx.elicit_url("Sign in, please", "https://example.invalid/login", "e-1")
    return f"url: {answer.action}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
