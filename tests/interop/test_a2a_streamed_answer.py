"""A streamed A2A task's artifact is its answer (SPEC 26 x 18): text said before a tool call is not.

A run's every ``TextDelta`` is streamed as an ``append`` to the ``output`` artifact, also the
text a turn says before its tool calls ("Let me check."), which is not the run's output. The
artifact a streaming client assembled then differed from the task's (``GetTask``) and from the
non-streamed answer, and ``RemoteA2AAgent`` (which streams when the card says so) handed its
parent every turn's text. Now a text output the deltas did not make is sent once more as a
replacing update (``append=false``, ``last_chunk``) before the final status. Official a2a-sdk
client over uvicorn on 127.0.0.1.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb

from agentloop import Agent, tool
from agentloop.a2a import RemoteA2AAgent
from agentloop.messages import Message, TextPart, ToolCallPart, ToolResultPart
from agentloop.model import ModelResponse
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@tool
def forecast(city: str) -> str:
    """The forecast for a city."""
    return f"21C in {city}"


def _weather() -> Agent[Any]:
    said = Message(
        "assistant",
        (TextPart("Let me check. "), ToolCallPart("c1", "forecast", {"city": "Oslo"})),
    )
    steps = [ModelResponse(said, stop_reason="tool_use"), reply("It is 21C in Oslo.")]
    return Agent(ScriptedModel(steps), tools=[forecast])


def _assembled(items: list[pb.StreamResponse]) -> str:
    text = ""
    for item in items:
        if item.HasField("artifact_update"):
            update = item.artifact_update
            chunk = "".join(p.text for p in update.artifact.parts)
            text = text + chunk if update.append else chunk
    return text


async def test_a_streaming_client_assembles_the_answer_not_every_turns_text() -> None:
    app = _weather().to_a2a(name="weather")
    async with serving(app) as url, client(url, streaming=True) as made:
        items = await send(made, user("Weather in Oslo?"))
        task = await made.get_task(pb.GetTaskRequest(id=items[0].task.id))
    assert _assembled(items) == "It is 21C in Oslo." == task.artifacts[0].parts[0].text
    updates = [i.artifact_update for i in items if i.HasField("artifact_update")]
    assert updates[-1].last_chunk and not updates[-1].append  # the one replacing update
    assert items[-1].status_update.status.state == pb.TASK_STATE_COMPLETED


async def test_a_remote_agent_hands_its_parent_the_answer() -> None:
    async with serving(_weather().to_a2a(name="weather")) as url:
        parent_model = ScriptedModel([call("weather", {"input": "Oslo?"}), reply("done")])
        parent = Agent(parent_model, tools=[RemoteA2AAgent(url)])
        await parent.run("ask the weather agent")
        await parent.aclose()
    [result] = [
        p
        for m in parent_model.requests[1].messages
        for p in m.parts
        if isinstance(p, ToolResultPart)
    ]
    assert result.content == "It is 21C in Oslo."
