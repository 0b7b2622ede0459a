"""Guardrails in durable runs (SPEC 19 x 14): a trip ends the run typed, whatever engine runs it.

An output guardrail that trips in a ``DBOSAgent`` or ``TemporalAgent`` run comes back from
``run`` as ``GuardrailTripped`` with its guardrail and reason, after the run's tool calls ran
once; a rejecting one (``retry=True``) makes the model answer again inside the workflow; an
async check with a timeout runs in Temporal's workflow loop; an input guardrail that trips
sends nothing. A replay of a finished DBOS run checks again and comes to the same verdict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, tool
from agentloop.errors import GuardrailTripped
from agentloop.guardrails import GuardrailContext, InputGuardrail, OutputGuardrail
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call, reply

effects: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers (counted)."""
    effects.append(f"add {a} {b}")
    return a + b


def answering(request: ModelRequest) -> Any:
    """A call, then an answer naming a secret word, then (after a rejection) a clean one."""
    tools = [m for m in request.messages if m.role == "tool"]
    rejected = any("Output rejected" in m.text for m in request.messages if m.role == "user")
    if not tools:
        return call("add", {"a": 2, "b": 3})
    return reply("the sum is 5" if rejected else "the sum is 5, swordfish")


async def no_swordfish(ctx: GuardrailContext[Any], value: Any) -> str | None:
    await asyncio.sleep(0)
    return "names the password" if "swordfish" in str(value) else None


def no_wire_transfers(ctx: GuardrailContext[Any], value: Any) -> str | None:
    return "asks for a wire transfer" if "wire" in str(value) else None


def agent(*, retry: bool = False) -> Agent[str | None]:
    return Agent(
        FunctionModel(answering),
        tools=[add],
        guardrails=[
            InputGuardrail(no_wire_transfers),
            OutputGuardrail(no_swordfish, retry=retry, timeout=5.0),
        ],
    )


@pytest.fixture
def dbos_url(tmp_path: Path) -> Iterator[str]:
    pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")
    from dbos import DBOS

    effects.clear()
    yield f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS.destroy(destroy_registry=True)


async def test_dbos_an_output_guardrail_trips_typed_and_a_replay_agrees(dbos_url: str) -> None:
    from dbos import DBOS

    from agentloop.durable.dbos import DBOSAgent

    durable = DBOSAgent(agent(), name="guarded")
    retrying = DBOSAgent(agent(retry=True), name="retrying")
    DBOS(config={"name": "agentloop-tests", "system_database_url": dbos_url, "log_level": "ERROR"})
    DBOS.launch()
    with pytest.raises(GuardrailTripped) as raised:
        await durable.run("add 2 and 3", workflow_id="wf-trip")
    assert (raised.value.guardrail, raised.value.reason) == ("no_swordfish", "names the password")
    assert effects == ["add 2 3"]
    steps = len(await DBOS.list_workflow_steps_async("wf-trip"))
    fork = await DBOS.fork_workflow_async("wf-trip", steps + 1)
    with pytest.raises(GuardrailTripped):
        await fork.get_result()
    assert effects == ["add 2 3"]  # the replay ran no tool again

    run = await retrying.run("add 2 and 3")
    assert run.output == "the sum is 5" and effects == ["add 2 3"] * 2
    with pytest.raises(GuardrailTripped) as raised:
        await durable.run("send a wire transfer")
    assert raised.value.guardrail == "no_wire_transfers" and effects == ["add 2 3"] * 2


async def test_temporal_an_output_guardrail_trips_typed(client: Any) -> None:
    from agentloop.durable.temporal import TemporalAgent

    effects.clear()
    durable = TemporalAgent(agent(), name="guarded")
    retrying = TemporalAgent(agent(retry=True), name="retrying")
    async with durable.worker(client), retrying.worker(client):
        with pytest.raises(GuardrailTripped) as raised:
            await durable.run("add 2 and 3", client=client)
        assert raised.value.guardrail == "no_swordfish"
        assert raised.value.reason == "names the password"
        assert raised.value.summary is not None
        assert effects == ["add 2 3"]
        run = await retrying.run("add 2 and 3", client=client)
        assert run.output == "the sum is 5" and effects == ["add 2 3"] * 2
        with pytest.raises(GuardrailTripped) as raised:
            await durable.run("send a wire transfer", client=client)
        assert raised.value.guardrail == "no_wire_transfers" and effects == ["add 2 3"] * 2
