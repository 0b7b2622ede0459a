"""Gemini and Claude on Vertex AI against the Vertex twin (SPEC 24, issue 33)."""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from google.auth.credentials import Credentials as BaseCredentials
from google.auth.exceptions import RefreshError, TransportError
from google.oauth2.credentials import Credentials

from agentloop import Agent, RunConfig, tool
from agentloop.errors import (
    AuthError,
    BadRequestError,
    ConfigurationError,
    FailurePhase,
    ProviderUnavailable,
)
from agentloop.messages import Message, ThinkingPart
from agentloop.model import ClosableModelClient, ModelRequest, ModelSettings
from agentloop.providers.fallback import FallbackClient
from agentloop.providers.profiles import profile_for
from agentloop.providers.settings import Settings, build_client
from agentloop.providers.vertex import VertexClient

from .conftest import serve_app
from .twins import anthropic as claude
from .twins.gemini import Reply, call, text
from .twins.vertex import VertexTwin

TOKEN = "ya29.twin-token"


@pytest.fixture(autouse=True)
def google_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


class Refreshing(BaseCredentials):
    """Credentials that mint a token on refresh (as a service account would), counted."""

    def __init__(self, token: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.minted = token
        self.refreshes = 0

    def refresh(self, request: Any) -> None:
        self.refreshes += 1
        self.token = self.minted
        self.expiry = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(
            hours=1
        )


def token_credentials(token: str) -> Credentials:
    """Credentials holding an access token (as after a refresh)."""
    return Credentials(token=token)  # type: ignore[no-untyped-call]


@asynccontextmanager
async def twin_at(**script: Any) -> AsyncIterator[tuple[VertexTwin, str]]:
    twin = VertexTwin(**script)
    async with serve_app(twin.app()) as url:
        yield twin, url


def _client_unclosed(url: str, model: str, **settings: Any) -> ClosableModelClient:
    settings.setdefault("credentials", token_credentials(TOKEN))
    settings.setdefault("project", "twin-project")
    return build_client(
        Settings(provider="vertex", model=model, base_url=url, max_retries=0, **settings)
    )


async def test_gemini_on_vertex_follows_the_url_and_token_rules() -> None:
    script = [Reply([call("read_file", {"path": "a"})]), Reply([text("done")])]
    async with twin_at(gemini=script) as (twin, url):
        run = await Agent(client(url, "gemini-3.8-flash"), tools=[read_file]).run("go")
    assert run.output == "done" and twin.refused == []
    assert twin.paths[0] == (
        "/v1/projects/twin-project/locations/global/publishers/google/models/"
        "gemini-3.8-flash:generateContent"
    )
    second = twin.bodies[1]["contents"]
    signed = second[1]["parts"][0]
    assert signed["thoughtSignature"].startswith("twin-sig-")  # sent back: Gemini 3 needs it


async def test_gemini_on_vertex_streams_with_alt_sse_in_its_region() -> None:
    async with twin_at(gemini=[Reply([text("streamed")])]) as (twin, url):
        vertex = client(url, "gemini-2.5-flash", region="europe-west1")
        events = [e async for e in vertex.stream(ModelRequest([Message.user("x")]))]
    assert events[-1].response is not None and events[-1].response.text == "streamed"
    assert twin.paths[0].endswith(":streamGenerateContent?alt=sse")
    assert "/locations/europe-west1/" in twin.paths[0]


async def test_claude_on_vertex_has_no_model_in_the_body_and_vertex_version() -> None:
    script = [
        claude.TwinReply(
            [claude.thinking("need a file"), claude.tool_use("read_file", {"path": "p"})],
            "tool_use",
        ),
        claude.TwinReply([claude.text("read it")], "end_turn"),
    ]  # fmt: skip
    async with twin_at(claude_script=script) as (twin, url):
        config = RunConfig(model_settings=ModelSettings(thinking_budget=2048))
        agent = Agent(client(url, "claude-sonnet-4-5@20250929"), tools=[read_file], config=config)
        run = await agent.run("read p")
    assert run.output == "read it" and twin.refused == []
    assert twin.paths[0] == (
        "/v1/projects/twin-project/locations/global/publishers/anthropic/models/"
        "claude-sonnet-4-5@20250929:rawPredict"
    )
    first, second = twin.claude.requests
    assert "model" not in first and first["anthropic_version"] == "vertex-2023-10-16"
    assert second["messages"][1]["content"][0]["type"] == "thinking"  # sent back unchanged


async def test_claude_on_vertex_streams_through_stream_raw_predict() -> None:
    script = [claude.TwinReply([claude.text("hello")], "end_turn")]
    async with twin_at(claude_script=script) as (twin, url):
        vertex = client(url, "claude-sonnet-4-5@20250929", region="us-east5")
        events = [e async for e in vertex.stream(ModelRequest([Message.user("x")]))]
    assert events[-1].response is not None and events[-1].response.text == "hello"
    assert twin.paths[0].endswith("/locations/us-east5/publishers/anthropic/models/"
                                  "claude-sonnet-4-5@20250929:streamRawPredict")  # fmt: skip


async def test_claude_and_gemini_on_vertex_never_get_each_others_reasoning() -> None:
    gemini_thought = ThinkingPart("", signature="gemini-signature", provider="gemini")
    claude_thought = ThinkingPart("t", signature="claude-signature", provider="anthropic")
    history = [
        Message.user("a"),
        Message("assistant", (claude_thought, gemini_thought, *Message.user("b").parts)),
        Message.user("c"),
    ]
    async with twin_at(claude_script=[], gemini=[]) as (twin, url):
        for model in ("gemini-2.5-flash", "claude-sonnet-4-5@20250929"):
            async with client(url, model) as vertex:
                with pytest.raises(BadRequestError):  # a twin refuses a signature it never issued
                    await vertex.complete(ModelRequest(history))
    to_gemini, to_claude = json.dumps(twin.bodies[0]), json.dumps(twin.bodies[1])
    assert "gemini-signature" in to_gemini and "claude-signature" not in to_gemini
    assert "claude-signature" in to_claude and "gemini-signature" not in to_claude


async def test_an_expired_token_is_refreshed_off_the_loop_and_sent() -> None:
    creds = Refreshing(TOKEN)
    async with twin_at(gemini=[Reply([text("a")]), Reply([text("b")])]) as (twin, url):
        vertex = client(url, "gemini-2.5-flash", credentials=creds)
        await vertex.complete(ModelRequest([Message.user("x")]))
        await vertex.complete(ModelRequest([Message.user("y")]))
    assert creds.refreshes == 1 and twin.refused == []


async def test_a_wrong_token_is_googles_401_as_auth_error() -> None:
    async with twin_at(gemini=[Reply([text("never")])]) as (_twin, url):
        wrong = client(url, "gemini-2.5-flash", credentials=token_credentials("ya29.stale-token"))
        with pytest.raises(AuthError) as info:
            await wrong.complete(ModelRequest([Message.user("x")]))
    error = info.value
    assert error.status_code == 401 and error.phase is FailurePhase.STATUS
    assert error.provider == "vertex" and "invalid authentication credentials" in str(error)
    assert "ya29.stale-token" not in str(error) + repr(error)


async def test_another_project_is_permission_denied() -> None:
    async with twin_at(gemini=[Reply([text("never")])]) as (_twin, url):
        other = client(url, "gemini-2.5-flash", project="not-mine")
        with pytest.raises(AuthError) as info:
            await other.complete(ModelRequest([Message.user("x")]))
    assert info.value.status_code == 403 and "PERMISSION_DENIED" in (info.value.body or "")


def test_the_project_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east5")
    built = build_client(
        Settings(provider="vertex", credentials=token_credentials("t"), max_retries=0)
    )
    assert isinstance(built, VertexClient)
    assert built.place.project == "env-project" and built.place.location == "us-east5"
    assert built.place.base_url == "https://us-east5-aiplatform.googleapis.com"


def test_no_project_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError) as info:
        build_client(Settings(provider="vertex", credentials=token_credentials("t")))
    assert info.value.field == "project"


def test_no_credentials_is_an_auth_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(AuthError):
        build_client(Settings(provider="vertex", project="p"))


def test_a_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "google.auth", None)
    with pytest.raises(ConfigurationError) as info:
        build_client(Settings(provider="vertex", project="p"))
    assert "pip install 'agentloop[vertex]'" in str(info.value)


@pytest.mark.parametrize("name", ["../x", "gemini?x=1", "a/b"])
def test_a_model_that_is_no_path_segment_is_refused(name: str) -> None:
    with pytest.raises(ConfigurationError):
        build_client(Settings(provider="vertex", model=name, project="p",
                              credentials=token_credentials("t")))  # fmt: skip


def test_claude_on_vertex_keeps_the_anthropic_profile() -> None:
    fable = profile_for("vertex", "claude-fable-5-1@20261001")
    assert fable.append_only and not fable.mid_conversation_system
    assert profile_for("vertex", "gemini-3.8-flash").efforts == frozenset({"low", "medium", "high"})


async def test_a_fallback_from_vertex_gemini_to_vertex_claude() -> None:
    script = [claude.TwinReply([claude.text("from claude")], "end_turn")]
    async with twin_at(claude_script=script, gemini=[]) as (_twin, url):
        chain = FallbackClient([client(url, "gemini-2.5-flash"),
                                client(url, "claude-sonnet-4-5@20250929")])  # fmt: skip
        async with chain:
            run = await Agent(chain).run("x")
    assert run.output == "from claude"


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


async def test_concurrent_requests_refresh_a_stale_token_once() -> None:
    import asyncio

    creds = Refreshing(TOKEN)
    replies = [Reply([text(str(n))]) for n in range(5)]
    async with twin_at(gemini=replies) as (twin, url):
        vertex = client(url, "gemini-2.5-flash", credentials=creds)
        await asyncio.gather(
            *(vertex.complete(ModelRequest([Message.user("x")])) for _ in range(5))
        )
    assert creds.refreshes == 1 and len(twin.bodies) == 5 and twin.refused == []


def test_adc_gives_the_credentials_and_the_project(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A service-account file through GOOGLE_APPLICATION_CREDENTIALS: ADC's project is used."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    account = {
        "type": "service_account",
        "project_id": "adc-project",
        "private_key_id": "k1",
        "private_key": pem,
        "client_email": "agent@adc-project.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    path = tmp_path / "sa.json"
    path.write_text(json.dumps(account))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    built = build_client(Settings(provider="vertex", max_retries=0))
    assert isinstance(built, VertexClient) and built.place.project == "adc-project"
    assert "cloud-platform" in " ".join(built._auth.credentials.scopes or ())
    assert built.place.location == "global"


class Failing(Refreshing):
    """Credentials whose refresh fails as google-auth's do."""

    def __init__(self, error: Exception) -> None:
        super().__init__(TOKEN)
        self.error = error

    def refresh(self, request: Any) -> None:
        raise self.error


@pytest.mark.parametrize(
    ("error", "cls", "phase"),
    [
        (RefreshError("invalid_grant: Token has been expired or revoked."), AuthError, None),  # type: ignore[no-untyped-call]
        (TransportError("connection refused"), ProviderUnavailable, FailurePhase.CONNECT),  # type: ignore[no-untyped-call]
    ],
)
async def test_a_failed_token_refresh_is_typed_and_sends_nothing(
    error: Exception, cls: type[Exception], phase: FailurePhase | None
) -> None:
    async with twin_at(gemini=[Reply([text("never")])]) as (twin, url):
        vertex = client(url, "gemini-2.5-flash", credentials=Failing(error))
        with pytest.raises(cls) as info:
            await vertex.complete(ModelRequest([Message.user("x")]))
    assert type(info.value) is cls and twin.bodies == []
    assert info.value.request_sent is False and info.value.phase is phase  # type: ignore[attr-defined]
    assert info.value.provider == "vertex"  # type: ignore[attr-defined]
