"""ASGI plumbing both UI apps share: the answer to a server's lifespan messages.

Neither app has anything to start or stop, but a server (or Starlette's ``TestClient`` used as
a context manager) that sends ``lifespan.startup`` waits for its answer; an app that returned
without one fails the client's start-up or leaves the server guessing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import Receive, Send

__all__ = ["lifespan"]


async def lifespan(receive: Receive, send: Send) -> None:
    """Nothing to start or stop; answer the server's lifespan messages until shutdown."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
