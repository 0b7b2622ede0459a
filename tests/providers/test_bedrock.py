"""Bedrock's Converse API against the Bedrock twin (SPEC 24, issue 33).

The twin (``twins/bedrock.py``) verifies every SigV4 signature with botocore, answers with AWS's
own error shapes (``x-amzn-ErrorType``) and streams real event-stream frames. A recorded
``ConverseStream`` reply (``fixtures/bedrock``) is parsed as it is.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from botocore.credentials import Credentials

from agentloop import Agent, RunConfig, tool
from agentloop.errors import (
    AuthError,
    BadRequestError,
    ConfigurationError,
    ContextLengthExceeded,
    FailurePhase,
    ModelNotFound,
    ModelRefused,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from agentloop.messages import Message, ThinkingPart
from agentloop.model import (
    ClosableModelClient,
    ModelRequest,
    ModelSettings,
)
from agentloop.providers.bedrock import BedrockClient, model_url_path
from agentloop.providers.retrying import RetryingClient
from agentloop.providers.settings import Settings, build_client

from .conftest import serve_app
from .twins.bedrock import BedrockTwin, Reply

CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
FIXTURE = Path(__file__).parent / "fixtures" / "bedrock" / "converse-stream-claude-tool-use.bin"


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The twin's credentials in the environment, nothing from the machine's AWS set-up."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTWINEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "twin/secret/key")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@asynccontextmanager
async def twin_at(*replies: Reply, **options: object) -> AsyncIterator[tuple[BedrockTwin, str]]:
    twin = BedrockTwin(*replies, **options)  # type: ignore[arg-type]
    async with serve_app(twin.app()) as url:
        yield twin, url


def _client_unclosed(url: str, model: str = CLAUDE, **settings: object) -> ClosableModelClient:
    return build_client(
        Settings(provider="bedrock", model=model, base_url=url, max_retries=0, **settings)  # type: ignore[arg-type]
    )


def uncached(message: dict[str, Any]) -> dict[str, Any]:
    """A wire message without its ``cachePoint`` blocks (they move to each request's end)."""
    return {**message, "content": [b for b in message["content"] if "cachePoint" not in b]}


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest([Message.user(text)])


async def test_a_request_is_sigv4_signed_and_botocore_verifies_it() -> None:
    async with twin_at(Reply("hello")) as (twin, url):
        response = await client(url).complete(ask())
    assert response.text == "hello" and twin.verified == 1
    sent = twin.received[0]
    assert sent.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTWINEXAMPLE/")
    assert "/us-east-1/bedrock/aws4_request" in sent.headers["Authorization"]
    assert "X-Amz-Date" in sent.headers
    assert sent.raw_path == "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    assert response.request_id == "twin-req-0001" and "model" not in sent.body


async def test_session_credentials_send_their_token_and_verify() -> None:
    creds = Credentials("AKIDTWINEXAMPLE", "twin/secret/key", "session-token-xyz")
    async with twin_at(Reply("ok"), token="session-token-xyz") as (twin, url):
        response = await client(url, credentials=creds).complete(ask())
    assert response.text == "ok" and twin.verified == 1
    assert twin.received[0].headers["X-Amz-Security-Token"] == "session-token-xyz"


async def test_a_wrong_secret_is_aws_signature_mismatch_as_auth_error() -> None:
    creds = Credentials("AKIDTWINEXAMPLE", "not-the-secret")
    async with twin_at(Reply("never")) as (twin, url):
        with pytest.raises(AuthError) as info:
            await client(url, credentials=creds).complete(ask())
    error = info.value
    assert twin.verified == 0 and error.status_code == 403
    assert "InvalidSignatureException" in str(error) and "does not match" in str(error)
    assert error.phase is FailurePhase.STATUS and error.request_sent is True
    assert error.request_id == "twin-req-0001" and error.provider == "bedrock"
    assert "not-the-secret" not in repr(error) + str(error)


@pytest.mark.parametrize(
    ("status", "kind", "message", "cls"),
    [
        (429, "ThrottlingException", "Too many requests, please wait before trying again.",
         RateLimited),
        (400, "ValidationException", "Input is too long for requested model.",
         ContextLengthExceeded),
        (400, "ValidationException", "The provided model identifier is invalid.",
         BadRequestError),
        (403, "AccessDeniedException", "You don't have access to the model.", AuthError),
        (404, "ResourceNotFoundException", "Model not found.", ModelNotFound),
        (408, "ModelTimeoutException", "Model has timed out.", ProviderTimeout),
        (424, "ModelErrorException", "The model failed to process the request.",
         ProviderUnavailable),
        (429, "ModelNotReadyException", "Model is not ready.", ProviderUnavailable),
        (400, "ServiceQuotaExceededException", "quota exceeded", BadRequestError),
        (503, "ServiceUnavailableException", "Service unavailable.", ProviderUnavailable),
    ],
)  # fmt: skip
async def test_aws_error_types_map_onto_our_tree(
    status: int, kind: str, message: str, cls: type[Exception]
) -> None:
    async with twin_at(Reply.aws(status, kind, message)) as (_twin, url):
        with pytest.raises(cls) as info:
            await client(url).complete(ask())
    error = info.value
    assert type(error) is cls
    assert kind in str(error) and error.request_id == "twin-req-0001"  # type: ignore[attr-defined]
    assert error.phase is FailurePhase.STATUS and error.request_sent is True  # type: ignore[attr-defined]


async def test_throttling_is_retried_and_logged() -> None:
    throttle = Reply.aws(429, "ThrottlingException", "Too many requests")
    async with twin_at(throttle, Reply("after the wait")) as (twin, url):
        retrying = RetryingClient(client(url), rate_limit_default_delay=0.01)
        response = await retrying.complete(ask())
    assert response.text == "after the wait" and twin.verified == 2


async def test_a_tool_turn_with_claude_thinking_round_trips_twice() -> None:
    script = [
        Reply(reasoning="weather needs a tool", calls=[("get_weather", {"city": "Paris"})],
              stop="tool_use"),
        Reply(reasoning="one more", calls=[("get_weather", {"city": "Rome"})], stop="tool_use"),
        Reply("Sunny in both."),
    ]  # fmt: skip
    async with twin_at(*script) as (twin, url):
        config = RunConfig(model_settings=ModelSettings(thinking_budget=2048, max_tokens=8000))
        run = await Agent(client(url), tools=[get_weather], config=config).run("weather?")
    assert run.output == "Sunny in both." and len(twin.accepted) == 3
    first, second = twin.received[1].body, twin.received[2].body
    unmarked = [uncached(m) for m in first["messages"]]
    assert [uncached(m) for m in second["messages"]][: len(unmarked)] == unmarked
    sent = uncached(first["messages"][1])["content"]
    assert sent[0]["reasoningContent"]["reasoningText"]["signature"] == "twin-sig-1"
    assert sent[1]["toolUse"]["name"] == "get_weather"
    extra = first["additionalModelRequestFields"]
    assert extra == {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert first["inferenceConfig"] == {"maxTokens": 8000}
    assert first["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["type"] == "object"


async def test_another_providers_reasoning_is_never_sent() -> None:
    foreign = Message("assistant", (ThinkingPart("x", signature="s", provider="anthropic"),))
    history = [Message.user("a"), foreign, Message.user("b")]
    async with twin_at(Reply("ok")) as (twin, url):
        await client(url).complete(ModelRequest(history))
    messages = twin.received[0].body["messages"]
    assert [uncached(m) for m in messages] == [
        {"role": "user", "content": [{"text": "a"}, {"text": "b"}]}
    ]


async def test_the_stream_decodes_event_frames_and_reasoning() -> None:
    call = ("get_weather", {"city": "Oslo"})
    script = Reply("Hello there", reasoning="thinking it over", calls=[call], stop="tool_use")
    async with twin_at(script) as (twin, url):
        events = [e async for e in client(url).stream(ask())]
    kinds = [e.kind for e in events]
    assert kinds.count("thinking_delta") == 1 and kinds[-1] == "done"
    assert "".join(e.text for e in events if e.kind == "text_delta") == "Hello there"
    done = events[-1].response
    assert done is not None and done.stop_reason == "tool_use"
    assert done.tool_calls[0].arguments == {"city": "Oslo"}
    thinking = done.message.parts[0]
    assert isinstance(thinking, ThinkingPart) and thinking.provider == "bedrock"
    assert thinking.signature == "twin-sig-1" and twin.verified == 1
    assert twin.received[0].raw_path.endswith("%3A0/converse-stream")
    assert twin.received[0].headers["Accept"] == "application/vnd.amazon.eventstream"


async def test_an_exception_frame_mid_stream_is_classified_with_phase_read() -> None:
    reply = Reply("partial answer", stream_error="throttlingException", message="Rate exceeded")
    async with twin_at(reply) as (_twin, url):
        with pytest.raises(RateLimited) as info:
            [e async for e in client(url).stream(ask())]
    error = info.value
    assert error.phase is FailurePhase.READ and error.request_sent is True
    assert error.request_id == "twin-req-0001" and "Rate exceeded" in str(error)


async def test_a_recorded_converse_stream_parses() -> None:
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
    async with serve_app(app) as url:
        events = [e async for e in client(url).stream(ask("weather in Paris?"))]
    done = events[-1].response
    assert done is not None and done.stop_reason == "tool_use" and done.request_id == "rec-1"
    assert done.text == "Let me check the weather."
    assert done.tool_calls[0].arguments == {"city": "Paris"}
    assert done.tool_calls[0].id == "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"
    thinking = done.message.parts[0]
    assert isinstance(thinking, ThinkingPart) and thinking.text.endswith("call get_weather.")
    assert done.usage.input_tokens == 412 and done.usage.output_tokens == 87


async def test_a_stream_cut_before_message_stop_is_invalid() -> None:
    recorded = FIXTURE.read_bytes()
    cut = recorded[: recorded.index(b"messageStop") - 60]

    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=cut, content_type="application/vnd.amazon.eventstream")

    app = web.Application()
    app.router.add_post("/{tail:.*}", answer)
    async with serve_app(app) as url:
        with pytest.raises(Exception) as info:
            [e async for e in client(url).stream(ask())]
    assert type(info.value).__name__ == "ResponseInvalid"
    assert info.value.phase is FailurePhase.BODY  # type: ignore[attr-defined]


@pytest.mark.parametrize("reason", ["guardrail_intervened", "content_filtered"])
async def test_a_guardrail_or_filter_is_a_refusal(reason: str) -> None:
    async with twin_at(Reply("I can't help", stop=reason)) as (_twin, url):
        with pytest.raises(ModelRefused) as info:
            await client(url).complete(ask())
    assert info.value.reason == reason and info.value.text == "I can't help"


async def test_a_bedrock_api_key_is_a_bearer_and_nothing_is_signed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-123")
    async with twin_at(Reply("ok"), bearer="bedrock-api-key-123") as (twin, url):
        response = await client(url).complete(ask())
    assert response.text == "ok" and twin.verified == 0
    assert twin.received[0].headers["Authorization"] == "Bearer bedrock-api-key-123"


def test_no_credentials_is_an_auth_error_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(AuthError) as info:
        client("http://127.0.0.1:9")
    assert "AWS_BEARER_TOKEN_BEDROCK" in str(info.value)


def test_no_region_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ConfigurationError) as info:
        client("http://127.0.0.1:9")
    assert info.value.field == "region" and "AWS_REGION" in str(info.value)


def test_a_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "botocore", None)
    with pytest.raises(ConfigurationError) as info:
        client("http://127.0.0.1:9")
    assert "pip install 'agentloop[bedrock]'" in str(info.value)


async def test_claude_settings_rules_hold_before_sending() -> None:
    async with twin_at() as (twin, url):
        bedrock = client(url, model="us.anthropic.claude-opus-4-7-v1:0")
        with pytest.raises(ConfigurationError) as info:
            await bedrock.complete(
                ModelRequest([Message.user("x")], settings=ModelSettings(thinking_budget=2048))
            )
    assert twin.received == [] and info.value.field == "thinking_budget"


def test_the_client_is_a_bedrock_client() -> None:
    built = client("http://127.0.0.1:9")
    assert isinstance(built, BedrockClient) and built.provider == "bedrock"


async def test_a_spent_retry_budget_carries_the_attempt_log() -> None:
    timeout = Reply.aws(408, "ModelTimeoutException", "Model has timed out.")
    async with twin_at(timeout, timeout) as (_twin, url):
        retrying = RetryingClient(client(url), max_retries=1, base_delay=0.001)
        with pytest.raises(ProviderTimeout) as info:
            await retrying.complete(ask())
    log = info.value.attempt_log
    assert [r.error_type for r in log] == ["ProviderTimeout", "ProviderTimeout"]
    assert all(r.phase is FailurePhase.STATUS and r.request_sent for r in log)
    assert all(r.status_code == 408 for r in log)


async def test_an_unwrapped_client_error_in_a_run_has_a_one_record_log() -> None:
    async with twin_at(Reply.aws(400, "ValidationException", "bad")) as (_twin, url):
        with pytest.raises(BadRequestError) as info:
            await Agent(client(url)).run("x")
    assert len(info.value.attempt_log) == 1


async def test_media_goes_as_bytes_and_a_url_or_audio_is_refused() -> None:
    from agentloop.media import AudioPart, DocumentPart, ImagePart

    png = (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
        b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N"
        b"\x00\x00\x00\x00IEND\xaeB`\x82"
    )
    document = DocumentPart(b"%PDF-1.4\n%%EOF\n", media_type="application/pdf")
    parts: list[str | ImagePart | DocumentPart] = [
        "look",
        ImagePart(png, media_type="image/png"),
        document,
    ]
    async with twin_at(Reply("seen")) as (twin, url):
        bedrock = client(url)
        await bedrock.complete(ModelRequest([Message.from_input(parts)]))
        for bad in (
            ImagePart(url="https://example.com/a.png"),
            AudioPart(b"RIFF\0\0\0\0WAVE" + bytes(32)),
        ):
            with pytest.raises(ConfigurationError):
                await bedrock.complete(ModelRequest([Message.from_input(["x", bad])]))
    blocks = twin.received[0].body["messages"][0]["content"]
    assert blocks[1]["image"]["format"] == "png" and blocks[1]["image"]["source"]["bytes"]
    assert blocks[2]["document"] == {
        "format": "pdf",
        "name": "document-1",
        "source": {"bytes": document.base64()},
    }
    assert len(twin.received) == 1


@pytest.mark.parametrize(
    ("choice", "wire"),
    [("required", {"any": {}}), ("get_weather", {"tool": {"name": "get_weather"}})],
)
async def test_tool_choice_goes_in_tool_config(choice: str, wire: dict[str, object]) -> None:
    from agentloop.model import ToolSpec

    spec = ToolSpec("get_weather", "The weather.", {"type": "object", "properties": {}})
    request = ModelRequest(
        [Message.user("x")], tools=[spec], settings=ModelSettings(tool_choice=choice)
    )
    async with twin_at(Reply("ok")) as (twin, url):
        await client(url).complete(request)
    assert twin.received[0].body["toolConfig"]["toolChoice"] == wire
    with pytest.raises(ConfigurationError):
        await client(url).complete(
            ModelRequest([Message.user("x")], settings=ModelSettings(tool_choice="none"))
        )


_OPEN: list[ClosableModelClient] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """Close every client a test built, on the test's own loop."""
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def client(*args: Any, **kwargs: Any) -> Any:
    """A client as ``_client_unclosed`` builds it, closed after the test."""
    built = _client_unclosed(*args, **kwargs)
    _OPEN.append(built)
    return built


async def test_the_escaped_model_id_is_what_is_sent_and_signed() -> None:
    """A client that signs ``%3A`` but sends ``:`` (yarl's default) fails AWS's check."""
    import aiohttp

    from agentloop.providers.bedrock._auth import sign

    creds = Credentials("AKIDTWINEXAMPLE", "twin/secret/key").get_frozen_credentials()
    body = b'{"messages": [{"role": "user", "content": [{"text": "hi"}]}]}'
    async with twin_at(Reply("never")) as (twin, url):
        signed_url = f"{url}{model_url_path(CLAUDE)}/converse"
        headers = sign(creds, "us-east-1", signed_url, body, {"Content-Type": "application/json"})
        async with aiohttp.ClientSession() as session:
            async with session.post(signed_url, data=body, headers=headers) as reply:
                status, kind = reply.status, reply.headers["x-amzn-ErrorType"]
    assert twin.received[0].raw_path.count(":") == 1  # the colon went out unescaped
    assert status == 403 and kind.startswith("InvalidSignatureException:")


async def test_a_streamed_tool_loop_with_thinking_round_trips() -> None:
    script = [
        Reply(reasoning="need weather", calls=[("get_weather", {"city": "Oslo"})], stop="tool_use"),
        Reply("Sunny."),
    ]
    async with twin_at(*script) as (twin, url):
        config = RunConfig(model_settings=ModelSettings(thinking_budget=2048, max_tokens=8000))
        agent = Agent(client(url), tools=[get_weather], config=config)
        async with agent.stream("weather?") as events:
            async for _ in events:
                pass
    assert events.run.output == "Sunny." and len(twin.accepted) == 2
    sent = twin.received[1].body["messages"][1]["content"]
    assert sent[0] == {
        "reasoningContent": {"reasoningText": {"text": "need weather", "signature": "twin-sig-1"}}
    }


def test_credentials_that_cannot_be_had_fail_at_build() -> None:
    from botocore.credentials import RefreshableCredentials
    from botocore.exceptions import CredentialRetrievalError

    def fetch() -> dict[str, str]:
        raise CredentialRetrievalError(provider="sso", error_msg="the SSO session has expired")

    long_ago = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    expired = RefreshableCredentials("AKID", "secret", "token", long_ago, fetch, "sso")
    with pytest.raises(AuthError) as info:
        client("http://127.0.0.1:9", credentials=expired)
    assert info.value.request_sent is False and "SSO session has expired" in str(info.value)


class Lapsing:
    """Credentials that work at build and then fail to refresh, as an expired role does."""

    def __init__(self) -> None:
        self.calls = 0

    def get_frozen_credentials(self) -> Any:
        from botocore.exceptions import CredentialRetrievalError

        self.calls += 1
        if self.calls > 2:
            raise CredentialRetrievalError(provider="sts", error_msg="the role has expired")
        return Credentials("AKIDTWINEXAMPLE", "twin/secret/key").get_frozen_credentials()


async def test_a_failed_refresh_before_a_request_is_an_auth_error_that_sent_nothing() -> None:
    async with twin_at(Reply("never")) as (twin, url):
        with pytest.raises(AuthError) as info:
            await client(url, credentials=Lapsing()).complete(ask())
    assert twin.received == [] and info.value.request_sent is False
    assert "the role has expired" in str(info.value)


class Rotating:
    """Credentials whose refresh mints a new session token (an assumed role renewed)."""

    def __init__(self) -> None:
        self.token = "session-token-at-build"

    def get_frozen_credentials(self) -> Any:
        return Credentials(
            "AKIDTWINEXAMPLE", "twin/secret/key", self.token
        ).get_frozen_credentials()


async def test_refreshed_credentials_are_redacted_too() -> None:
    creds = Rotating()
    async with twin_at(Reply("ok"), token="session-token-renewed-1234") as (twin, url):
        bedrock = client(url, credentials=creds)
        creds.token = "session-token-renewed-1234"
        assert (await bedrock.complete(ask())).text == "ok"
    assert twin.received[0].headers["X-Amz-Security-Token"] == "session-token-renewed-1234"
    transport = bedrock._transport
    assert "session-token-renewed-1234" in transport.secrets
    assert "renewed" not in transport.redact("echo: session-token-renewed-1234")
