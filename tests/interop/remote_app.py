"""A second agentloop process for the A2A round trip: an agent that asks before it deletes.

``python remote_app.py PORT`` serves it with uvicorn on 127.0.0.1:PORT.
"""

from __future__ import annotations

import sys

import uvicorn

from agentloop import Agent, tool
from agentloop.testing import ScriptedModel, call, reply


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def make_app() -> object:
    model = ScriptedModel(
        [
            call("delete", {"path": "old.log"}, id="c1"),
            reply("old.log is gone"),
            reply("hello from the other process"),
        ]
    )
    return Agent(model, tools=[delete]).to_a2a(name="janitor", description="cleans up")


if __name__ == "__main__":
    uvicorn.run(make_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")  # type: ignore[arg-type]
