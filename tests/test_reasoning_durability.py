"""Reasoning parts outlive the process (SPEC 16): the store, ``Agent.resume``, the continuation
journal, pickling (DBOS steps), a new client instance, and compaction, which keeps or drops a
reasoning part only together with its assistant message.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from agentloop import Agent, RunConfig, tool
from agentloop.context import TruncatingCompactor
from agentloop.engine.journal import Journal
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, Usage
from agentloop.model import ModelRequest, ModelResponse
from agentloop.store import SQLiteStore
from agentloop.testing import FunctionModel


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def thinking_model(seen: list[ModelRequest]) -> FunctionModel:
    """Thinks (signed) before each call; checks every earlier signature comes back unchanged."""

    def answer(request: ModelRequest) -> Any:
        seen.append(request)
        sent = [p for m in request.messages for p in m.thinking]
        assert sent == [
            ThinkingPart(f"step {i}", signature=f"sig{i}", provider="scripted")
            for i in range(len(sent))
        ]
        n = len(sent)
        thought = ThinkingPart(f"step {n}", signature=f"sig{n}", provider="scripted")
        if n < 2:
            call = ToolCallPart(f"c{n}", "look", {"q": str(n)})
            message = Message("assistant", (thought, call))
        else:
            message = Message("assistant", (thought, TextPart("done")))
        return ModelResponse(message, usage=Usage(3, 5, reasoning_tokens=4), stop_reason="stop")

    return FunctionModel(answer)


async def test_reasoning_survives_the_store_resume_and_a_new_client(tmp_path: Path) -> None:
    seen: list[ModelRequest] = []
    with SQLiteStore(tmp_path / "r.db") as store:
        agent = Agent(thinking_model(seen), tools=[look], store=store, session_id="s")
        run = await agent.run("go")
        assert run.output == "done" and run.usage.reasoning_tokens == 12
        history = agent.history
        assert sum(len(m.thinking) for m in history) == 3
    with SQLiteStore(tmp_path / "r.db") as store:
        resumed = Agent.resume("s", store=store, client=thinking_model(seen), tools=[look])
        assert resumed.history == history
        assert resumed.runs[0].usage.reasoning_tokens == 12
        # the thinking model checks every signature it sees: they all come back unchanged
        again = await resumed.run("again")
    assert again.output == "done" and len(seen) == 4  # the first 3, then 1 (sent all 3 back)


def test_a_journaled_reply_keeps_its_reasoning() -> None:
    written: dict[str, Any] = {}
    journal = Journal(lambda run_id, key, value: written.__setitem__(key, value))
    journal.start("r1")
    message = Message(
        "assistant",
        (ThinkingPart("t", signature="s", provider="anthropic"), ToolCallPart("c", "look", {})),
    )
    journal.record(
        "t0/reply", {"message": message.to_dict(), "usage": Usage(1, 2, 0, 0, 1).to_dict()}
    )
    reply = journal.reply(0)
    assert reply is not None and reply.message == message and reply.usage.reasoning_tokens == 1


def test_a_reply_with_reasoning_pickles_for_a_durable_step() -> None:
    message = Message("assistant", (ThinkingPart("", signature="x", redacted=True),))
    response = ModelResponse(message, usage=Usage(1, 1, reasoning_tokens=1))
    assert pickle.loads(pickle.dumps(response)) == response


def test_compaction_keeps_or_drops_reasoning_with_its_message_never_edits_it() -> None:
    messages = [Message.user("task")]
    for n in range(6):
        thought = ThinkingPart(f"t{n}", signature=f"s{n}", provider="anthropic")
        call = ToolCallPart(f"c{n}", "look", {"q": str(n)})
        messages.append(Message("assistant", (thought, call)))
        messages.append(Message.tool_results([]))  # results elided: the shape is what matters
    compacted = TruncatingCompactor(preserve_recent=4, min_messages=4).truncate(messages)
    originals = {id(m): m for m in messages}
    for message in compacted:
        if message.role == "assistant":
            assert any(message == m for m in originals.values())  # whole, unchanged
    assert RunConfig().compactor is not None
