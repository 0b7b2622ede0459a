"""An append-only conversation (SPEC 28) carried by three processes over one SQLite file.

The twin of an append-only Claude serves three real child processes (``_seams5_child.py``),
each building the agent again with other instructions (a callable naming the process) and a
toolset whose filter offers another tool: the first pauses on an approval, the second approves
it and runs once more, the third restores the session and runs. Memory (auto recall, SQLite)
shares the file. Every request extends the one before (``extends``): the same ``system`` and
``tools`` bytes, the messages before carried on unchanged, the continuation included; each
process's instructions and the third's new tool arrive as entries.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from agentloop.memory import SQLiteMemoryStore

from .test_seams5_appendonly_retry import one_conversation
from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

HERE = Path(__file__).parent


async def child(url: str, db: Path, stage: str) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "_seams5_child.py"), url, str(db), stage,
        env=dict(os.environ), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode().strip()


def step(n: int, name: str, path: str) -> TwinReply:
    return TwinReply([twin.thinking(f"t{n}"), twin.tool_use(name, {"path": path})], "tool_use")


def answer(text: str) -> TwinReply:
    return TwinReply([twin.thinking(f"a {text}"), twin.text(text)])


async def test_a_pause_continued_and_a_session_restored_in_other_processes(
    tmp_path: Path,
) -> None:
    db = tmp_path / "app.db"
    memory = SQLiteMemoryStore(db)
    await memory.put(("user", "ada"), "ada archives files on fridays")
    await memory.aclose()
    script = [
        step(1, "look", "a"),
        step(2, "archive", "a"),  # pauses
        answer("archived"),
        step(3, "look", "b"),
        answer("looked"),
        step(4, "shred", "c"),
        answer("shredded"),
    ]
    async with AnthropicTwin(script) as server:
        paused = await child(server.url, db, "pause")
        continued = await child(server.url, db, "continue")
        restored = await child(server.url, db, "restore")
    assert (paused, continued, restored) == ("paused ['archive']", "archived looked", "shredded")
    assert server.rejected == [] and len(server.requests) == 7
    one_conversation(server.requests)
    last = json.dumps(server.requests[-1]["messages"])
    system = json.dumps(server.requests[-1]["system"])
    assert "This is the pause process." in system  # the base, built once by the first
    for stage in ("continue", "restore"):
        assert f"This is the {stage} process." in last  # each later one's text, an entry
    assert '"tool_addition"' in last and '"shred"' in last
    assert "ada archives files on fridays" in last  # the recall, an entry
