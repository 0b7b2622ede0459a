"""``agent.session(id)`` finds a live session again, and forgets the ones that died (SPEC 20).

The agent's map of live sessions (``engine.live``) holds plain weak references and sweeps dead
entries when it has doubled: these tests hold it to what a ``WeakValueDictionary`` gave.
"""

from __future__ import annotations

import gc

from agentloop import Agent
from agentloop.engine.live import LiveSessions
from agentloop.testing import FunctionModel, reply


class _Held:
    """A stand-in for a session: anything weakly referenceable."""


def test_the_same_id_gives_the_same_live_session_and_a_new_one_after_it_died() -> None:
    agent = Agent(FunctionModel(lambda request: reply("done")))
    session = agent.session()
    assert agent.session(session.id) is session
    sid = session.id
    del session
    gc.collect()
    again = agent.session(sid)
    assert again.id == sid
    assert again.history == []


def test_dead_entries_are_swept_and_live_ones_kept() -> None:
    live: LiveSessions[_Held] = LiveSessions()
    kept = [_Held() for _ in range(10)]
    for i, held in enumerate(kept):
        live.add(f"kept{i}", held)
    for i in range(1000):
        live.add(f"gone{i}", _Held())  # dies at once (no other reference)
    assert len(live) < 200  # swept as it doubled: at most twice the live ones, plus the rest
    assert all(live.get(f"kept{i}") is held for i, held in enumerate(kept))
    assert live.get("gone3") is None
    assert live.get("never") is None


def test_an_id_made_again_replaces_the_dead_entry() -> None:
    live: LiveSessions[_Held] = LiveSessions()
    first = _Held()
    live.add("s", first)
    del first
    gc.collect()
    second = _Held()
    live.add("s", second)
    assert live.get("s") is second
