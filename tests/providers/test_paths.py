"""A model name goes into a URL path as one safe segment, or not at all (issue 32, item 8).

Gemini puts the model in the path (``/v1beta/models/{model}:generateContent``). Against a real
server on 127.0.0.1 that records every path it is asked for: a hostile name is a
``ConfigurationError`` naming it before any request, whether given to the client or per request
(``ModelRequest.model``, as ``FallbackClient`` sets it), and real names still reach their path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from agentloop.errors import ConfigurationError
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.providers._paths import path_segment
from agentloop.providers.gemini import GeminiClient
from agentloop.providers.settings import Settings, build_client

from .conftest import serve_app
from .twins.gemini import GeminiTwin, Reply, text

KEY = "twin-key"
HI = ModelRequest(messages=[Message.user("hi")])
HOSTILE = [
    "../../admin/delete?x=",
    "gemini-2.5-flash/../../admin",
    "models/../admin",
    "models/../../admin/delete?x=",
    "tunedModels/../../admin",
    "tunedModels/",
    "..",
    ".",
    "gemini-2.5-flash?alt=json",
    "gemini-2.5-flash#x",
    "gemini-2.5-flash:streamGenerateContent",
    "gemini%2F..%2Fadmin",
    "gemini 2.5",
    "gemini-2.5-flash\n",
    "files/abc",
    "-leading-dash",
    "g" * 300,
]


@asynccontextmanager
async def recording_server(*replies: Reply) -> AsyncIterator[tuple[str, list[str]]]:
    """The Gemini twin, and every path any request asked for (matched by a route or not)."""
    paths: list[str] = []

    @web.middleware
    async def record(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        paths.append(request.raw_path)
        return await handler(request)

    app = GeminiTwin(*replies, key=KEY).app()
    app.middlewares.append(record)
    async with serve_app(app) as url:
        yield f"{url}/v1beta", paths


@pytest.mark.parametrize("model", HOSTILE)
async def test_a_hostile_model_is_refused_at_construction_naming_it(model: str) -> None:
    async with recording_server(Reply([text("ok")])) as (base_url, paths):
        with pytest.raises(ConfigurationError, match="cannot go in the request's URL path") as e:
            GeminiClient(model, api_key=KEY, base_url=base_url)
        if model == model.strip():  # Settings strips the name (a pasted newline) first
            settings = Settings(provider="gemini", model=model, api_key=KEY, base_url=base_url)
            with pytest.raises(ConfigurationError, match="URL path"):
                build_client(settings)
    assert repr(model)[:40] in str(e.value) and "letters, digits" in str(e.value)
    assert e.value.field == "model"
    assert paths == []


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("model", HOSTILE[:6])
async def test_a_hostile_request_model_never_reaches_the_server(model: str, stream: bool) -> None:
    async with recording_server(Reply([text("ok")])) as (base_url, paths):
        client = GeminiClient("gemini-2.5-flash", api_key=KEY, base_url=base_url)
        request = ModelRequest(messages=HI.messages, model=model)
        with pytest.raises(ConfigurationError, match="URL path"):
            if stream:
                [event async for event in client.stream(request)]
            else:
                await client.complete(request)
        await client.aclose()
    assert paths == []


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("model", "path"),
    [
        ("gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash"),
        ("models/gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash"),
        ("gemini-1.5-flash-001", "/v1beta/models/gemini-1.5-flash-001"),
        ("gemini-2.5-flash-preview-05-20", "/v1beta/models/gemini-2.5-flash-preview-05-20"),
        ("tunedModels/sentence-translator-u3b7m", "/v1beta/tunedModels/sentence-translator-u3b7m"),
    ],
)
async def test_real_model_names_reach_their_own_path(model: str, path: str, stream: bool) -> None:
    async with recording_server(Reply([text("ok")]), Reply([text("again")])) as (base_url, paths):
        client = GeminiClient(model, api_key=KEY, base_url=base_url)
        method = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        if stream:
            events = [event async for event in client.stream(HI)]
            assert events[-1].response is not None and events[-1].response.text == "ok"
        else:
            assert (await client.complete(HI)).text == "ok"
        # the same name as a per-request override goes to the same path
        override = ModelRequest(messages=HI.messages, model=model)
        assert (await client.complete(override)).text == "again"
        await client.aclose()
    assert paths == [path + method, path + ":generateContent"]


def test_the_shared_check_takes_a_providers_own_characters() -> None:
    """Vertex model ids carry ``@<date>``; a separator is never allowed."""
    assert path_segment("claude-sonnet-4-5@20250929", provider="Vertex", example="x", extra="@")
    with pytest.raises(ConfigurationError, match="'@'"):
        path_segment("claude@x/../y", provider="Vertex", example="claude-sonnet-4-5", extra="@")
    with pytest.raises(ConfigurationError, match="Azure deployment a int"):
        path_segment(42, provider="Azure", what="deployment", example="my-gpt")
