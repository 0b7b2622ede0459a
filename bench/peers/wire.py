"""Before anything is timed: every driver puts the same conversation on the wire.

Each driver runs one short conversation (K = 3) in each mode against agentloop's own fake
provider (``agentloop.testing.FakeProviderServer``, which keeps every request body), answering
as the bench's server does: a ``lookup`` call while fewer than K tool results came back, then
text. Per framework and mode it reports the requests made, whether each asked for a stream, the
tools offered and the roles of the last request's messages; ``run.py`` stores that in the
results and refuses to time a driver whose conversation differs from the raw loop's. Prints
one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from drivers import DRIVERS

K = 3


def _step(body: Any) -> Any:
    from agentloop.testing import FakeReply, FakeToolCall

    n = sum(1 for m in body["messages"] if m.get("role") == "tool")
    if n < K:
        return FakeReply(tool_calls=[FakeToolCall("lookup", {"key": f"k{n}"})])
    return FakeReply("All keys looked up.")


async def conversation(framework: str, stream: bool) -> dict[str, Any]:
    """What one conversation of ``framework`` sent."""
    from agentloop.testing import FakeProviderServer

    async with FakeProviderServer([], default=_step) as server:
        driver = DRIVERS[framework](server.base_url)
        try:
            calls = await driver.run(stream)
        finally:
            await driver.aclose()
        requests = server.requests
    return {
        "calls": calls,
        "requests": len(requests),
        "stream": sorted({bool(r.get("stream")) for r in requests}),
        "tools": sorted({len(r.get("tools") or ()) for r in requests}),
        "roles": [m["role"] for m in requests[-1]["messages"]],
    }


async def check() -> dict[str, Any]:
    """Every framework in both modes."""
    found: dict[str, Any] = {}
    for framework in DRIVERS:
        found[framework] = {}
        for mode, stream in (("json", False), ("sse", True)):
            try:
                found[framework][mode] = await conversation(framework, stream)
            except Exception as error:  # reported, and that framework is not timed
                found[framework][mode] = {"error": f"{type(error).__name__}: {error}"}
    return found


if __name__ == "__main__":
    print(json.dumps(asyncio.run(check())))
