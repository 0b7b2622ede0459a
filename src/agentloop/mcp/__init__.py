"""MCP servers as tools (extra ``mcp``): ``MCPServer.stdio`` and ``MCPServer.http``.

``app`` serves an agent as an MCP server (``MCPApp``, ``serve_stdio``). ``server`` is the tool
source, ``connection`` the one MCP session behind it, ``mapping`` the pure
logic that turns MCP tools and results into ours, ``elicitation`` the answers to a server's
questions for the user. ``MCPServer`` here is *our* tool source; the official SDK's own server
class is ``mcp.server.Server`` (used to write a server, not to use one).
"""

from agentloop.mcp.app import MCPApp, serve_stdio
from agentloop.mcp.elicitation import (
    Elicitation,
    ElicitationAnswer,
    ElicitationRequest,
)
from agentloop.mcp.server import (
    MCPServer,
    restart_delay,
)

__all__ = [
    "Elicitation",
    "ElicitationAnswer",
    "ElicitationRequest",
    "MCPApp",
    "MCPServer",
    "restart_delay",
    "serve_stdio",
]
