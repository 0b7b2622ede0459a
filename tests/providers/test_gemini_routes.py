"""Gemini signatures stay on their route (SPEC 16/28): the Gemini API and Vertex are two readers.

A thought signature records the model and the route that wrote it (``<model>|<provider>:<host>``,
``gemini._encode.reader``). After a fallback between Gemini on Vertex and the Gemini API with
the same model name, neither gets the other's signatures: the interrupted call gets Google's
bypass value instead. The twins sign differently, so a signature replayed across them is
Google's 400 "Corrupted thought signature.".
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentloop import Agent, FallbackClient, RunConfig
from agentloop.errors import BadRequestError
from agentloop.messages import Message, ThinkingPart, ToolCallPart
from agentloop.model import ModelRequest, ModelSettings
from agentloop.providers.gemini import build_payload

from . import test_gemini_2026 as api
from . import test_vertex as vertex
from .twins.gemini import BYPASS, Reply, call, text

google_env = vertex.google_env
MODEL = "gemini-3.8-flash"
CALL_THEN_DOWN = (Reply([call("read_file", {"path": "a.txt"})]),
                  Reply.failing(503, "The model is overloaded."))  # fmt: skip
ANSWER = Reply([text("It says hi.")])


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    yield
    while vertex._OPEN:
        await vertex._OPEN.pop().aclose()


def agent(client: Any) -> Agent:
    config = RunConfig(model_settings=ModelSettings(reasoning_effort="low"))
    return Agent(client, tools=[vertex.read_file], config=config)


def model_turn(body: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = body["contents"][1]
    assert turn["role"] == "model"
    return turn


async def test_the_gemini_apis_signature_never_reaches_vertex() -> None:
    async with (
        api.twin_at(*CALL_THEN_DOWN) as (_, g_url),
        vertex.twin_at(gemini=[ANSWER]) as (twin, v_url),
    ):
        fallback = FallbackClient([api.client(g_url, MODEL), vertex.client(v_url, MODEL)])
        run = await agent(fallback).run("read a.txt")
    assert run.output == "It says hi." and twin.refused == []
    signed = run.messages[1].thinking[0]
    assert signed.origin is not None and signed.origin.startswith(f"{MODEL}|gemini:")
    assert model_turn(twin.bodies[0])["parts"][0]["thoughtSignature"] == BYPASS
    assert signed.signature and signed.signature not in str(twin.bodies[0])


async def test_vertexs_signature_never_reaches_the_gemini_api() -> None:
    async with (
        vertex.twin_at(gemini=list(CALL_THEN_DOWN)) as (_, v_url),
        api.twin_at(ANSWER) as (gemini, g_url),
    ):
        fallback = FallbackClient([vertex.client(v_url, MODEL), api.client(g_url, MODEL)])
        run = await agent(fallback).run("read a.txt")
    assert run.output == "It says hi."
    signed = run.messages[1].thinking[0]
    assert signed.origin == f"{MODEL}|vertex:{v_url.removeprefix('http://')}/twin-project"
    sent = gemini.received[-1].body
    assert model_turn(sent)["parts"][0]["thoughtSignature"] == BYPASS
    assert signed.signature and signed.signature not in str(sent)


async def test_a_signature_goes_back_on_its_own_route() -> None:
    script = [Reply([call("read_file", {"path": "a.txt"})]), ANSWER]
    async with vertex.twin_at(gemini=script) as (twin, url):
        run = await agent(vertex.client(url, MODEL)).run("read a.txt")
    assert run.output == "It says hi." and twin.refused == []
    assert model_turn(twin.bodies[1])["parts"][0]["thoughtSignature"].startswith("twin-sig-vertex-")


async def test_the_twins_refuse_a_signature_from_the_other_route() -> None:
    """With the route lost (a part stored with the model only), Vertex answers Google's 400."""
    async with api.twin_at(Reply([call("read_file", {"path": "a.txt"})]), ANSWER) as (_, g_url):
        first = agent(api.client(g_url, MODEL))
        await first.run("read a.txt")
    history = [_model_only(m) for m in first.history]
    async with vertex.twin_at(gemini=[ANSWER]) as (twin, v_url):
        with pytest.raises(BadRequestError, match="Corrupted thought signature"):
            await agent(vertex.client(v_url, MODEL)).session(history=history).run("again")
    assert twin.refused == ["Corrupted thought signature."]


def test_build_payload_without_a_route_compares_the_model_only() -> None:
    routed = ThinkingPart("", signature="S1", provider="gemini", origin=f"{MODEL}|vertex:h/p")
    history = (
        Message.user("go"),
        Message("assistant", (routed, ToolCallPart("c1", "read_file", {"path": "a"}))),
    )
    request = ModelRequest(messages=history)
    assert build_payload(request, MODEL)["contents"][1]["parts"][0]["thoughtSignature"] == "S1"
    there = build_payload(request, MODEL, "vertex:h/p")["contents"][1]["parts"][0]
    elsewhere = build_payload(request, MODEL, "gemini:h")["contents"][1]["parts"][0]
    assert there["thoughtSignature"] == "S1" and elsewhere["thoughtSignature"] == BYPASS


def _model_only(message: Message) -> Message:
    data = message.to_dict()
    for part in data["parts"]:
        if part.get("origin"):
            part["origin"] = part["origin"].partition("|")[0]
    return Message.from_dict(data)
