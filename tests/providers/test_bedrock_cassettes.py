"""Cassettes over Bedrock (SPEC 23, 24): the twin verifies each SigV4 signature while recording;
a real ``ConverseStream`` reply cut anywhere, and an exception frame mid-stream, replay with no
socket as the same events and the same error; nothing of the signature is stored."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from botocore.credentials import Credentials

from agentloop.cassettes import use_cassette
from agentloop.errors import FailurePhase, RateLimited
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.providers.settings import Settings, build_client

from .conftest import serve_app
from .twins.bedrock import BedrockTwin, Reply

CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
FIXTURE = Path(__file__).parent / "fixtures" / "bedrock" / "converse-stream-claude-tool-use.bin"
CREDS = ("AKIDTWINEXAMPLE", "twin/secret/key", "session-token-cassette-0123")
DEAD = "http://127.0.0.1:9"
ASK = ModelRequest([Message.user("weather in Paris?")])


def bedrock(url: str) -> Any:
    creds = Credentials(*CREDS)
    return build_client(
        Settings(
            provider="bedrock",
            model=CLAUDE,
            region="us-east-1",
            base_url=url,
            credentials=creds,
            max_retries=0,
        )
    )


def no_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: socket.socket, address: Any) -> None:
        raise OSError(f"a replay opened a socket to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


def summary(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.kind, e.text or "") for e in events if e.kind != "done"]


async def test_a_real_converse_stream_cut_anywhere_replays_message_by_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = FIXTURE.read_bytes()

    async def answer(request: web.Request) -> web.StreamResponse:
        headers = {"Content-Type": "application/vnd.amazon.eventstream",
                   "x-amzn-RequestId": "rec-1"}  # fmt: skip
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        for start in range(0, len(recorded), 97):  # chunks that cut frames anywhere
            await response.write(recorded[start : start + 97])
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/{tail:.*}", answer)
    path = tmp_path / "bedrock.json"
    async with serve_app(app) as url, bedrock(url) as client:
        with use_cassette(path, mode="once"):
            live = [e async for e in client.stream(ASK)]
    text = path.read_text()
    assert text.count('":event-type"') == recorded.count(b":event-type")
    for secret in (*CREDS, "AWS4-HMAC", "Signature", "X-Amz"):
        assert secret not in text
    no_sockets(monkeypatch)
    async with bedrock(DEAD) as client:
        with use_cassette(path) as cassette:
            again = [e async for e in client.stream(ASK)]
    assert summary(again) == summary(live) and cassette.all_played
    done, recorded_done = again[-1].response, live[-1].response
    assert done is not None and recorded_done is not None
    assert done.message.to_dict() == recorded_done.message.to_dict()
    assert done.request_id == "rec-1" and done.usage == recorded_done.usage


async def test_an_exception_frame_replays_as_the_same_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reply = Reply("partial answer", stream_error="throttlingException", message="Rate exceeded")
    path = tmp_path / "throttled.yaml"
    twin = BedrockTwin(reply, token=CREDS[2])
    async with serve_app(twin.app()) as url, bedrock(url) as client:
        with use_cassette(path, mode="once"), pytest.raises(RateLimited) as live:
            [e async for e in client.stream(ASK)]
    assert twin.verified == 1  # the recording sent a signed request botocore verified
    no_sockets(monkeypatch)
    async with bedrock(DEAD) as client:
        with use_cassette(path), pytest.raises(RateLimited) as again:
            [e async for e in client.stream(ASK)]
    assert str(again.value) == str(live.value) and again.value.phase is FailurePhase.READ
    assert again.value.request_id == live.value.request_id == "twin-req-0001"


async def test_a_converse_reply_replays_with_its_request_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "converse.yaml"
    twin = BedrockTwin(Reply("whole answer"), token=CREDS[2])
    async with serve_app(twin.app()) as url, bedrock(url) as client:
        with use_cassette(path, mode="once"):
            live = await client.complete(ASK)
    assert twin.verified == 1 and "/converse\n" in path.read_text()
    no_sockets(monkeypatch)
    async with bedrock(DEAD) as client:
        with use_cassette(path) as cassette:
            again = await client.complete(ASK)
    assert again.message.to_dict() == live.message.to_dict() and cassette.all_played
    assert again.request_id == live.request_id == "twin-req-0001"


async def test_a_refused_converse_replays_as_the_same_aws_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentloop.errors import AuthError

    path = tmp_path / "denied.yaml"
    twin = BedrockTwin(Reply.aws(403, "AccessDeniedException", "not allowed here"), token=CREDS[2])
    async with serve_app(twin.app()) as url, bedrock(url) as client:
        with use_cassette(path, mode="once"), pytest.raises(AuthError) as live:
            await client.complete(ASK)
    text = path.read_text()
    assert "AccessDeniedException" in text and CREDS[1] not in text and CREDS[2] not in text
    no_sockets(monkeypatch)
    async with bedrock(DEAD) as client:
        with use_cassette(path), pytest.raises(AuthError) as again:
            await client.complete(ASK)
    assert str(again.value) == str(live.value) and again.value.phase is FailurePhase.STATUS
    assert again.value.request_id == live.value.request_id == "twin-req-0001"
