"""A batch agent as another agent's tool (SPEC 25 x SPEC 13): refused where it is made.

A child agent's run answers its parent's tool call while the parent waits; a batch agent's run
returns at once, waiting on a provider batch. Made a tool, it used to submit a paid batch per
call while the parent's model read an empty, successful result (the child's answer, applied by
a later poll, never reached the parent); without a store on the parent, the call read as the
tool's panic. ``as_tool()`` on a batch agent is a ``ConfigurationError``, as for every face
that answers live (``AGUIApp``, ``VercelAIApp``, ``MCPApp``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, RunConfig
from agentloop.errors import ConfigurationError
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore


def test_a_batch_agent_cannot_be_a_tool(tmp_path: Path) -> None:
    client = OpenAIClient("gpt-test", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    child = Agent(client, store=SQLiteStore(tmp_path / "s.db"), config=RunConfig(batch=True))
    with pytest.raises(ConfigurationError, match=r"batch=True"):
        child.as_tool(name="research", description="Research a question.")
    live = Agent(client, store=SQLiteStore(tmp_path / "s.db"))
    assert live.as_tool(name="research", description="Research a question.").name == "research"
