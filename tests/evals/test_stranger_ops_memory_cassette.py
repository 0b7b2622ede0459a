"""A run whose model calls ``remember`` replays from its cassette (SPEC 23 x SPEC 27).

Found by building an ops service from the docs alone: its evals ran offline from a cassette, and
every case whose model saved a memory failed the replay with ``CassetteMismatch ... recorded
'remembered as m9d92...', got 'remembered as mc880...'``. ``remember`` derives the item's id
from the run's id (so a re-run turn stages the same write), a replay has fresh run ids, and the
cassette stored run ids as ``<run-id>`` but not the ids derived from them. Request strings now
store such ids as ``<memory-id>``, as a recall line or an auto-recall block shows them too.

Real parts: the fake provider over HTTP on 127.0.0.1 while recording, nothing listening while
replaying, the real OpenAI adapter, SQLite memory stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentloop import Agent
from agentloop.cassettes import use_cassette
from agentloop.memory import Memory, SQLiteMemoryStore
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall


def _model(body: Mapping[str, Any]) -> FakeReply:
    """``remember X`` saves X, ``recall X`` searches; then the tool's text is the answer."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return FakeReply(f"Noted: {last['content']}")
    verb, _, rest = str(last["content"]).partition(" ")
    return FakeReply(
        tool_calls=[FakeToolCall(verb, {"text" if verb == "remember" else "query": rest})]
    )


def _agent(url: str, db: Path) -> Agent[Any]:
    client = OpenAIClient("gpt-4o-mini", api_key="sk-test-0000", base_url=url)
    memory = Memory(SQLiteMemoryStore(db), namespace=lambda ctx: ("team", "ops"), auto_recall=3)
    return Agent(client, memory=memory)


async def _both(agent: Agent[Any]) -> tuple[str, str]:
    """The id ``remember`` wrote, and what ``recall`` then read (the tool results, not replies)."""
    saved = await agent.run("remember the api is owned by alice", history=[])
    found = await agent.run("recall api owner", history=[])
    assert saved.memory is not None
    (written,) = saved.memory["committed"]["written"]
    return written, found.messages[-2].tool_results_parts[0].content


async def test_remember_and_recall_replay_offline(tmp_path: Path) -> None:
    tape = tmp_path / "memory.yaml"
    async with FakeProviderServer(default=_model) as server:
        agent = _agent(server.base_url, tmp_path / "recorded.db")
        with use_cassette(tape, mode="once") as cassette:
            recorded = await _both(agent)
        await agent.aclose()
    assert cassette.recording and recorded[1] == f"[{recorded[0]}] the api is owned by alice"
    requests = "".join(str(i["request"]) for i in cassette.interactions)
    assert "remembered as <memory-id>" in requests and "<memory-id>] the api" in requests
    assert recorded[0] not in requests

    agent = _agent("http://127.0.0.1:9/v1", tmp_path / "replayed.db")  # nothing listens here
    with use_cassette(tape) as cassette:
        replayed = await _both(agent)
    await agent.aclose()
    assert cassette.all_played
    assert replayed[0] != recorded[0]  # a new run, a new id: matched as <memory-id>
    assert replayed[1] == f"[{replayed[0]}] the api is owned by alice"
