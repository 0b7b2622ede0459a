"""An output guardrail that blocks or rejects answers on an append-only conversation (19 x 28).

On the twin: a run whose answer trips a guardrail (no retry) commits no answer, and the
session's next run extends what the tripped run sent (its tool turn's thinking goes back as
sent); a rejected answer's placeholder (``retry=True``), streamed, is written before the
retry's request and sent unchanged after, over a later run whose prompt changed.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Agent, RunConfig
from agentloop.errors import GuardrailTripped
from agentloop.guardrails import GuardrailContext, OutputGuardrail
from agentloop.model import ModelSettings

from .test_seams5_appendonly_retry import (
    CONFIG,
    Versions,
    answer,
    look,
    one_conversation,
    step,
    twin_client,
)
from .twins.anthropic import AnthropicTwin


def texts(body: dict[str, Any]) -> str:
    """The text blocks a request sends (a kept thinking block may quote the answer)."""
    return str([b for m in body["messages"] for b in m["content"] if b.get("type") == "text"])


def no_secrets(ctx: GuardrailContext[Any], value: Any) -> str | None:
    return "it says a forbidden word" if "secret" in str(value) else None


async def test_a_tripped_answer_leaves_the_next_run_extending_what_was_sent() -> None:
    script = [step(1, "a"), answer("one"), step(2, "b"), answer("the secret"), answer("three")]
    async with AnthropicTwin(script) as server:
        agent = Agent(twin_client(server), instructions=Versions(), tools=[look], config=CONFIG,
                      guardrails=[OutputGuardrail(no_secrets)])  # fmt: skip
        await agent.run("one")
        with pytest.raises(GuardrailTripped):
            await agent.run("two")
        three = await agent.run("three")
    assert three.output == "three" and server.rejected == []
    one_conversation(server.requests)
    assert "the secret" not in texts(server.requests[-1])


@pytest.mark.parametrize("stream", [False, True])
async def test_a_rejected_answers_placeholder_is_sent_unchanged_in_later_runs(stream: bool) -> None:
    script = [step(1, "a"), answer("the secret"), answer("one"), step(2, "b"), answer("two")]
    config = RunConfig(model_settings=ModelSettings(reasoning_effort="low"), stream=stream)
    async with AnthropicTwin(script) as server:
        agent = Agent(twin_client(server), instructions=Versions(), tools=[look], config=config,
                      guardrails=[OutputGuardrail(no_secrets, retry=True)])  # fmt: skip
        one = await agent.run("one")
        two = await agent.run("two")
    assert (one.output, two.output) == ("one", "two") and server.rejected == []
    one_conversation(server.requests)
    assert "the secret" not in texts(server.requests[-1])
