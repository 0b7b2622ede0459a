"""OpenAI reasoning never replayed to Azure, nor Azure's to OpenAI (issue 40, SPEC 16/28).

A reasoning item's ``encrypted_content`` is readable only by the organisation that wrote it:
OpenAI answers another's with 400 ``invalid_encrypted_content`` (provider-rules "OpenAI" 8,
"Azure <-> OpenAI"), and so do the twins (the Azure twin's ``/openai/v1/responses`` signs with
the resource's own secret). Through a ``FallbackClient`` either way, the second endpoint gets the
conversation without the first's reasoning items, and the run goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest

from agentloop import Agent, FallbackClient, RunConfig, tool
from agentloop.errors import BadRequestError
from agentloop.messages import Message, ThinkingPart
from agentloop.model import ModelSettings
from agentloop.providers.openai.responses import OpenAIResponsesClient as ResponsesClient

from .conftest import serve_app
from .twins.azure import AzureTwin
from .twins.openai_responses import Reply, ResponsesTwin

KEY = "azure-twin-key"
MODEL = "gpt-5.2"
DOWN = Reply(status=503, error={"error": {"message": "overloaded", "type": "server_error"}})
CALL = Reply(calls=[("look", {"q": "x"})])


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class Endpoints:
    """An OpenAI twin and an Azure twin (Responses on both), and clients of each."""

    def __init__(self, stack: AsyncExitStack, openai: ResponsesTwin, azure: AzureTwin) -> None:
        self.stack, self.openai, self.azure = stack, openai, azure
        self.openai_url = self.azure_url = ""

    async def responses_client(self, where: str) -> ResponsesClient:
        if where == "openai":
            built = ResponsesClient(MODEL, api_key=self.openai.key, base_url=self.openai_url)
        else:  # Azure's v1 API: the key as ``api-key``, never a bearer token
            built = ResponsesClient(
                MODEL, base_url=f"{self.azure_url}/openai/v1", headers={"api-key": KEY}
            )
        self.stack.push_async_callback(built.aclose)
        return built


@asynccontextmanager
async def endpoints(openai: list[Reply], azure: list[Reply]) -> AsyncIterator[Endpoints]:
    async with AsyncExitStack() as stack:
        twins = Endpoints(
            stack,
            ResponsesTwin(*openai),
            AzureTwin(key=KEY, deployments=(MODEL,), responses=azure),
        )
        twins.openai_url = f"{await stack.enter_async_context(serve_app(twins.openai.app()))}/v1"
        twins.azure_url = await stack.enter_async_context(serve_app(twins.azure.app()))
        yield twins


def agent(client: Any) -> Agent:
    settings = ModelSettings(reasoning_effort="low")
    return Agent(client, tools=[look], config=RunConfig(model_settings=settings))


def kinds(body: dict[str, Any]) -> list[str]:
    return [i.get("type", "message") for i in body["input"]]


async def test_openai_reasoning_never_reaches_azure_after_a_fallback() -> None:
    async with endpoints([CALL, DOWN], [Reply(text="It is x.")]) as twins:
        fallback = FallbackClient(
            [await twins.responses_client("openai"), await twins.responses_client("azure")]
        )
        run = await agent(fallback).run("x?")
    assert run.output == "It is x."
    assert kinds(twins.openai.accepted[0]) == ["message"]
    thought = run.messages[1].thinking[0]  # OpenAI did reason: kept in the transcript for it
    assert isinstance(thought, ThinkingPart) and thought.signature
    sent = twins.azure.responses.received
    assert [r.status for r in sent] == [200]
    assert kinds(sent[0].body) == ["message", "function_call", "function_call_output"]
    assert twins.azure.urls == ["/openai/v1/responses"]
    assert all("Authorization" not in h for h in twins.azure.headers)


async def test_azure_reasoning_never_reaches_openai_after_a_fallback() -> None:
    async with endpoints([Reply(text="It is x.")], [CALL, DOWN]) as twins:
        fallback = FallbackClient(
            [await twins.responses_client("azure"), await twins.responses_client("openai")]
        )
        run = await agent(fallback).run("x?")
    assert run.output == "It is x."
    assert [r.status for r in twins.openai.received] == [200]
    assert kinds(twins.openai.accepted[0]) == ["message", "function_call", "function_call_output"]


async def test_each_endpoint_still_gets_its_own_reasoning_back() -> None:
    """The filter is by origin, not a blanket drop: Azure's second call carries Azure's item."""
    async with endpoints([], [CALL, Reply(text="It is x.")]) as twins:
        run = await agent(await twins.responses_client("azure")).run("x?")
    assert run.output == "It is x."
    second = twins.azure.responses.accepted[1]
    assert kinds(second) == ["message", "reasoning", "function_call", "function_call_output"]


async def test_the_azure_twin_answers_openais_blob_with_invalid_encrypted_content() -> None:
    """Were the origin lost (an old transcript), the Azure twin answers OpenAI's own 400."""
    async with endpoints([CALL, Reply(text="It is x.")], []) as twins:
        first = agent(await twins.responses_client("openai"))
        await first.run("x?")
        history = [_unmarked(m) for m in first.history]  # as stored before origins existed
        again = agent(await twins.responses_client("azure"))
        with pytest.raises(BadRequestError) as info:
            await again.session(history=history).run("and y?")
    assert "could not be verified" in str(info.value)
    assert twins.azure.responses.received[0].status == 400


def _unmarked(message: Message) -> Message:
    data = message.to_dict()
    for part in data["parts"]:
        part.pop("origin", None)
    return Message.from_dict(data)
