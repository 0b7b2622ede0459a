"""A typed-output agent over the real OpenAI adapter: the answer is a validated ``Invoice``.

Offline by default: it starts agentloop's fake OpenAI-compatible server on 127.0.0.1, whose
scripted model first gives an invalid answer (the engine tells it why, softly) and then a valid
one. Point it at a real server with ``AGENTLOOP_BASE_URL`` (and ``AGENTLOOP_MODEL``), e.g. the
llama.cpp recipe in docs/benchmarks.md. Run: ``.venv/bin/python examples/typed_output.py``.
"""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel, Field

from agentloop import (
    Agent,
    AgentLoopError,
    ModelSettings,
    RunConfig,
    Settings,
    build_client,
    tool,
)
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall


class Invoice(BaseModel):
    """An invoice for one customer."""

    customer: str
    total: float = Field(description="the amount due, in the currency")
    currency: str = Field(description="ISO 4217 code, e.g. EUR")


@tool
def hours_worked(customer: str) -> int:
    """The hours worked for a customer this month."""
    return {"acme": 12}.get(customer.lower(), 0)


SCRIPT = [
    FakeReply(tool_calls=[FakeToolCall("hours_worked", {"customer": "ACME"})]),
    FakeReply(tool_calls=[FakeToolCall("final_result", {"customer": "ACME", "total": "a lot"})]),
    FakeReply(
        tool_calls=[
            FakeToolCall("final_result", {"customer": "ACME", "total": 1200, "currency": "EUR"})
        ]
    ),
]


async def invoice(base_url: str, model: str) -> Invoice:
    client = build_client(Settings(provider="openai", model=model, base_url=base_url))
    config = RunConfig(model_settings=ModelSettings(temperature=0.0))
    async with Agent(
        client,
        output_type=Invoice,
        tools=[hours_worked],
        system="You bill 100 EUR per hour worked.",
        config=config,
    ) as agent:
        run = await agent.run("Write ACME's invoice for this month.")
        for turn in run.turns:
            for result in turn.tool_results:
                mark = "soft error" if result.is_error else "result"
                print(f"  turn {turn.index}: {result.name} -> {mark}: {result.content}")
        return run.output


async def main() -> None:
    base_url = os.environ.get("AGENTLOOP_BASE_URL")
    if base_url:
        try:
            result = await invoice(base_url, os.environ.get("AGENTLOOP_MODEL", "local"))
        except AgentLoopError as error:  # a hard error: the run is finalized, here is why
            print(f"{type(error).__name__}: {error}")
            print(f"  {error.summary}")
            raise SystemExit(1) from None
    else:
        async with FakeProviderServer(SCRIPT) as server:
            result = await invoice(server.base_url, "fake-model")
    print(f"Invoice: {result.customer} owes {result.total:.2f} {result.currency}")


if __name__ == "__main__":
    asyncio.run(main())
