"""MCP servers as tools (extra ``mcp``): ``MCPServer.stdio`` and ``MCPServer.http``.

``server`` is the tool source, ``connection`` the one MCP session behind it, ``mapping`` the pure
logic that turns MCP tools and results into ours. ``MCPServer`` here is *our* tool source; the
official SDK's own server class is ``mcp.server.Server`` (used to write a server, not to use one).
"""

from agentloop.mcp.server import (
    MCPServer,
    restart_delay,
)

__all__ = [
    "MCPServer",
    "restart_delay",
]
