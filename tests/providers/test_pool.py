"""The connection pool's size: ``max_connections`` on every adapter, ``Settings``, the transport."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from agentloop.errors import ConfigurationError
from agentloop.providers import (
    AnthropicClient,
    GeminiClient,
    OpenAIClient,
    OpenAIResponsesClient,
    Settings,
    build_client,
)
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS, HttpTransport

from .conftest import serve_app

ADAPTERS = [OpenAIClient, OpenAIResponsesClient, AnthropicClient, GeminiClient]


def gated_app(cap: int, seen: set[object], in_flight: list[int]) -> web.Application:
    """Each request waits until ``cap`` are in flight at once, then all of them answer."""
    full = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        seen.add(request.transport.get_extra_info("peername") if request.transport else None)
        in_flight.append(len(in_flight) + 1)
        if len(in_flight) >= cap:
            full.set()
        await full.wait()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/v1/x", handler)
    return app


async def test_the_transport_opens_at_most_max_connections() -> None:
    seen: set[object] = set()
    in_flight: list[int] = []
    transport = HttpTransport(provider="openai", timeout=5, max_connections=2)
    try:
        async with serve_app(gated_app(2, seen, in_flight)) as base:
            replies = await asyncio.gather(
                *(transport.post_json(f"{base}/v1/x", {"n": n}) for n in range(6))
            )
    finally:
        await transport.aclose()
    assert [reply.data for reply in replies] == [{"ok": True}] * 6
    assert len(seen) == 2  # six requests, two connections: the others waited and reused them


async def test_a_larger_pool_serves_more_requests_at_once() -> None:
    seen: set[object] = set()
    in_flight: list[int] = []
    transport = HttpTransport(provider="openai", timeout=5, max_connections=6)
    try:
        async with serve_app(gated_app(6, seen, in_flight)) as base:
            await asyncio.gather(*(transport.post_json(f"{base}/v1/x", {}) for _ in range(6)))
    finally:
        await transport.aclose()
    assert len(seen) == 6  # the gate opens only when all six are in flight at once


@pytest.mark.parametrize("cls", ADAPTERS)
async def test_every_adapter_takes_max_connections(cls: type[OpenAIClient]) -> None:
    client = cls("m", api_key="k-1234", max_connections=7)
    try:
        assert client._transport.max_connections == 7
    finally:
        await client.aclose()
    default = cls("m", api_key="k-1234")
    assert default._transport.max_connections == DEFAULT_MAX_CONNECTIONS


@pytest.mark.parametrize("cls", ADAPTERS)
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10", None])
def test_every_adapter_refuses_a_pool_that_cannot_work(
    cls: type[OpenAIClient], value: object
) -> None:
    with pytest.raises(ConfigurationError, match="max_connections must be") as info:
        cls("m", api_key="k-1234", max_connections=value)  # type: ignore[arg-type]
    assert info.value.field == "max_connections"


@pytest.mark.parametrize(
    ("provider", "api"),
    [("openai", "chat"), ("openai", "responses"), ("anthropic", "auto"), ("gemini", "auto")],
)
async def test_settings_carry_the_pool_size_to_the_client(provider: str, api: str) -> None:
    settings = Settings(provider=provider, api_key="k-1234", api=api, max_connections=9)
    client = build_client(settings)
    try:
        inner: Any = getattr(client, "inner", client)
        assert inner._transport.max_connections == 9
    finally:
        await client.aclose()
    assert "max_connections=9" in repr(settings)


def test_settings_refuse_a_bad_pool_size_and_read_it_from_the_environment() -> None:
    with pytest.raises(ConfigurationError) as info:
        build_client(Settings(provider="openai", api_key="k", max_connections=0))
    assert info.value.field == "max_connections"
    env = {"AGENTLOOP_MAX_CONNECTIONS": "250"}
    assert Settings.from_env(env).max_connections == 250
    assert Settings.from_env({}).max_connections == DEFAULT_MAX_CONNECTIONS
    with pytest.raises(ConfigurationError, match="AGENTLOOP_MAX_CONNECTIONS"):
        Settings.from_env({"AGENTLOOP_MAX_CONNECTIONS": "many"})
