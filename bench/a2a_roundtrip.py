"""The official a2a-sdk client's ``SendMessage`` to a one-turn agent on loopback (p50 < 20 ms).

An ``A2AApp`` serving an agent over ``FunctionModel`` (one reply, no tool) runs under uvicorn
on 127.0.0.1 in a process of its own; this process holds one official client (built from the
card its ``A2ACardResolver`` read) and sends ``SendMessage`` N times, each a new context (a new
session and run on the server), timing each round trip on the wall clock. A warm-up comes
first. A benchmark, not a test: ``python bench/a2a_roundtrip.py [N]``. No network beyond
127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb

SERVER = """
import sys, uvicorn
from agentloop import Agent
from agentloop.testing import FunctionModel, reply
agent = Agent(FunctionModel(lambda request: reply("pong")))
app = agent.to_a2a(name="pong", description="answers pong")
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def measure(url: str, rounds: int) -> list[float]:
    async with httpx.AsyncClient(timeout=30) as http:
        for _ in range(500):
            try:
                card = await A2ACardResolver(http, url).get_agent_card()
                break
            except Exception:
                await asyncio.sleep(0.02)
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        times: list[float] = []
        for index in range(rounds + 20):
            message = pb.Message(
                message_id=f"m{index}", role=pb.ROLE_USER, parts=[pb.Part(text="ping")]
            )
            start = time.perf_counter()
            [response] = [
                r async for r in client.send_message(pb.SendMessageRequest(message=message))
            ]
            elapsed = time.perf_counter() - start
            assert response.task.status.state == pb.TASK_STATE_COMPLETED, response
            if index >= 20:  # warm-up first
                times.append(elapsed)
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=300, help="timed round trips")
    rounds = parser.parse_args().rounds
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], env=os.environ.copy())
    try:
        times = asyncio.run(measure(f"http://127.0.0.1:{port}", rounds))
    finally:
        server.terminate()
        server.wait(10)
    times.sort()
    p50 = statistics.median(times) * 1000
    p90 = times[int(len(times) * 0.9)] * 1000
    print(
        f"SendMessage round trip, {rounds} rounds: p50 {p50:.2f} ms, p90 {p90:.2f} ms, "
        f"fastest {times[0] * 1000:.2f} ms (goal: p50 < 20 ms)"
    )


if __name__ == "__main__":
    main()
