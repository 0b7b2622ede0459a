"""A child process of the fleet tests (and the bench): send requests under a shared governor.

``python _governed_child.py BACKEND BASE_URL REQUESTS RPM WINDOW [CONCURRENCY]`` sends REQUESTS
chat requests through a ``GovernedClient`` (no retries: a 429 is a failure), at most
CONCURRENCY at once, and prints one JSON line: ``{"ok": N, "failed": N, "errors": [...],
"waited": SECONDS}`` (how long the requests took, first wait included).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from agentloop.fleet import GovernedClient, RateGovernor, RateLimit
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.providers.openai import OpenAIClient


async def main(
    backend: str, base_url: str, requests: int, rpm: int, window: float, concurrency: int
) -> None:
    governor = RateGovernor([RateLimit("openai", rpm=rpm, window=window)], backend=backend)
    inner = OpenAIClient("gpt-test", api_key="sk-test", base_url=base_url, provider="openai")
    client = GovernedClient(inner, governor)
    gate = asyncio.Semaphore(concurrency)
    errors: list[str] = []

    async def one(n: int) -> None:
        async with gate:
            try:
                await client.complete(ModelRequest(messages=(Message.user(f"request {n}"),)))
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    started = time.monotonic()
    await asyncio.gather(*(one(n) for n in range(requests)))
    waited = time.monotonic() - started
    await client.aclose()
    governor.close()
    ok, failed = requests - len(errors), len(errors)
    print(json.dumps({"ok": ok, "failed": failed, "errors": errors[:5], "waited": waited}))


if __name__ == "__main__":
    argv = sys.argv[1:]
    asyncio.run(
        main(
            argv[0],
            argv[1],
            int(argv[2]),
            int(argv[3]),
            float(argv[4]),
            int(argv[5]) if len(argv) > 5 else 4,
        )
    )
