"""A long append-only session whose instructions change every run, on the twin (SPEC 27 x 28 x 7).

Every run's memory recall block (SPEC 27) or a prompt function's new text is an entry after the
run's input: the instruction text in full. Compaction keeps every entry, since what is in effect
must stay so; but a text entry a later one replaces says nothing any more. Kept all the same,
each run would add one the compactor can never shed, until a session of a few dozen runs no
longer fits its window (``ContextExceeded`` on every run from then on).
"""

from __future__ import annotations

import json
from typing import Any

from agentloop import Agent, RunConfig
from agentloop.memory import InMemoryMemoryStore, Memory
from agentloop.model import ModelSettings
from agentloop.testing import RecordingObserver

from .test_appendonly_seams import client_of, user
from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

RUNS = 40
POLICY = "Answer in the house style. " * 60  # about 400 tokens of instructions
CONFIG = RunConfig(
    model_settings=ModelSettings(reasoning_effort="low"), context_window=6_000, compaction="local"
)


def answers() -> list[TwinReply]:
    return [TwinReply([twin.thinking(f"t{n}"), twin.text(f"a{n}")]) for n in range(RUNS)]


def text_entries(body: dict[str, Any]) -> list[str]:
    return [json.dumps(m) for m in body["messages"] if m["role"] == "system"]


async def test_a_recall_every_run_never_outgrows_compaction() -> None:
    store = InMemoryMemoryStore()
    seen = RecordingObserver()
    async with AnthropicTwin(answers()) as server:
        agent = Agent(
            client_of(server),
            instructions=POLICY,
            memory=Memory(store, namespace=user, auto_recall=2),
            config=CONFIG,
            observers=[seen],
        )
        for n in range(RUNS):
            await store.put(("user", "ada"), f"topic{n} matters to ada")
            run = await agent.run(f"about topic{n}")
            assert run.output == f"a{n}", n
    assert server.rejected == []
    assert seen.of("on_compaction")  # the window was reached, more than once
    last = server.requests[-1]
    assert "topic39 matters" in text_entries(last)[-1]  # this run's recall is in effect
    stale = [e for e in text_entries(last)[:-1] if "topic39" not in e]
    assert len(stale) < 10  # the entries an older recall replaced were compacted away
    assert len({json.dumps(b["system"]) for b in server.requests}) == 1


async def test_a_prompt_that_changes_every_run_never_outgrows_compaction() -> None:
    versions = iter(range(RUNS))
    async with AnthropicTwin(answers()) as server:
        agent = Agent(
            client_of(server), instructions=lambda: f"{POLICY} v{next(versions)}", config=CONFIG
        )
        outputs = [(await agent.run(f"q{n}")).output for n in range(RUNS)]
    assert outputs == [f"a{n}" for n in range(RUNS)]
    assert server.rejected == []
    kept = [m for m in agent.history if m.role == "system"]
    assert kept[0].text.endswith(" v0") and kept[-1].text.endswith(f" v{RUNS - 1}")
    assert len(kept) < 12
