"""Claude's memory tool refuses a secret wherever the command puts it (SPEC 27 x 24), on the twin.

``remember`` refuses a text or a tag the redactor would change (``memory not saved: it contains
a secret``). On Claude the same store is written through Anthropic's ``memory`` tool, whose
commands name a file: the path is the item's id, listed by every later ``view`` and recalled in
later conversations. The file text was screened, but a secret in the path (``create``, or the
``new_path`` of ``rename``) was stored: the screen had a way around it through the other
provider's shape. Now every path a command writes is screened as the text is; nothing is
written. The twin enforces the tool's wire form; the store is real SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentloop import Agent
from agentloop.memory import Memory, SQLiteMemoryStore

from .test_anthropic_memory import NS, claude, memory_calls, results
from .twins.anthropic import AnthropicTwin

TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ012345"  # a GitHub token, as the redactor knows it
REFUSED = "memory not saved: it contains a secret"


def user(ctx: Any) -> tuple[str, ...]:
    return NS


async def test_no_command_writes_a_secret_in_a_path_or_a_text(tmp_path: Path) -> None:
    store = SQLiteMemoryStore(tmp_path / "memory.db")
    commands: list[dict[str, Any]] = [
        {"command": "create", "path": f"/memories/{TOKEN}", "file_text": "the deploy token"},
        {"command": "create", "path": "/memories/ci.md", "file_text": f"token {TOKEN}"},
        {"command": "create", "path": "/memories/ci.md", "file_text": "uses a token"},
        {"command": "rename", "old_path": "/memories/ci.md", "new_path": f"/memories/{TOKEN}.md"},
        {"command": "str_replace", "path": "/memories/ci.md", "old_str": "a token",
         "new_str": TOKEN},
        {"command": "insert", "path": "/memories/ci.md", "insert_line": 1, "insert_text": TOKEN},
    ]  # fmt: skip
    async with AnthropicTwin(memory_calls(*commands)) as server:
        agent = Agent(claude(server.url), memory=Memory(store, namespace=user))
        run = await agent.run("remember how CI deploys")
    assert run.output == "done"
    said = results(server.requests[-1])
    assert said[0] == REFUSED and said[1] == REFUSED
    assert said[2] == "File created successfully at: /memories/ci.md"
    assert said[3:] == [REFUSED, REFUSED, REFUSED]
    items = await store.search(NS, "", k=100)
    assert [(i.id, i.text) for i in items] == [("/memories/ci.md", "uses a token")]
