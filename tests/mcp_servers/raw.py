"""A hand-written stdio MCP server that answers ``tools/call`` with a bare JSON-RPC ``result``.

The SDK cannot be made to send a malformed answer, so this one speaks the wire by hand: it
initializes like any server, lists one tool, ``number``, and answers every call with the
``result`` given as JSON in ``RAW_RESULT`` (env; ``5`` by default), which need not be an object.
"""

from __future__ import annotations

import json
import os
import sys

TOOL = {
    "name": os.environ.get("RAW_TOOL_NAME", "number"),
    "description": "Answers with a bare result.",
    "inputSchema": {"type": "object"},
}


def answer(request: dict[str, object]) -> dict[str, object] | None:
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        params = request.get("params")
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        result: object = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        result = json.loads(os.environ.get("RAW_RESULT", "5"))
    else:
        result = {}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
