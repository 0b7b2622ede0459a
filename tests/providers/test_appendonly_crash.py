"""A run killed inside a filtered handoff's receiver, on the append-only twin (SPEC 14 x 26 x 28).

A filtered receiver talks in a conversation of its own: its thinking is bound to the view's
prefix, not the session's. A run that ends normally leaves that thinking out of the session's
history (``view_ended``). A run whose process was killed inside the receiver is closed by
``Agent.resume`` (its completed turns committed): the same must hold, or the session's next
request sends the receiver's thinking after the session's own prefix and the twin answers the
documented 400.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from agentloop.errors import InvalidInput
from agentloop.messages import ThinkingPart
from agentloop.store import SQLiteStore

from . import _view_crash
from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

HERE = Path(__file__).parent


def _step(n: int, name: str, arguments: dict[str, str]) -> TwinReply:
    return TwinReply([twin.thinking(f"t{n}"), twin.tool_use(name, arguments, f"toolu_{n}")])


async def _killed(url: str, db: Path, key: str) -> None:
    """Run the child (the twin answers it from this loop) until it kills itself in ``key``."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "_view_crash.py"),
        url,
        str(db),
        env={**os.environ, "KILL": key},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == -9, err.decode()


SCRIPT = [
    TwinReply([twin.thinking("hi"), twin.text("hello")]),
    _step(0, "transfer_to_worker", {}),
    _step(1, "work", {"key": "a"}),
    _step(2, "work", {"key": "b"}),  # killed inside this call
    TwinReply([twin.thinking("next"), twin.text("next")]),
]


@pytest.mark.parametrize("how", ["resume", "continue", "live"])
async def test_the_session_goes_on_after_a_crash_in_a_filtered_receiver(
    tmp_path: Path, how: str
) -> None:
    """Closed by ``Agent.resume``, by a refused ``continue_run``, or by a live session's reload."""
    db = tmp_path / "runs.db"
    async with AnthropicTwin(SCRIPT) as server:
        with SQLiteStore(db) as store:
            live = _view_crash.build(server.url, store).session("s1")  # before the crash
            await _killed(server.url, db, "b")
            if how == "live":
                run = await live.run("and now?")  # another process ran it: reloaded first
            else:
                agent = _view_crash.build(server.url, store, resume=True)
                if how == "continue":
                    with pytest.raises(InvalidInput, match="input_filter"):
                        await agent.continue_run()
                run = await agent.run("and now?")
    assert server.rejected == []
    assert run.output == "next"
    with SQLiteStore(db) as store:
        history = store.load_history("s1")
        crashed = store.load_runs("s1")[1].run
    thoughts = [p.text for m in history for p in m.parts if isinstance(p, ThinkingPart)]
    assert thoughts == ["hi", "t0", "next"]  # the receiver's, bound to its own view, left out
    assert [m.role for m in history].count("system") == 1
    assert [t.agent for t in crashed.turns] == [None, "worker"]  # its record keeps its turns
    kept = [p.text for m in crashed.messages for p in m.parts if isinstance(p, ThinkingPart)]
    assert kept == ["t0", "t1"]  # and the record its messages as they were
