"""An append-only conversation (SPEC 28) through a handoff chain, a skill, a sub-agent and more.

On the twin of an append-only Claude, over three runs of one session:

- run 1: triage calls a sub-agent (its own conversation), hands off to billing (skills: it loads
  one), billing hands off to refunds (other instructions, tools), refunds answers;
- run 2: the session's own agent again, with a toolset added for that run only (``run(toolsets=)``);
- run 3: the same agent without it (the tool is removed as an entry).

Every request of the session's conversation extends the one before; the sub-agent's requests
are a conversation of their own; each agent's instructions and tools arrive as entries.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentloop import Agent, handoff, tool
from agentloop.skills import SkillSet
from agentloop.toolsets import FunctionToolset

from .test_seams5_appendonly_retry import CONFIG, answer, bare, one_conversation, twin_client
from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool
def rate(order: str) -> str:
    """Rate an order's service."""
    return f"rated {order}"


def call(n: int, name: str, arguments: dict[str, Any]) -> TwinReply:
    return TwinReply([twin.thinking(f"t{n}"), twin.tool_use(name, arguments)], "tool_use")


def skills(tmp_path: Path) -> SkillSet:
    folder = tmp_path / "skills" / "refund-policy"
    folder.mkdir(parents=True)
    text = "---\nname: refund-policy\ndescription: How refunds work.\n---\nRefund within 30 days.\n"
    (folder / "SKILL.md").write_text(text)
    return SkillSet(tmp_path / "skills")


def agents(server: AnthropicTwin, tmp_path: Path) -> Agent[Any]:
    client = twin_client(server)
    refunds = Agent(client, name="refunds", instructions="You refund.", tools=[refund],
                    config=CONFIG)  # fmt: skip
    billing = Agent(
        client,
        name="billing",
        instructions="You handle billing.",
        toolsets=[skills(tmp_path)],
        handoffs=[handoff(refunds)],
        config=CONFIG,
    )
    helper = Agent(client, name="helper", instructions="You help.", config=CONFIG)
    return Agent(
        client,
        instructions="You route.",
        tools=[look, helper.as_tool(name="ask_helper", description="Ask the helper.")],
        handoffs=[handoff(billing)],
        config=CONFIG,
    )


SCRIPT = [
    call(1, "look", {"q": "order"}),
    call(2, "ask_helper", {"input": "what is A1?"}),
    answer("A1 is a lamp"),  # the helper's own conversation
    call(3, "transfer_to_billing", {}),
    call(4, "load_skill", {"name": "refund-policy"}),
    call(5, "transfer_to_refunds", {}),
    call(6, "refund", {"order": "A1"}),
    answer("refunded"),
    call(7, "rate", {"order": "A1"}),
    answer("rated"),
    call(8, "look", {"q": "again"}),
    answer("three"),
]


async def test_a_chain_a_skill_a_sub_agent_and_a_run_toolset_keep_one_conversation(
    tmp_path: Path,
) -> None:
    async with AnthropicTwin(list(SCRIPT)) as server:
        agent = agents(server, tmp_path)
        one = await agent.run("refund A1")
        two = await agent.run("rate A1", toolsets=[FunctionToolset([rate], name="rating")])
        three = await agent.run("look again")
    assert (one.output, two.output, three.output) == ("refunded", "rated", "three")
    assert server.rejected == []
    helper = [b for b in server.requests if "You help." in json.dumps(b["system"])]
    session = [b for b in server.requests if b not in helper]
    assert len(helper) == 1 and len(session) == 11
    one_conversation(session)
    last = json.dumps(bare(session[-1]["messages"]))
    for text in ("You handle billing.", "You refund.", "Refund within 30 days."):
        assert text in last
    assert '"tool_removal"' in last  # run 3: rate is gone
    assert '"A1 is a lamp"' in last or "A1 is a lamp" in last  # the sub-agent's answer
