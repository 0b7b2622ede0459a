"""A guardrail check that crashed shows no crash text to a served client (SPEC 19 x 26 x 18).

SPEC 19: a check that raises trips (fail closed) "with the exception in the reason": the
reason is ``the check raised <ExcType>: <its text>``, for the log, the store and the viewer.
A2A (a tripped input guardrail is ``REJECTED`` with ``GuardrailTripped: <message>``) and MCP
(``agent '<name>' stopped: GuardrailTripped: <message>``) show a guardrail's reason, as does a UI
app that exposes guardrails (``expose_guardrails=True``): a policy's reason is what they are
for, but a crashed check's text is the app's internals (here the moderation service's host).
Now they read ``the check raised <ExcType>``; the store keeps the whole text. Official a2a-sdk
and mcp clients, and ``@ag-ui/client``, over uvicorn on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from tests.ui.test_seams_guardrails import Tap, agui, node_or_skip
from tests.ui.test_seams_guardrails import serving as serving_ui

from agentloop import Agent
from agentloop.guardrails import GuardrailContext, InputGuardrail
from agentloop.mcp import MCPApp
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, reply

from ._serve import client, send, serving, user
from .test_mcp_app import over_http, text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HIDDEN = "moderation.ops-internal.example"
SAID = "Guardrail 'moderated' tripped: the check raised ConnectionError"


def moderated(ctx: GuardrailContext[Any], value: str) -> str | None:
    raise ConnectionError(f"{HIDDEN}:8443 refused the connection")


def guarded(store: SQLiteStore) -> Agent[Any]:
    return Agent(
        ScriptedModel([reply("never")]), guardrails=[InputGuardrail(moderated)], store=store
    )


def stored(store: SQLiteStore) -> str:
    [record] = store.load_runs()
    return str(record.run.stop_reason)


async def test_a2a_rejects_without_the_crash_text(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        async with serving(guarded(store).to_a2a(name="shop")) as url, client(url) as made:
            [rejected] = await send(made, user("hello"))
        assert HIDDEN in stored(store)
    assert rejected.task.status.state == pb.TASK_STATE_REJECTED
    assert rejected.task.status.message.parts[0].text == f"GuardrailTripped: {SAID}"


async def test_mcp_stops_without_the_crash_text(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        async with over_http(MCPApp(guarded(store), name="shop")) as session:
            result = await session.call_tool("shop", {"input": "hello"})
        assert HIDDEN in stored(store)
    assert result.is_error and text(result) == f"agent 'shop' stopped: GuardrailTripped: {SAID}"


async def test_an_ag_ui_app_that_exposes_guardrails_shows_no_crash_text(tmp_path: Path) -> None:
    from agentloop.ui.ag_ui import AGUIApp

    node_or_skip("@ag-ui/client")
    with SQLiteStore(tmp_path / "runs.db") as store:
        tap = Tap(AGUIApp(guarded(store), expose_guardrails=True))
        async with serving_ui(tap) as url:
            seen = await agui(url)
    [run] = seen["runs"]
    assert run["error"]["message"] == SAID
    assert run["error"]["metadata"]["agentloop"]["reason"] == "the check raised ConnectionError"
    assert HIDDEN not in tap.sent.decode()
