"""A failure of the app's own parts wrapped in an agentloop error never reaches the end user.

SPEC 18: a hard error reaches the client with its class and a redacted, user-safe message; the
text of an exception the application's own code raised (a host, a user, a query) is for the
log, the store and the viewer. Two errors carry such text inside them: a ``CompactionFailed``
(SPEC 7) wraps what the compactor raised (here a custom compactor that keeps summaries in the
app's database), and the ``ConfigurationError`` that ends a run whose memory namespace function
raised (SPEC 27: cause chained; here it looks the user up), and the one a run ends with when
its MCP tool server cannot start (SPEC 13: the server's stderr tail, here the app's paths and
a database URL). Both apps showed that text in the
error event, and AG-UI's ``agentloop:CompactionFailed`` custom event showed it again; now
the client reads the error's class and ``The server failed while running the agent.``, and the
store keeps the whole text. Real clients: ``@ag-ui/client`` (``node/agui_events.mjs``) and the
``ai`` package's chat (``node/vercel_chat.mjs``), the raw bytes on the wire checked too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig, RunContext, tool
from agentloop.errors import CompactionFailed, ConfigurationError
from agentloop.mcp import MCPServer
from agentloop.memory import InMemoryMemoryStore, Memory
from agentloop.messages import Message
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.tokens import TokenCounter
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

from .test_seams_guardrails import Tap, agui, node_or_skip, serving, vercel

HIDDEN = "db-7.ops-internal.example"
INTERNAL = "The server failed while running the agent."


@tool
def page(n: int) -> str:
    """Read a page of the manual."""
    return f"page {n}: " + "lorem ipsum " * 70


class ArchivingCompactor:
    """Keeps what it drops in the app's database: down here."""

    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        raise ConnectionError(f"archive at {HIDDEN}:5432 refused user 'summaries_rw'")


def compacting(store: SQLiteStore) -> Agent[Any]:
    steps = [*(call("page", {"n": n}) for n in range(1, 6)), reply("never")]
    config = RunConfig(context_window=1_000, compactor=ArchivingCompactor())
    return Agent(ScriptedModel(steps), tools=[page], config=config, store=store)


def user_of(ctx: RunContext[Any]) -> tuple[str, ...]:
    raise LookupError(f"no account row in {HIDDEN}/accounts for session {ctx.session_id}")


def remembering(store: SQLiteStore) -> Agent[Any]:
    memory = Memory(InMemoryMemoryStore(), namespace=user_of)
    return Agent(ScriptedModel([reply("never")]), memory=memory, store=store)


def serving_tools(store: SQLiteStore) -> Agent[Any]:
    script = f"/srv/{HIDDEN}/tools/server.py"  # its stderr names it: no such file
    tools = MCPServer.stdio(sys.executable, [script], name="crm")
    return Agent(ScriptedModel([reply("never")]), tools=[tools], store=store)


CASES = [
    (compacting, CompactionFailed),
    (remembering, ConfigurationError),
    (serving_tools, ConfigurationError),
]
IDS = ["compactor", "memory-namespace", "tool-server"]


def stored_error(store: SQLiteStore) -> str:
    [record] = [r for r in store.load_runs() if r.run.stop_reason is not None]
    return str(record.run.stop_reason)


@pytest.mark.parametrize(("build", "error"), CASES, ids=IDS)
async def test_ag_ui_client_reads_no_internal_text(build: Any, error: type, tmp_path: Path) -> None:
    node_or_skip("@ag-ui/client")
    with SQLiteStore(tmp_path / "runs.db") as store:
        tap = Tap(AGUIApp(build(store)))
        async with serving(tap) as url:
            seen = await agui(url)
        assert HIDDEN in stored_error(store)  # the store keeps it all
    [run] = seen["runs"]
    assert run["error"]["code"] == error.__name__
    assert run["error"]["message"] == INTERNAL
    assert HIDDEN not in tap.sent.decode() and HIDDEN not in json.dumps(seen)


@pytest.mark.parametrize(("build", "error"), CASES, ids=IDS)
async def test_vercel_client_reads_no_internal_text(
    build: Any, error: type, tmp_path: Path
) -> None:
    node_or_skip("ai")
    with SQLiteStore(tmp_path / "runs.db") as store:
        tap = Tap(VercelAIApp(build(store)))
        async with serving(tap) as url:
            seen = await vercel(url)
        assert HIDDEN in stored_error(store)
    [said] = seen["errors"]
    assert said == f"{error.__name__}: {INTERNAL}"
    assert HIDDEN not in tap.sent.decode() and HIDDEN not in json.dumps(seen)
