"""A small MCP server for agentloop's tests: one tool per fault (stdio, or HTTP with --http PORT).

``MARKER_DIR`` (env) is where the server leaves marks the tests read: ``hanging-<tag>`` while
a ``hang`` call waits, ``cancelled-<tag>`` once the client cancelled it, ``started`` with its
pid. ``FAIL_START`` (env) or a ``fail-start`` file there makes it exit at once with that text
on stderr; ``SLOW_START`` (env, seconds) delays its start.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

MARKERS = Path(os.environ.get("MARKER_DIR", "."))

if os.environ.get("SLOW_START"):
    time.sleep(float(os.environ["SLOW_START"]))
_refusal = os.environ.get("FAIL_START") or (
    (MARKERS / "fail-start").read_text() if (MARKERS / "fail-start").exists() else ""
)
if _refusal:
    print(f"faulty: cannot start: {_refusal}", file=sys.stderr, flush=True)
    sys.exit(2)

server = MCPServer("faulty")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def refuse(why: str) -> str:
    """Fail with the server's own error text (isError)."""
    raise ToolError(f"refused: {why}")


@server.tool()
def protocol_error() -> str:
    """Answer with a JSON-RPC error."""
    raise MCPError(code=-32001, message="backend quota exceeded")


@server.tool()
def own_error() -> str:
    """Answer with JSON-RPC error -32000, which some servers use for a tool's own failure."""
    raise MCPError(code=-32000, message="rate limited, try again in a minute")


@server.tool()
def crash() -> str:
    """Die mid-call."""
    print("faulty: crashing now", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
async def hang(tag: str) -> str:
    """Never answer; leave a mark when under way and when cancelled."""
    (MARKERS / f"hanging-{tag}").write_text("hanging")
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        (MARKERS / f"cancelled-{tag}").write_text("cancelled")
        raise
    return "woke"


@server.tool()
async def block(seconds: float) -> str:
    """Block the whole server (its event loop too), so it cannot notice its stdin closing."""
    time.sleep(seconds)  # noqa: ASYNC251 - blocking the loop is the point
    return "unblocked"


@server.tool()
def big(size: int) -> str:
    """A huge result."""
    return "x" * size


@server.tool()
def picture() -> Image:
    """A 16-byte PNG 'image': its signature and the start of a header."""
    return Image(data=b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", format="png")


@server.tool()
def weather(city: str) -> dict[str, object]:
    """Structured content."""
    return {"city": city, "celsius": 21}


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named 'late' and tell the client the list changed."""
    server.add_tool(late)
    await ctx.session.send_tool_list_changed()
    return "grown"


def late() -> str:
    """A tool that appears after grow()."""
    return "late tool"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


if __name__ == "__main__":
    if "MARKER_DIR" in os.environ:
        (MARKERS / "started").write_text(str(os.getpid()))
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
