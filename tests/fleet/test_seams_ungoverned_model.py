"""A model no limit of the governor counts still waits out its 429s (SPEC 25 x SPEC 8).

``RetryingClient`` does not sleep beside a governor: the 429 closed the key and the next
attempt waits there. But a governor's limits may name some models or providers only (a
``RateLimit("openai", "primary")``, a fallback chain across providers): a request to a model
none of them counts never passes the governor, and nothing closes a key for it. Its 429 must be
waited out by ``RetryingClient`` as without a governor; before, the retry went out at once,
into the same rate limit, and the request's rate-limit retries were spent in milliseconds.
"""

from __future__ import annotations

import pytest

from agentloop import Agent, FallbackClient, Observer, RetryingClient
from agentloop import events as ev
from agentloop.fleet import RateGovernor, RateLimit
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeClock, FakeProviderServer, FakeReply, Fault

pytestmark = pytest.mark.usefixtures("no_real_sleep")


class Retries(Observer):
    def __init__(self) -> None:
        self.waits: list[float] = []

    def on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.RetryScheduled):
            self.waits.append(event.wait_seconds)


def openai(server: FakeProviderServer, model: str) -> OpenAIClient:
    return OpenAIClient(model, api_key="sk-test", base_url=server.base_url, provider="openai")


async def test_the_backup_model_waits_out_its_own_429() -> None:
    clock = FakeClock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    governor = RateGovernor([RateLimit("openai", "primary", rpm=100)], clock=clock)
    script: list[FakeReply | Fault] = [Fault.auth(), Fault.rate_limit(retry_after=7)]
    script.append(FakeReply("from the backup"))
    async with FakeProviderServer(script) as server:
        chain = FallbackClient(
            [
                RetryingClient(openai(server, "primary"), max_retries=0, sleep=sleep),
                RetryingClient(openai(server, "backup"), sleep=sleep),
            ]
        )
        retries = Retries()
        agent = Agent(chain, governor=governor, clock=clock, observers=[retries])
        run = await agent.run("hi")
    assert run.output == "from the backup"
    assert retries.waits == [7.0] and slept == [7.0]  # the backup's retry waited its Retry-After
