"""What an A2A or MCP client (the end user's software) reads when the app's own parts fail.

SPEC 26: a hard error is ``<ErrorClass>: <message>`` redacted, no key, no path. The errors
whose text is the app's internals by design (a rate governor's database, SPEC 25; the app's
store or a lease held by another worker; an ``InternalError`` for a raising hook or
instructions function) keep their class and read the same user-safe words the UI apps give
(SPEC 18); the store keeps the whole text. Before, the A2A task's status and the MCP result
showed the governor database's path and the raising function's text (here a database host).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb

from agentloop import Agent, RunContext
from agentloop.errors import GovernorUnavailable
from agentloop.fleet import RateGovernor, RateLimit
from agentloop.mcp import MCPApp
from agentloop.providers import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, ScriptedModel, reply

from ._serve import client, send, serving, user
from .test_mcp_app import over_http, text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HIDDEN = "srv-ops-internal"


def _prompt(ctx: RunContext[Any]) -> str:
    raise RuntimeError(f"could not reach db.{HIDDEN}.example:5432 for the prompt")


async def _said(face: str, agent: Agent[Any]) -> str:
    if face == "a2a":
        async with serving(agent.to_a2a(name="shop")) as url, client(url) as made:
            [failed] = await send(made, user("hello"))
        assert failed.task.status.state == pb.TASK_STATE_FAILED
        return failed.task.status.message.parts[0].text
    async with over_http(MCPApp(agent, name="shop")) as session:
        result = await session.call_tool("shop", {"input": "hello"})
    assert result.is_error
    said = text(result)
    assert said.startswith("agent 'shop' stopped: ")
    return said.removeprefix("agent 'shop' stopped: ")


@pytest.mark.parametrize("face", ["a2a", "mcp"])
async def test_an_unreachable_governor_names_no_database(face: str, tmp_path: Path) -> None:
    backend = f"sqlite:///{tmp_path / HIDDEN / 'no' / 'such' / 'governor.db'}"
    governor = RateGovernor([RateLimit("openai", rpm=60)], backend=backend)
    async with FakeProviderServer(default=FakeReply("never")) as fake:
        model = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url, provider="openai")
        async with model:
            with SQLiteStore(tmp_path / "runs.db") as store:
                said = await _said(face, Agent(model, store=store, governor=governor))
                [record] = store.load_runs()
                assert HIDDEN in str(record.run.stop_reason)  # the store keeps it all
        assert fake.received == []
    assert said.startswith("GovernorUnavailable: ")
    for internal in (HIDDEN, "sqlite", "OperationalError", "Traceback"):
        assert internal not in said
    assert isinstance(record.run.stop_reason, GovernorUnavailable)


@pytest.mark.parametrize("face", ["a2a", "mcp"])
async def test_a_raising_instructions_function_names_no_host(face: str) -> None:
    agent = Agent(ScriptedModel([reply("never")]), instructions=_prompt)
    said = await _said(face, agent)
    assert said == "InternalError: The server failed while running the agent."
