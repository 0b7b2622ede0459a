"""A hard error as the end user's chat shows it, and as the store keeps it (real clients).

Both apps on a real uvicorn server, each request on ``agent.session(thread)`` of an agent over a
real ``SQLiteStore``; the model is the fake OpenAI-compatible server behind the real adapter.
The client is ``@ag-ui/client``'s ``HttpAgent`` or the ``ai`` package's chat. For a provider's
401 that echoes the key, a budget spent after a tool turn, a context overflow the provider
reports twice, and a bug in the app's instructions function: the client reads the error's
class and a user-safe message (no key, no traceback, no internal host or password), the turns
that completed stay on screen, and the run is stored finalized with that error (read back
through a second store on the file).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.ui._serve import serving
from tests.ui.test_seams_events import node

from agentloop import Agent, RunConfig, RunContext, tool
from agentloop.providers import OpenAIClient
from agentloop.safety import Budget
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault
from agentloop.testing.fake_wire import openai_error
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

KEY = "sk-live-0123456789abcdef"
DSN = "postgresql://app:hunter2@db.internal:5432/prod"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def broken_instructions(ctx: RunContext[Any]) -> str:
    raise ConnectionError(f"could not connect to {DSN}")


CASES: dict[str, tuple[list[Any], dict[str, Any], str]] = {
    "auth": (
        [Fault.http(401, openai_error(f"Incorrect API key provided: {KEY}", "invalid_api_key"))],
        {},
        "AuthError",
    ),
    "budget": (
        [FakeReply(tool_calls=[FakeToolCall("add", {"a": 1, "b": 2}, id="call_add")])],
        {"config": RunConfig(budget=Budget(tokens=10))},
        "BudgetExhausted",
    ),
    "overflow": ([Fault.context_overflow(), Fault.context_overflow()], {}, "ContextExceeded"),
    "bug": ([FakeReply("never")], {"instructions": broken_instructions}, "InternalError"),
}


async def served(
    face: str, script: list[Any], options: dict[str, Any], tmp_path: Path
) -> tuple[dict[str, Any], str]:
    """One message through the face's real client; what it saw, and its visible text."""
    async with FakeProviderServer(script) as fake:
        client = OpenAIClient("fake-model", api_key=KEY, base_url=fake.base_url)
        async with client:
            agent = Agent(client, tools=[add], store=SQLiteStore(tmp_path / "runs.db"), **options)
            pick: Callable[[Any, str], Any] = lambda request, thread: agent.session(thread)  # noqa: E731
            if face == "ag_ui":
                async with serving(AGUIApp(agent, session=pick)) as url:
                    seen = await node("agui_seams.mjs", url, "add 1 and 2")
            else:
                async with serving(VercelAIApp(agent, session=pick)) as url:
                    scenario = json.dumps({"url": url, "send": "add 1 and 2"})
                    seen = await node("vercel_seams.mjs", scenario)
    return seen, json.dumps(seen)


def stored(path: Path, session_id: str) -> Any:
    store = SQLiteStore(path)
    try:
        [record] = store.load_runs(session_id)
    finally:
        store.close()
    return record.run


@pytest.mark.parametrize("case", sorted(CASES))
async def test_ag_ui_a_hard_error_is_typed_safe_and_stored(case: str, tmp_path: Path) -> None:
    script, options, error_class = CASES[case]
    seen, visible = await served("ag_ui", script, options, tmp_path)
    assert seen["error"]["code"] == error_class
    for secret in (KEY, "hunter2", "db.internal", "Traceback", "ConnectionError"):
        assert secret not in visible
    if case == "budget":  # the completed tool turn stays; nothing is left unfinished
        assert seen["unfinished"] == []
        [result] = [m for m in seen["messages"] if m["role"] == "tool"]
        assert result["content"] == "3"
    run = stored(tmp_path / "runs.db", "seams")
    assert type(run.stop_reason).__name__ == error_class and run.ended_at is not None


@pytest.mark.parametrize("case", sorted(CASES))
async def test_vercel_a_hard_error_is_typed_safe_and_stored(case: str, tmp_path: Path) -> None:
    script, options, error_class = CASES[case]
    seen, visible = await served("vercel", script, options, tmp_path)
    [text] = seen["errors"]
    assert text.startswith(f"{error_class}: ")
    for secret in (KEY, "hunter2", "db.internal", "Traceback", "ConnectionError"):
        assert secret not in visible
    assert seen["unfinished"] == []
    if case == "budget":
        [call] = [p for p in seen["parts"] if p.get("toolCallId") == "call_add"]
        assert call["state"] == "output-available" and call["output"] == "3"
    run = stored(tmp_path / "runs.db", "seams")
    assert type(run.stop_reason).__name__ == error_class and run.ended_at is not None
