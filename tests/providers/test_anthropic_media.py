"""AnthropicClient with media (SPEC 16, provider-rules Anthropic 5), through the Anthropic twin.

Images and documents go as ``image`` / ``document`` blocks in the prompt and inside a
``tool_result``'s content, byte for byte as the spec names them (JSON and SSE, through the agent
loop); what Anthropic or the model cannot take is a ``ConfigurationError`` naming the part and the
model before any request; the twin refuses a malformed block with the API's own status and text
and takes every right shape. No local model can see (SmolLM2 has no vision), so the wire is
tested precisely instead.
"""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.errors import ConfigurationError
from agentloop.messages import (
    AudioPart,
    DocumentPart,
    ImagePart,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.model import ModelRequest, ToolSpec, media_kinds
from agentloop.providers.anthropic import AnthropicClient, build_payload
from agentloop.providers.anthropic import _media as _anthropic_media
from agentloop.providers.retrying import RetryingClient

from .twins import anthropic as twin
from .twins import anthropic_media as rules
from .twins.anthropic import AnthropicTwin, TwinReply

KEY = "sk-ant-twin-0123456789"
MODEL = "claude-sonnet-4-5"
OLD = "claude-3-haiku-20240307"  # Claude 3: images, no documents
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(200))
PDF = b"%PDF-1.7\n" + b"0" * 300
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 64
B64 = base64.b64encode(PNG).decode()
PDF64 = base64.b64encode(PDF).decode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image(data: str = B64, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def pdf(data: str = PDF64) -> dict[str, Any]:
    source = {"type": "base64", "media_type": "application/pdf", "data": data}
    return {"type": "document", "source": source}


@pytest.fixture
async def clients() -> AsyncIterator[Callable[..., AnthropicClient]]:
    made: list[AnthropicClient] = []

    def make(url: str, model: str = MODEL) -> AnthropicClient:
        client = AnthropicClient(model, api_key=KEY, base_url=url)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()


async def _no_sleep(seconds: float) -> None:
    return None


def user(*parts: Any) -> Message:
    return Message("user", tuple(TextPart(p) if isinstance(p, str) else p for p in parts))


# --- the prompt --------------------------------------------------------------------------------


PROMPTS = [
    (ImagePart(PNG), image()),
    (ImagePart(JPEG, "image/jpeg"), image(b64(JPEG), "image/jpeg")),
    (DocumentPart(PDF), pdf()),
    (
        DocumentPart("Grüße, plain text.".encode(), "text/plain"),
        {"type": "document",
         "source": {"type": "text", "media_type": "text/plain", "data": "Grüße, plain text."}},
    ),
    (
        ImagePart(url="https://example.com/chart.png"),
        {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.png"}},
    ),
    (
        DocumentPart(url="https://example.com/report.pdf"),
        {"type": "document", "source": {"type": "url", "url": "https://example.com/report.pdf"}},
    ),
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("part", "block"), PROMPTS, ids=["png", "jpeg", "pdf", "text", "url-image",
                                                           "url-pdf"])  # fmt: skip
async def test_a_prompt_with_media_goes_as_the_apis_block(
    stream: bool, part: Any, block: dict[str, Any], clients: Callable[..., AnthropicClient]
) -> None:
    async with AnthropicTwin([TwinReply([twin.text("A chart.")])]) as server:
        agent = Agent(clients(server.url), config=RunConfig(stream=stream))
        run = await agent.run(["What is this?", part])
    assert run.output == "A chart." and server.rejected == []
    [body] = server.requests
    [message] = body["messages"]
    first, second = message["content"]
    assert first == {"type": "text", "text": "What is this?"}
    assert second == {**block, "cache_control": {"type": "ephemeral"}}  # the last block (rule 6)


# --- a tool's media ----------------------------------------------------------------------------


@tool
def screenshot(page: str) -> list[Any]:
    """Take a screenshot of a page."""
    return [f"the {page} page", ImagePart(PNG)]


@tool
def report() -> DocumentPart:
    """Fetch the report."""
    return DocumentPart(PDF)


@tool
def record() -> AudioPart:
    """Record a sound."""
    return AudioPart(WAV)


def calling(name: str, **arguments: Any) -> list[TwinReply]:
    return [
        TwinReply([twin.tool_use(name, arguments)], "tool_use"),
        TwinReply([twin.text("Seen.")]),
    ]


def result_of(body: dict[str, Any]) -> dict[str, Any]:
    results = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert len(results) == 1
    found: dict[str, Any] = results[0]
    return found


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_tools_image_goes_inside_its_tool_result(
    stream: bool, clients: Callable[..., AnthropicClient]
) -> None:
    async with AnthropicTwin(calling("screenshot", page="home")) as server:
        agent = Agent(clients(server.url), tools=[screenshot], system="Be brief.",
                      config=RunConfig(stream=stream))  # fmt: skip
        run = await agent.run("Look at the home page")
    assert run.output == "Seen." and server.rejected == []
    second = server.requests[1]
    result = result_of(second)
    assert result["content"] == [{"type": "text", "text": "the home page"}, image()]
    assert result["is_error"] is False and result["cache_control"] == {"type": "ephemeral"}
    assert second["messages"][-1]["role"] == "user"  # the results end the transcript
    assert twin.breakpoints(second) == 4  # tools, system, two in the transcript: still <= 4


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_tools_pdf_goes_inside_its_tool_result(
    stream: bool, clients: Callable[..., AnthropicClient]
) -> None:
    async with AnthropicTwin(calling("report")) as server:
        agent = Agent(clients(server.url), tools=[report], config=RunConfig(stream=stream))
        await agent.run("Read the report")
    assert server.rejected == []
    assert result_of(server.requests[1])["content"][-1] == pdf()


async def test_a_tools_audio_is_a_soft_error_the_model_reads(
    clients: Callable[..., AnthropicClient],
) -> None:
    async with AnthropicTwin(calling("record")) as server:
        agent = Agent(clients(server.url), tools=[record])
        run = await agent.run("Record something")
    assert run.output == "Seen." and server.rejected == []
    result = result_of(server.requests[1])
    assert result["is_error"] is True and "audio" in str(result["content"])
    assert "source" not in str(result)


async def test_breakpoints_stay_at_four_with_media_everywhere() -> None:
    history = [
        user("look", ImagePart(PNG), DocumentPart(PDF)),
        Message.assistant("", [ToolCallPart("toolu_1", "screenshot", {"page": "a"})]),
        Message("tool", (ToolResultPart("toolu_1", "screenshot", "a", media=(ImagePart(PNG),)),)),
        Message.assistant("", [ToolCallPart("toolu_2", "screenshot", {"page": "b"})]),
        Message("tool", (ToolResultPart("toolu_2", "screenshot", "", media=(ImagePart(PNG),)),)),
    ]
    spec = ToolSpec("screenshot", "Take one.", {"type": "object"})
    request = ModelRequest(messages=history, system="s", tools=[spec])
    body = build_payload(request, model=MODEL, stream=False)
    assert twin.breakpoints(body) == 4 and rules.nested_breakpoints(body) == 0
    assert twin.violation(body, twin.Issued()) is None


def test_a_result_with_no_text_sends_its_media_alone() -> None:
    result = ToolResultPart("toolu_1", "shot", "", media=(ImagePart(PNG), DocumentPart(PDF)))
    history = [
        user("go"),
        Message.assistant("", [ToolCallPart("toolu_1", "shot", {})]),
        Message("tool", (result,)),
    ]
    body = build_payload(ModelRequest(messages=history), model=MODEL, stream=False)
    assert result_of(body)["content"] == [image(), pdf()]  # no empty text block (refused)
    assert twin.violation(body, twin.Issued()) is None


def test_bytes_are_base64_encoded_once_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = ImagePart.base64

    def counting(self: ImagePart) -> str:
        calls.append(self.sha256)
        return real(self)

    monkeypatch.setattr(ImagePart, "base64", counting)
    shot = ImagePart(PNG)
    message = Message("tool", (
        ToolResultPart("toolu_1", "a", "one", media=(shot,)),
        ToolResultPart("toolu_2", "b", "two", media=(shot,)),
    ))  # fmt: skip
    request = ModelRequest(messages=[user("go"), message])
    for _ in range(3):  # three turns re-send it: the encoding is cached on the message
        build_payload(request, model=MODEL, stream=False)
    assert calls == [shot.sha256]


def test_a_request_without_media_is_unchanged() -> None:
    history = [
        user("go"),
        Message.assistant("", [ToolCallPart("toolu_1", "look", {"q": "x"})]),
        Message("tool", (ToolResultPart("toolu_1", "look", "found x"),)),
    ]
    body = build_payload(ModelRequest(messages=history), model=MODEL, stream=False)
    assert body["messages"][2]["content"][0]["content"] == "found x"  # still a plain string


# --- refused before any request ------------------------------------------------------------------


BIG = b"\x89PNG\r\n\x1a\n" + b"\x00" * (_anthropic_media.MAX_IMAGE_BASE64 // 4 * 3)
REFUSED = [
    (user("hear", AudioPart(WAV)), MODEL, "no audio input"),
    (user("see", ImagePart(b"BM" + bytes(40), "image/bmp")), MODEL, "image/jpeg, image/png"),
    (user("see", ImagePart(BIG)), MODEL, "5,242,880-byte limit"),
    (user("read", DocumentPart(url="https://example.com/a.txt", media_type="text/plain")), MODEL,
     "not by URL"),
    (user("read", DocumentPart(b"\xff\xfe caf\xe9", "text/plain")), MODEL, "UTF-8"),
    (user("read", DocumentPart(PDF)), OLD, "its profile takes image"),
    (Message("assistant", (TextPart("I drew"), ImagePart(PNG))), MODEL, "not from the assistant"),
    (Message("system", (TextPart("be"), ImagePart(PNG))), MODEL, "in a system message"),
]  # fmt: skip


REFUSED_IDS = ["audio", "bmp", "over-5MiB", "text-url", "not-utf8", "pdf-on-claude-3", "assistant",
               "system"]  # fmt: skip


@pytest.mark.parametrize(("message", "model", "why"), REFUSED, ids=REFUSED_IDS)
async def test_what_anthropic_cannot_take_is_refused_before_any_request(
    message: Message, model: str, why: str, clients: Callable[..., AnthropicClient],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    [part] = [p for p in message.parts if isinstance(p, ImagePart | DocumentPart | AudioPart)]
    history = [message, user("go")] if message.role != "user" else [message]
    caplog.set_level(logging.DEBUG)
    async with AnthropicTwin([TwinReply([twin.text("never")])]) as server:
        client = RetryingClient(clients(server.url, model), sleep=_no_sleep)
        with pytest.raises(ConfigurationError) as info:
            await client.complete(ModelRequest(messages=history))
    assert server.requests == [] and server.rejected == []
    text = str(info.value)
    assert text.startswith(f"{model} cannot take {part.describe()}") and why in text
    assert part.data is None or part.base64()[:40] not in text + caplog.text


async def test_a_refused_prompt_ends_the_run_before_any_request(
    clients: Callable[..., AnthropicClient],
) -> None:
    async with AnthropicTwin([TwinReply([twin.text("never")])]) as server:
        agent = Agent(clients(server.url))
        with pytest.raises(ConfigurationError, match=r"\[audio: audio/wav"):
            await agent.run(["Transcribe this", AudioPart(WAV)])
    assert server.requests == [] and server.rejected == []


def test_a_request_past_32_mib_of_media_is_refused_naming_the_part_that_crossed() -> None:
    parts = [DocumentPart(PDF + bytes(9 * 1024 * 1024)) for _ in range(3)]
    request = ModelRequest(messages=[user("read", *parts)])
    with pytest.raises(ConfigurationError, match="request limit") as info:
        build_payload(request, model=MODEL, stream=False)
    assert parts[2].describe() in str(info.value)


@pytest.mark.parametrize(
    ("model", "kinds"),
    [(MODEL, {"image", "document"}), ("claude-opus-4-1", {"image", "document"}),
     ("claude-3-5-haiku-latest", {"image", "document"}), (OLD, {"image"})],
)  # fmt: skip
async def test_accepts_media_follows_the_profile_and_never_says_audio(
    model: str, kinds: set[str]
) -> None:
    client = AnthropicClient(model, api_key=KEY)
    assert client.accepts_media == kinds
    assert media_kinds(RetryingClient(client, sleep=_no_sleep)) == kinds


# --- the twin: the API's rules, with its own texts -------------------------------------------


BASE: dict[str, Any] = {"model": MODEL, "max_tokens": 100}


def body_with(*blocks: dict[str, Any], role: str = "user") -> dict[str, Any]:
    messages = [{"role": role, "content": list(blocks)}]
    if role == "assistant":
        messages.insert(0, {"role": "user", "content": "hi"})
    return {**BASE, "messages": messages}


def in_result(*blocks: dict[str, Any]) -> dict[str, Any]:
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": list(blocks)}
    call = {"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {}}
    return {**BASE, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]}  # fmt: skip


LOC = "messages.0.content.0"
RESULT = "messages.2.content.0.tool_result.content.1"
SRC = f"{LOC}.image.source.base64"
BROKEN = [
    (body_with(image(data="not base64!")), f"{SRC}: invalid base64 data"),
    (body_with(image(media_type="image/bmp")),
     f"{SRC}.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"),
    (body_with(image(media_type="image/jpeg")),
     f"{SRC}.data: Image does not match the provided media type image/jpeg"),
    (body_with(image(data="")), f"{SRC}: image cannot be empty"),
    (body_with({"type": "image", "source": {"type": "base64", "data": B64}}),
     f"{SRC}.media_type: Field required"),
    (body_with({"type": "image", "source": {"type": "base64", "media_type": "image/png"}}),
     f"{SRC}.data: Field required"),
    (body_with({"type": "image"}), f"{LOC}.image.source: Field required"),
    (body_with({"type": "image", "source": {"type": "file", "file_id": "f"}}),
     f"{LOC}.image.source: Input tag 'file' found using 'type' does not match any of the "
     "expected tags: 'base64', 'url'"),
    (body_with({"type": "image", "source": {"type": "url"}}),
     f"{LOC}.image.source.url.url: Field required"),
    (body_with({"type": "image", "source": {"type": "url", "url": "u", "media_type": "x"}}),
     f"{LOC}.image.source.url.media_type: Extra inputs are not permitted"),
    (body_with(pdf(data=B64)),
     "messages.0.content.0.pdf.source.base64.data: The PDF specified was not valid."),
    (body_with({"type": "document", "source": {"type": "base64", "media_type": "text/plain",
                                               "data": PDF64}}),
     f"{LOC}.document.source.base64.media_type: Input should be 'application/pdf'"),
    (body_with({"type": "document", "source": {"type": "text", "media_type": "text/markdown",
                                               "data": "# hi"}}),
     f"{LOC}.document.source.text.media_type: Input should be 'text/plain'"),
    (body_with({"type": "audio", "source": {"type": "base64", "data": b64(WAV)}}),
     f"{LOC}: Input tag 'audio' found using 'type' does not match any of the expected tags: "
     + rules._tags(rules.USER_TAGS)),
    (body_with({"type": "text", "text": "I drew"}, image(), role="assistant"),
     "messages.1.content.1: 'image' blocks are not permitted within assistant turns"),
    (in_result({"type": "text", "text": "shot"}, image(media_type="image/svg+xml")),
     f"{RESULT}.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
     "'image/gif' or 'image/webp'"),
    (in_result({"type": "text", "text": "shot"}, {"type": "audio"}),
     f"{RESULT}: Input tag 'audio' found using 'type' does not match any of the expected "
     "tags: 'text', 'image', 'search_result', 'document'"),
    (in_result({"type": "text", "text": ""}, image()), rules.EMPTY_TEXT),
    (body_with(image(b64(b"\x89PNG\r\n\x1a\n" + bytes(rules.MAX_IMAGE_BASE64 // 4 * 3)))),
     f"{SRC}: image exceeds 5 MB maximum: 5242892 bytes > 5242880 bytes"),
]  # fmt: skip


async def post(server: AnthropicTwin, body: dict[str, Any]) -> tuple[int, Any]:
    raw = io.BytesIO(json.dumps(body).encode())  # a large body as bytes would warn
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01",
               "content-type": "application/json"}  # fmt: skip
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server.url}/v1/messages", data=raw,
                                headers=headers) as reply:  # fmt: skip
            return reply.status, await reply.json()


@pytest.mark.parametrize(("body", "message"), BROKEN)
async def test_the_twin_refuses_a_malformed_media_block_as_the_api_does(
    body: dict[str, Any], message: str
) -> None:
    async with AnthropicTwin([TwinReply([twin.text("never")])]) as server:
        status, data = await post(server, body)
    assert status == 400 and server.requests == []
    assert data["error"] == {"type": "invalid_request_error", "message": message}


async def test_the_twin_refuses_a_body_over_32_mib_with_413() -> None:
    chunk = b64(PNG) * (rules.MAX_REQUEST_BYTES // len(b64(PNG)) + 1)
    async with AnthropicTwin([TwinReply([twin.text("never")])]) as server:
        status, data = await post(server, body_with({"type": "text", "text": chunk}))
    assert status == 413 and server.requests == []
    assert data["error"] == {"type": "request_too_large", "message": rules.REQUEST_TOO_LARGE}


TEXT_DOC = {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                           "data": "notes"}}  # fmt: skip
ALLOWED = [
    body_with({"type": "text", "text": "see"}, image(), image(b64(JPEG), "image/jpeg"), pdf(),
              TEXT_DOC, {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
              {"type": "document", "source": {"type": "url", "url": "https://x/y.pdf"},
               "title": "Y", "cache_control": {"type": "ephemeral"}}),
    in_result({"type": "text", "text": "shot"}, image(), pdf(), TEXT_DOC),
    in_result(image()),
]  # fmt: skip


async def test_the_twin_takes_every_right_shape() -> None:
    async with AnthropicTwin([TwinReply([twin.text("ok")])] * len(ALLOWED)) as server:
        for body in ALLOWED:
            status, data = await post(server, body)
            assert status == 200, data
    assert len(server.requests) == len(ALLOWED)
