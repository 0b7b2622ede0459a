"""An agent with a real MCP server's tools and a sub-agent, over the real OpenAI adapter.

Offline: it writes a small MCP server (the ``mcp`` SDK's own ``MCPServer``, run over stdio) to a
temporary directory and starts agentloop's fake OpenAI-compatible server on 127.0.0.1, whose
scripted model plays both agents. The lead adds a note through the MCP server, then asks a
``summarizer`` sub-agent (``agent.as_tool``), which reads the notes through the same server.
Both agents stop the server when their ``async with`` blocks end.
Run: ``.venv/bin/python examples/mcp_agent.py`` (needs the ``mcp`` extra).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from agentloop import Agent, Observer
from agentloop import events as ev
from agentloop.mcp import MCPServer
from agentloop.providers import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

NOTES_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")
notes: list[str] = []


@server.tool()
def add_note(text: str) -> str:
    """Add a note."""
    notes.append(text)
    return f"note {len(notes)} added"


@server.tool()
def list_notes() -> list[str]:
    """Every note, oldest first."""
    return notes


server.run()
'''

SCRIPT = [
    FakeReply(  # the lead
        tool_calls=[
            FakeToolCall("notes_add_note", {"text": "buy milk"}),
            FakeToolCall("summarizer", {"input": "Summarise my notes in one line."}),
        ]
    ),
    FakeReply(tool_calls=[FakeToolCall("notes_list_notes")]),  # the summarizer
    FakeReply("One note: buy milk."),  # the summarizer's answer
    FakeReply("Noted. Your notes, in short: one note, buy milk."),  # the lead's answer
]


class ShowToolCalls(Observer):
    """Print every tool call, the sub-agent's included (``event.path`` names it)."""

    def on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.ToolCallFinished):
            who = "/".join(event.path) or "lead"
            print(f"  [{who}] {event.call.name} -> {event.result.content!r}")


async def main() -> None:
    script = Path(tempfile.mkdtemp()) / "notes_server.py"
    script.write_text(NOTES_SERVER)
    notes = MCPServer.stdio(sys.executable, [str(script)], name="notes", prefix="notes")
    async with FakeProviderServer(SCRIPT) as fake:
        summarizer = Agent(
            OpenAIClient("fake-model", base_url=fake.base_url, api_key="offline"),
            tools=[notes],
            system="You summarise notes.",
        )
        lead = Agent(
            OpenAIClient("fake-model", base_url=fake.base_url, api_key="offline"),
            tools=[notes, summarizer.as_tool(name="summarizer", description="Summarises notes.")],
            observers=[ShowToolCalls()],
        )
        async with summarizer, lead:
            print("tool calls:")
            run = await lead.run("Remember to buy milk, then tell me what my notes say.")
    print("answer:", run.output)
    usage = run.usage  # the summarizer's counts in the lead's
    print(f"usage, both agents: {usage.input_tokens} tokens in, {usage.output_tokens} out")


if __name__ == "__main__":
    asyncio.run(main())
