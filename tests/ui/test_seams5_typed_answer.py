"""A typed answer's ``final_result`` call ends in the browser too (real clients, real wire).

With ``Agent(output_type=...)`` the model answers by calling ``final_result``. The engine keeps
those calls out of its tool-call events (docs/streaming.md: they are the answer, not tools), but
the UI apps streamed them as tool calls (AG-UI TOOL_CALL_START..END; Vercel tool-input-start,
tool-input-available) and nothing ever ended them: the end user's chat showed a ``final_result``
call that never finished, for an invalid answer the model was told to fix and for the accepted
one alike. Now each ends with what the model read (``Invalid output: ...`` as a soft error,
``Final result accepted.``), from the turn's results; a run that gives up on its answer first
(``OutputValidationFailed``) ends it with the interrupted text.

The model is the fake provider server behind the real adapter; the clients are
``@ag-ui/client`` (its stream passes ``ag-ui-validate``) and the ``ai`` package's chat.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from tests.ui.test_seams_events import ag_ui, vercel

from agentloop import Agent, RunConfig
from agentloop.providers import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall
from agentloop.transcript import INTERRUPTED_TEXT

INVALID = "Invalid output: population: Field required"


class City(BaseModel):
    name: str
    population: int


@asynccontextmanager
async def typed_agent() -> AsyncIterator[Agent[Any]]:
    script = [
        FakeReply(tool_calls=[FakeToolCall("final_result", {"name": "Paris"}, id="f1")]),
        FakeReply(
            tool_calls=[FakeToolCall("final_result", {"name": "Paris", "population": 2}, id="f2")]
        ),
    ]
    async with FakeProviderServer(script) as fake:
        async with OpenAIClient("fake-model", api_key="k", base_url=fake.base_url) as client:
            yield Agent(client, output_type=City)


async def test_ag_ui_each_final_result_call_ends_with_what_the_model_read(tmp_path: Path) -> None:
    async with typed_agent() as agent:
        seen = await ag_ui(agent, "the biggest city", tmp_path)
    assert seen["error"] is None and seen["outcome"] == "success"
    assert seen["result"] == {"name": "Paris", "population": 2}
    assert seen["unfinished"] == []
    assert seen["calls"]["f1"]["results"] == [{"content": INVALID, "error": True}]
    assert seen["calls"]["f2"]["results"] == [{"content": "Final result accepted.", "error": False}]


async def test_vercel_each_final_result_call_ends_with_what_the_model_read() -> None:
    async with typed_agent() as agent:
        seen = await vercel(agent, "the biggest city")
    assert seen["errors"] == [] and seen["unfinished"] == []
    calls = {p["toolCallId"]: p for p in seen["parts"] if p["type"] == "tool-final_result"}
    assert (calls["f1"]["state"], calls["f1"]["errorText"]) == ("output-error", INVALID)
    assert (calls["f2"]["state"], calls["f2"]["output"]) == (
        "output-available",
        "Final result accepted.",
    )
    [output] = [p for p in seen["parts"] if p["type"] == "data-output"]
    assert output["data"] == {"name": "Paris", "population": 2}


@asynccontextmanager
async def failing_typed_agent() -> AsyncIterator[Agent[Any]]:
    script = [FakeReply(tool_calls=[FakeToolCall("final_result", {"name": "Paris"}, id="f1")])]
    async with FakeProviderServer(script) as fake:
        async with OpenAIClient("fake-model", api_key="k", base_url=fake.base_url) as client:
            yield Agent(client, output_type=City, config=RunConfig(output_retries=0))


async def test_ag_ui_a_run_that_gives_up_on_its_answer_ends_its_call(tmp_path: Path) -> None:
    async with failing_typed_agent() as agent:
        seen = await ag_ui(agent, "the biggest city", tmp_path)
    assert seen["error"]["code"] == "OutputValidationFailed" and seen["unfinished"] == []
    assert seen["calls"]["f1"]["results"] == [{"content": INTERRUPTED_TEXT, "error": True}]


async def test_vercel_a_run_that_gives_up_on_its_answer_ends_its_call() -> None:
    async with failing_typed_agent() as agent:
        seen = await vercel(agent, "the biggest city")
    assert seen["unfinished"] == [] and seen["errors"][0].startswith("OutputValidationFailed: ")
    [call] = [p for p in seen["parts"] if p["type"] == "tool-final_result"]
    assert (call["state"], call["errorText"]) == ("output-error", INTERRUPTED_TEXT)
