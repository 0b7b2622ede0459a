"""Real parts for the A2A tests: uvicorn on 127.0.0.1 and the official a2a-sdk client."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb


@contextlib.asynccontextmanager
async def serving(app: Any, *, lifespan: bool = False) -> AsyncIterator[str]:
    """A uvicorn server for ``app`` on a free port of 127.0.0.1; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="on" if lifespan else "off",
        log_level="warning",
        timeout_graceful_shutdown=1,
        access_log=False,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:  # noqa: ASYNC110  (uvicorn has no event for it)
            await asyncio.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@contextlib.asynccontextmanager
async def client(url: str, *, streaming: bool = False) -> AsyncIterator[Client]:
    """The official client, built from the card its resolver reads."""
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        config = ClientConfig(streaming=streaming, httpx_client=http)
        made = ClientFactory(config).create(card)
        try:
            yield made
        finally:
            await made.close()


def user(
    text: str = "", *, context_id: str = "", task_id: str = "", data: Any = None
) -> pb.SendMessageRequest:
    """A SendMessage request with a text part (and a data part when given)."""
    message = pb.Message(
        message_id="m-" + (text or "data")[:8],
        role=pb.ROLE_USER,
        context_id=context_id,
        task_id=task_id,
    )
    if text:
        message.parts.append(pb.Part(text=text))
    if data is not None:
        part = pb.Part()
        part.data.struct_value.update(data)
        message.parts.append(part)
    return pb.SendMessageRequest(message=message)


async def send(made: Client, request: pb.SendMessageRequest) -> list[pb.StreamResponse]:
    """Every response of one send_message."""
    return [item async for item in made.send_message(request)]
