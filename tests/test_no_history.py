"""A new session holds the shared ``NO_HISTORY`` until its first write: as if it had its own list.

``agent.session()`` without history starts on one empty list shared by every new session (one
list fewer per session across its first run's waits, issue 39); its first commit, or an
append-only base, gives it a list of its own (``engine.no_history``). These tests hold such a
session to one seeded with ``history=[]``, which has its own list from the start, through
successes, tool turns, hard errors, a context that cannot fit and append-only models, over two
runs; and hold the shared list to refusing every write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentloop import Agent, tool
from agentloop.engine.no_history import NO_HISTORY
from agentloop.errors import AgentLoopError, ContextLengthExceeded, ProviderUnavailable
from agentloop.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def _append_only(steps: list[Any]) -> ScriptedModel:
    model = ScriptedModel(steps)
    model.append_only = True  # type: ignore[attr-defined]
    return model


_SCRIPTS: dict[str, Callable[[], ScriptedModel]] = {
    "answer": lambda: ScriptedModel([reply("hi"), reply("again")]),
    "tool turn": lambda: ScriptedModel([call("look", {"q": "x"}), reply("done"), reply("more")]),
    "hard error after a turn": lambda: ScriptedModel(
        [call("look", {"q": "x"}), ProviderUnavailable("down"), reply("back")]
    ),
    "cannot fit": lambda: ScriptedModel(
        [ContextLengthExceeded("too long"), ContextLengthExceeded("too long"), reply("fits")]
    ),
    "append-only": lambda: _append_only([call("look", {"q": "x"}), reply("done"), reply("on")]),
}


async def _runs(seeded: bool, script: Callable[[], ScriptedModel]) -> list[Any]:
    model = script()
    agent = Agent(model, instructions="Be brief.", tools=[look])
    session = agent.session(history=[]) if seeded else agent.session()
    assert (session._history is NO_HISTORY) is not seeded
    seen: list[Any] = []
    for text in ("first", "second"):
        try:
            run = await session.run(text)
        except AgentLoopError as exc:
            run = session.runs[-1]
            seen.append(type(exc).__name__)
        seen.append((run.output, run.messages, run.conversation, session.history))
    seen.append([r.messages for r in model.requests])
    assert session._history is not NO_HISTORY  # its own list once it committed
    return seen


@pytest.mark.parametrize("name", list(_SCRIPTS))
async def test_a_new_session_commits_as_one_with_its_own_empty_history(name: str) -> None:
    assert await _runs(False, _SCRIPTS[name]) == await _runs(True, _SCRIPTS[name])
    assert NO_HISTORY == [] and len(NO_HISTORY) == 0


@pytest.mark.parametrize(
    "write",
    [
        lambda h: h.append(1),
        lambda h: h.extend([1]),
        lambda h: h.insert(0, 1),
        lambda h: h.__setitem__(slice(0, 0), [1]),
        lambda h: h.__iadd__([1]),
        lambda h: h.clear(),
    ],
)
def test_the_shared_empty_history_refuses_every_write(write: Callable[[Any], Any]) -> None:
    with pytest.raises(TypeError, match="shared by every new session"):
        write(NO_HISTORY)
    assert NO_HISTORY == []


async def test_sessions_never_share_a_history_once_they_commit() -> None:
    agent = Agent(ScriptedModel([reply("a"), reply("b")]))
    one, two = agent.session(), agent.session()
    assert one._history is two._history is NO_HISTORY
    await one.run("x")
    assert one._history is not NO_HISTORY and two._history is NO_HISTORY and two.history == []
    await two.run("y")
    assert one._history is not two._history and [m.text for m in two.history] == ["y", "b"]
