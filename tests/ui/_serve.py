"""The UI tests' real server: a UI app on uvicorn on a free port of 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn


@contextlib.asynccontextmanager
async def serving(app: Any, path: str = "/agent") -> AsyncIterator[str]:
    """Serve ``app`` (lifespan off) while the block runs; yields its URL ending in ``path``."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}{path}"
    finally:
        server.should_exit = True
        await task
        sock.close()
