"""A served run that ends in a hard error is finalized and stored before the caller hears of it.

SPEC 26 x SPEC 5: over A2A (the official a2a-sdk client) the task is ``FAILED`` with the
redacted ``<ErrorClass>: <message>``; over MCP (the official mcp client) the result is
``isError`` ``agent '<name>' stopped: ...``. Either way the store (real SQLite) holds the run as
ended with that error, the completed turn committed to the session's history and the key never
written anywhere the caller reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2a.types import a2a_pb2 as pb

from agentloop import Agent, tool
from agentloop.errors import AuthError
from agentloop.mcp import MCPApp
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import ScriptedModel, call

from ._serve import client, send, serving, user
from .test_mcp_app import over_http, text

KEY = "sk-proj-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt" * 2


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: 21C"


def failing(store: SQLiteStore) -> Agent[Any]:
    steps = [call("lookup", {"city": "Oslo"}), AuthError(f"bad key {KEY}")]
    return Agent(ScriptedModel(steps), tools=[lookup], store=store)


def assert_stored(store: SQLiteStore) -> None:
    [stored] = store.load_runs()
    assert stored.finished and isinstance(stored.run.stop_reason, AuthError)
    assert [t.tool_calls[0].name for t in stored.run.turns] == ["lookup"]
    history = store.load_history(stored.session_id)
    assert [m.role for m in history] == ["user", "assistant", "tool"]  # the completed turn


async def test_a2a_fails_the_task_redacted_and_the_run_is_stored(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        app = failing(store).to_a2a(name="weather")
        async with serving(app) as url, client(url) as made:
            [failed] = await send(made, user("weather?"))
        assert failed.task.status.state == pb.TASK_STATE_FAILED
        said = failed.task.status.message.parts[0].text
        assert said.startswith("AuthError: bad key ") and KEY not in said
        assert_stored(store)


async def test_mcp_is_an_is_error_result_redacted_and_the_run_is_stored(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        async with over_http(MCPApp(failing(store), name="weather")) as session:
            result = await session.call_tool("weather", {"input": "weather?"})
        assert result.is_error
        said = text(result)
        assert said.startswith("agent 'weather' stopped: AuthError: bad key ") and KEY not in said
        assert_stored(store)
