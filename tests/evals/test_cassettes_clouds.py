"""Cassettes over the cloud providers (SPEC 23, 24): Bedrock's Converse and ConverseStream (AWS
event-stream messages, one per item), Azure OpenAI and Vertex (Claude and Gemini) recorded against
the fake server over real HTTP, replayed in a process with no network: the same run record and
the same stream pieces. No SigV4 signature, credential or token is stored anywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

ACCESS = "AKIDCASSETTEEXAMPLE7"
SECRET = "cassette/secret/key/0123456789abcdef"
TOKEN = "cassette-session-token-0123456789"
GOOGLE = "ya29.cassette-google-token-0123456789"
AZURE = "azure-cassette-key-0123456789abcdef"
KINDS = ["bedrock", "azure", "vertex-claude", "vertex-gemini"]

PROGRAM = """
import asyncio, json, sys

from agentloop import Agent, RunConfig, tool
from agentloop.cassettes import use_cassette
from agentloop.events import TextDelta
from agentloop.providers.settings import Settings, build_client

KIND, URL, CASSETTE, ACCESS, SECRET, TOKEN, GOOGLE, AZURE = sys.argv[1:9]


@tool
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


def client():
    common = {"base_url": URL, "max_retries": 0}
    if KIND == "bedrock":
        from botocore.credentials import Credentials

        creds = Credentials(ACCESS, SECRET, TOKEN)
        return build_client(Settings(provider="bedrock", region="us-east-1", credentials=creds,
            model="us.anthropic.claude-sonnet-4-5-20250929-v1:0", **common))
    if KIND == "azure":
        return build_client(Settings(provider="azure", model="dep", api_key=AZURE,
                                     api_version="2024-10-21", **common))
    from google.oauth2.credentials import Credentials

    model = "claude-sonnet-4-5@20250929" if KIND == "vertex-claude" else "gemini-2.5-flash"
    return build_client(Settings(provider="vertex", model=model, project="p",
                                 credentials=Credentials(token=GOOGLE), **common))


async def main():
    agent = Agent(client(), tools=[add])
    with use_cassette(CASSETTE, mode="once") as cassette:
        whole = await agent.run("add 1 and 2", history=[])
        async with agent.stream("add 3 and 4", history=[]) as events:
            pieces = [e.text async for e in events if isinstance(e, TextDelta)]
            streamed = events.run
    await agent.aclose()
    print(json.dumps({
        "runs": [[m.to_dict() for m in run.messages] for run in (whole, streamed)],
        "pieces": pieces,
        "outputs": [whole.output, streamed.output],
        "all_played": cassette.all_played,
    }, sort_keys=True))


asyncio.run(main())
"""

NO_NETWORK = """
import socket

def refuse(*args, **kwargs):
    raise OSError("no network in this process")

socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse
"""


def script() -> list[Any]:
    add = FakeToolCall("add", {"a": 1, "b": 2})
    return [
        FakeReply(tool_calls=[add]),
        FakeReply("it is three"),
        FakeReply(tool_calls=[FakeToolCall("add", {"a": 3, "b": 4})]),
        FakeReply("seven, in a streamed answer of several pieces"),
    ]


def program(tmp_path: Path, *, offline: bool) -> Path:
    path = tmp_path / ("replay.py" if offline else "record.py")
    path.write_text((NO_NETWORK if offline else "") + PROGRAM)
    return path


def run_program(path: Path, kind: str, url: str, cassette: Path) -> dict[str, Any]:
    args = [kind, url, str(cassette), ACCESS, SECRET, TOKEN, GOOGLE, AZURE]
    done = subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cloud_recording_replays_the_same_in_a_process_with_no_network(
    tmp_path: Path, kind: str
) -> None:
    cassette = tmp_path / f"{kind}.yaml"
    async with FakeProviderServer(script()) as server:
        url = server.root_url
        live = await _in_thread(run_program, program(tmp_path, offline=False), kind, url, cassette)
    assert live["outputs"] == ["it is three", "seven, in a streamed answer of several pieces"]
    assert len(live["pieces"]) > 1
    # the same settings as recorded (a Gemini signature's origin names its host), no socket
    replayed = run_program(program(tmp_path, offline=True), kind, url, cassette)
    assert replayed == {**live, "all_played": True}
    text = cassette.read_text()
    for secret in (ACCESS, SECRET, TOKEN, GOOGLE, AZURE, "AWS4-HMAC", "Signature=", "X-Amz"):
        assert secret.lower() not in text.lower()
    if kind == "bedrock":
        assert "/converse-stream" in text and ":event-type: contentBlockDelta" in text


async def _in_thread(fn: Any, *args: Any) -> Any:
    """The recording subprocess talks to this loop's server: wait for it off the loop."""
    import asyncio

    return await asyncio.to_thread(fn, *args)
