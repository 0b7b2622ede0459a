"""A governor that fails after its request was answered keeps the answer (SPEC 25 x SPEC 4).

``GovernorUnavailable`` fails closed before a request: nothing is sent. Once a request was
admitted and answered, a backend that cannot record the reply's usage (``settle``) changes
nothing that was sent: the lease expires by itself and the usage stays at its estimate. Before,
the run ended ``GovernorUnavailable`` ("nothing sent") and the paid answer was dropped, so a
caller who ran it again paid twice.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig
from agentloop.fleet import RateGovernor, RateLimit
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeClock, FakeProviderServer, FakeReply, Fault

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_an_answer_outlives_a_backend_lost_while_it_was_in_flight(
    tmp_path: Path, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "governor.db"
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", concurrent=4)], backend=f"sqlite:///{path}",
                            clock=clock)  # fmt: skip

    def answer(body: Mapping[str, Any]) -> FakeReply | Fault:
        governor.close()  # the backend goes away while the request is at the provider
        os.rename(path, tmp_path / "moved.db")
        os.mkdir(path)  # nothing can open it again
        return FakeReply("the answer")

    async with FakeProviderServer([answer]) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url,
                              provider="openai")  # fmt: skip
        agent = Agent(client, governor=governor, clock=clock, config=RunConfig(stream=stream))
        with caplog.at_level(logging.WARNING, logger="agentloop"):
            run = await agent.run("hi")
        await agent.aclose()
    assert run.output == "the answer" and run.stop_reason is None
    assert "could not record" in caplog.text and "governor" in caplog.text
