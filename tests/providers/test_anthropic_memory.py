"""Anthropic's memory tool over a ``Memory`` store, against the twin that enforces its wire form.

On Claude, ``Memory(anthropic_tool="auto")`` sends ``{"type": "memory_20250818", "name":
"memory"}`` with the beta header ``context-management-2025-06-27`` (the twin refuses the tool
without the header, with extra keys, or under another name) and serves Claude's file commands
over the run's namespace, staged like every memory write (SPEC 27).
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, FallbackClient
from agentloop.memory import InMemoryMemoryStore, Memory, PostgresMemoryStore, SQLiteMemoryStore
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import ScriptedModel

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

KEY = "sk-ant-twin-0123456789"
NS = ("user", "ada")
P = "/memories/prefs.md"
REPLACE = "str_replace"


def claude(url: str, **headers: str) -> Any:
    return build_client(
        Settings(
            provider="anthropic",
            model="claude-sonnet-4-5",
            api_key=KEY,
            base_url=url,
            max_retries=0,
        )
    )


def memory_calls(*commands: dict[str, Any]) -> list[TwinReply]:
    script = [
        TwinReply([twin.tool_use("memory", c, f"toolu_{n}")], "tool_use")
        for n, c in enumerate(commands)
    ]
    return [*script, TwinReply([twin.text("done")])]


def results(body: dict[str, Any]) -> list[str]:
    """Every tool result the twin was sent in ``body``, in order."""
    found: list[str] = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            found += [b["content"] for b in message["content"] if b["type"] == "tool_result"]
    return found


def _store_contract() -> Any:
    path = Path(__file__).parent.parent / "store" / "test_store_contract.py"
    spec = importlib.util.spec_from_file_location("agentloop_store_contract_claude", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def claude_postgres_dsn() -> Iterator[str]:
    """The store contract's throwaway PostgreSQL server."""
    fixture = _store_contract().postgres_dsn.__wrapped__()
    try:
        yield next(fixture)
    finally:
        next(fixture, None)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Each memory store, empty (PostgreSQL for real)."""
    if request.param == "memory":
        store: Any = InMemoryMemoryStore()
    elif request.param == "sqlite":
        store = SQLiteMemoryStore(tmp_path / "memory.db")
    else:
        dsn = request.getfixturevalue("claude_postgres_dsn")
        store = PostgresMemoryStore(dsn)
        for namespace in await store.namespaces():
            for item_id in await store.ids(namespace):
                await store.delete(namespace, item_id)
    yield store
    await store.aclose()


async def test_claude_gets_the_native_tool_with_its_beta_header_and_writes_files(
    any_store: Any,
) -> None:
    store = any_store
    script = memory_calls(
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/prefs.md", "file_text": "tea\ngreen"},
        {"command": "create", "path": "/memories/prefs.md", "file_text": "again"},
        {"command": REPLACE, "path": P, "old_str": "green", "new_str": "jasmine"},
        {"command": REPLACE, "path": P, "old_str": "coffee", "new_str": "x"},
        {"command": "insert", "path": P, "insert_line": 0, "insert_text": "# Ada"},
        {"command": "view", "path": "/memories/prefs.md"},
        {"command": "view", "path": "/memories/nope.md"},
        {"command": "view", "path": P, "view_range": [2, -1]},
    )  # fmt: skip
    async with AnthropicTwin(script) as server:
        agent = Agent(claude(server.url), memory=Memory(store, namespace=lambda ctx: NS))
        run = await agent.run("remember my tea", deps="ada")
    assert server.rejected == [] and run.output == "done"
    first = server.requests[0]
    tools = [{k: v for k, v in t.items() if k != "cache_control"} for t in first["tools"]]
    assert tools == [{"type": "memory_20250818", "name": "memory"}]
    seen = results(server.requests[-1])
    assert seen[0] == "Here're the files and directories in /memories"
    assert seen[1] == "File created successfully at: /memories/prefs.md"
    assert seen[2] == "Error: File /memories/prefs.md already exists"
    assert seen[3] == "The memory file has been edited."
    assert seen[4] == (
        "No replacement was performed, old_str `coffee` did not appear verbatim in "
        "/memories/prefs.md."
    )
    assert seen[6].endswith("     1\t# Ada\n     2\ttea\n     3\tjasmine")
    assert seen[7] == "The path /memories/nope.md does not exist. Please provide a valid path."
    assert seen[8].endswith("with line numbers:\n     2\ttea\n     3\tjasmine")
    item = await store.get(NS, "/memories/prefs.md")
    assert item is not None and item.text == "# Ada\ntea\njasmine"


async def test_the_twin_refuses_the_memory_tool_without_its_beta_header() -> None:
    from .twins.anthropic_tools import tool_violation

    body = {"tools": [{"type": "memory_20250818", "name": "memory"}]}
    assert tool_violation(body, {}) is not None
    assert tool_violation(body, {"anthropic-beta": "context-management-2025-06-27"}) is None
    extra = {"tools": [{"type": "memory_20250818", "name": "memory", "input_schema": {}}]}
    assert "Extra inputs" in str(
        tool_violation(extra, {"anthropic-beta": "context-management-2025-06-27"})
    )


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/etc/passwd", "Path must start with /memories, got: /etc/passwd"),
        ("/memoriesX/a", "Path must start with /memories, got: /memoriesX/a"),
        ("/memories/../etc/pw", "Path /memories/../etc/pw would escape /memories directory"),
        ("/memories/./a", "Path /memories/./a would escape /memories directory"),
        ("/memories//a", "Path /memories//a would escape /memories directory"),
        ("/memories/a\\b", "Path /memories/a\\b would escape /memories directory"),
        ("/memories/a\x00b", "Path /memories/a\x00b would escape /memories directory"),
    ],
)  # fmt: skip
async def test_paths_are_confined_to_the_namespace_s_memories(path: str, said: str) -> None:
    store = InMemoryMemoryStore()
    script = memory_calls({"command": "create", "path": path, "file_text": "x"})
    async with AnthropicTwin(script) as server:
        agent = Agent(claude(server.url), memory=Memory(store, namespace=lambda ctx: NS))
        await agent.run("go")
    assert results(server.requests[-1]) == [said]
    assert await store.namespaces() == []


async def test_rename_keeps_created_at_delete_and_the_size_limit(any_store: Any) -> None:
    store = any_store
    old = await store.put(NS, "body", id="/memories/a.md")
    other = await store.put(NS, "a fact saved by remember")
    script = memory_calls(
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/dir/b.md"},
        {"command": "rename", "old_path": "/memories/dir/b.md", "new_path": f"/memories/{other.id}"},  # noqa: E501
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/big.md", "file_text": "y" * 11},
        {"command": "delete", "path": "/memories/dir"},
    )  # fmt: skip
    async with AnthropicTwin(script) as server:
        memory = Memory(store, namespace=lambda ctx: NS, max_item_chars=10)
        await Agent(claude(server.url), memory=memory).run("go")
    seen = results(server.requests[-1])
    assert seen[0] == "Successfully renamed /memories/a.md to /memories/dir/b.md"
    assert seen[1] == f"Error: The destination /memories/{other.id} already exists"
    assert seen[2].splitlines()[1:] == sorted(["- /memories/dir/b.md", f"- /memories/{other.id}"])
    assert seen[3] == "File /memories/big.md would be 11 characters; the limit is 10"
    assert seen[4] == "Successfully deleted /memories/dir"
    assert sorted(await store.ids(NS)) == [other.id]
    assert old.created_at  # the rename kept it while it lived (the store contract pins it)


async def test_a_renamed_file_keeps_its_created_at(any_store: Any) -> None:
    store = any_store
    old = await store.put(NS, "body", id="/memories/a.md")
    script = memory_calls(
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}
    )
    async with AnthropicTwin(script) as server:
        await Agent(claude(server.url), memory=Memory(store, namespace=lambda ctx: NS)).run("go")
    moved = await store.get(NS, "/memories/b.md")
    assert moved is not None and abs((moved.created_at - old.created_at).total_seconds()) < 1e-5
    assert await store.get(NS, "/memories/a.md") is None


def test_auto_uses_the_three_tools_elsewhere_and_every_model_must_be_claude() -> None:
    memory = Memory(InMemoryMemoryStore(), namespace=lambda ctx: NS)
    scripted = Agent(ScriptedModel([]), memory=memory)
    assert {s.name for s in scripted.registry.specs()} == {"remember", "recall", "forget"}
    mixed = FallbackClient([claude("http://127.0.0.1:9"), ScriptedModel([])])
    assert {s.name for s in Agent(mixed, memory=memory).registry.specs()} == {
        "remember",
        "recall",
        "forget",
    }
    both = FallbackClient([claude("http://127.0.0.1:9"), claude("http://127.0.0.1:9")])
    assert [s.name for s in Agent(both, memory=memory).registry.specs()] == ["memory"]
    never = Memory(InMemoryMemoryStore(), namespace=lambda ctx: NS, anthropic_tool=False)
    assert "memory" not in Agent(claude("http://127.0.0.1:9"), memory=never).registry
