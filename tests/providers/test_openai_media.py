"""Media on Chat Completions (SPEC 16, provider-rules OpenAI 7): the wire, the refusals, the twin.

No local model here has vision (SmolLM2 reads text only), so a real image cannot prove anything
end to end: these tests pin the wire precisely instead, and every round trip goes through
``twins/openai_chat`` whose media rules (``twins/openai_chat_media``) refuse a malformed part
with OpenAI's own status and text.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.errors import BadRequestError, ConfigurationError
from agentloop.media import AudioPart, DocumentPart, ImagePart
from agentloop.messages import Message, TextPart, ToolCallPart, ToolResultPart
from agentloop.model import ModelRequest, ModelResponse, ModelSettings, media_kinds
from agentloop.providers import OllamaClient, OpenRouterClient, Settings, build_client
from agentloop.providers.openai import OpenAIClient, encode_request
from agentloop.providers.openai import _chat_media as chat_media
from agentloop.providers.profiles import profile_for

from .conftest import serve_app
from .twins.openai_chat import OpenAIChatTwin, Refused, TwinReply, check_request
from .twins.openai_chat_media import (
    FILE_DATA_TEXT,
    IMAGE_URL_TEXT,
    ONLY_CERTAIN_MODELS,
    TOOL_IMAGE_TEXT,
    UNSUPPORTED_IMAGE_TEXT,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
JPEG = b"\xff\xd8\xff\xe0" + b"jpeg" * 10
PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\n%%EOF\n"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(24)
MP3 = b"ID3\x04\x00\x00" + bytes(30)
OGG = b"OggS\x00\x02" + bytes(30)
B64 = base64.b64encode


def data_url(media_type: str, raw: bytes) -> str:
    return f"data:{media_type};base64,{B64(raw).decode()}"


def user(*parts: str | ImagePart | DocumentPart | AudioPart) -> Message:
    return Message.from_input(list(parts))


def wire(*messages: Message, model: str = "gpt-4o") -> list[dict[str, Any]]:
    """The wire messages, with the media kinds ``model``'s profile takes (as the client does)."""
    media = profile_for("openai", model).media
    payload = encode_request(ModelRequest(messages=list(messages)), model, media=media)
    sent: list[dict[str, Any]] = payload["messages"]
    return sent


# --- the wire forms --------------------------------------------------------------------------


def test_a_prompt_with_an_image_is_a_list_of_parts_in_order() -> None:
    (sent,) = wire(user("What is this?", ImagePart(PNG), "Be brief."))
    assert sent == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}},
            {"type": "text", "text": "Be brief."},
        ],
    }


def test_a_url_image_goes_as_the_url() -> None:
    url = "https://example.com/cat.jpg?size=large"
    (sent,) = wire(user(ImagePart(url=url), "cat?"))
    assert sent["content"][0] == {"type": "image_url", "image_url": {"url": url}}


def test_a_pdf_is_a_file_part_with_a_name_and_a_data_url() -> None:
    part = DocumentPart(PDF)
    (sent,) = wire(user("Summarise.", part))
    assert sent["content"][1] == {
        "type": "file",
        "file": {
            "filename": f"document-{part.sha256[:12]}.pdf",
            "file_data": data_url("application/pdf", PDF),
        },
    }


def test_a_plain_text_document_is_a_text_part_under_its_description() -> None:
    part = DocumentPart("naïve notes\nline 2".encode(), "text/plain")
    (sent,) = wire(user("Read:", part))
    assert sent["content"][1] == {
        "type": "text",
        "text": f"{part.describe()}\nnaïve notes\nline 2",
    }
    assert sent["content"][1]["text"].startswith("[document: text/plain, ")


@pytest.mark.parametrize("model", ["gpt-3.5-turbo", "o3-mini", "llama3.2", "gpt-audio"])
def test_a_plain_text_document_goes_to_any_model_as_text(model: str) -> None:
    """It is text on the wire, which every model reads, whatever its profile's media."""
    (sent,) = wire(user("Read:", DocumentPart(b"notes", "text/plain")), model=model)
    assert sent["content"][1]["type"] == "text"
    check_request({"model": model, "messages": [sent]})


@pytest.mark.parametrize(("raw", "fmt"), [(WAV, "wav"), (MP3, "mp3")])
def test_audio_is_input_audio_with_its_format(raw: bytes, fmt: str) -> None:
    (sent,) = wire(user("Transcribe.", AudioPart(raw)), model="gpt-audio-mini")
    assert sent["content"][1] == {
        "type": "input_audio",
        "input_audio": {"data": B64(raw).decode(), "format": fmt},
    }


def test_a_text_only_user_message_keeps_its_string_content() -> None:
    assert wire(Message.user("hi")) == [{"role": "user", "content": "hi"}]


def tool_turn(*results: ToolResultPart) -> list[Message]:
    calls = [ToolCallPart(r.call_id, r.name, {}) for r in results]
    return [Message.user("go"), Message.assistant("", calls), Message.tool_results(results)]


def test_a_tools_media_follow_its_results_in_one_user_message() -> None:
    shot = ImagePart(PNG)
    chart = ImagePart(JPEG)
    sent = wire(
        *tool_turn(
            ToolResultPart("call_1", "screenshot", "", media=(shot,)),
            ToolResultPart("call_2", "lookup", "42"),
            ToolResultPart("call_3", "chart", "sales by month", media=(chart,)),
        )
    )
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "tool", "user"]
    assert [m["content"] for m in sent[2:5]] == [
        chat_media.MEDIA_FOLLOW_TEXT,
        "42",
        "sales by month",
    ]
    assert sent[5]["content"] == [
        {"type": "text", "text": "Media returned by screenshot (call_1):"},
        {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}},
        {"type": "text", "text": "Media returned by chart (call_3):"},
        {"type": "image_url", "image_url": {"url": data_url("image/jpeg", JPEG)}},
    ]
    check_request({"model": "gpt-4o", "messages": sent})  # the twin takes the transcript


def test_results_without_media_send_no_user_message() -> None:
    sent = wire(*tool_turn(ToolResultPart("call_1", "lookup", "42")))
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]


def test_bytes_are_base64_encoded_once_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = ImagePart.base64

    def counting(self: ImagePart) -> str:
        calls.append(self.sha256)
        return original(self)

    monkeypatch.setattr(ImagePart, "base64", counting)
    image = ImagePart(PNG)
    message = user("twice:", image, image, ImagePart(PNG))
    first = wire(message)
    second = wire(message)  # the next turn reuses the encoding
    assert calls == [image.sha256]
    assert first[0] is second[0]
    results = tool_turn(
        ToolResultPart("a", "shot", "", media=(image,)),
        ToolResultPart("b", "shot", "", media=(image,)),
    )
    wire(*results)
    wire(*results)
    assert calls == [image.sha256, image.sha256]  # one more message, one more encoding


def test_a_request_without_media_never_looks_for_any(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object) -> None:
        raise AssertionError("refuse_media ran on a request without media")

    monkeypatch.setattr("agentloop.providers.openai._chat_request.refuse_media", boom)
    history = [Message.user("q"), Message.assistant("a"), *tool_turn(ToolResultPart("c", "t", "x"))]
    assert len(wire(*history, model="o3-mini")) == 5


# --- refused before sending: ConfigurationError naming the part and the model -----------------


REFUSED = [
    ("gpt-3.5-turbo", ImagePart(PNG), "its profile takes no media"),
    ("gpt-4", DocumentPart(PDF), "its profile takes no media"),
    ("o3-mini", ImagePart(url="https://example.com/a.png"), "its profile takes no media"),
    ("o1-mini", DocumentPart(PDF), "its profile takes no media"),
    ("gpt-4o", AudioPart(WAV), "its profile takes document and image"),
    ("gpt-5-mini", AudioPart(MP3), "its profile takes document and image"),
    ("gpt-audio-mini", ImagePart(PNG), "its profile takes audio"),
    ("gpt-4o-audio-preview", DocumentPart(PDF), "its profile takes audio"),
    ("gpt-audio", AudioPart(OGG), "input_audio takes wav or mp3 only"),
    ("gpt-audio", AudioPart(url="https://example.com/a.wav"), "input_audio takes the bytes"),
    ("gpt-4o", DocumentPart(url="https://example.com/a.pdf"), "a file part takes the bytes"),
    ("gpt-4o", ImagePart(b"BM" + bytes(30), "image/bmp"), "png, jpeg, gif and webp"),
]


@pytest.mark.parametrize(("model", "part", "why"), REFUSED)
def test_a_part_the_model_cannot_take_is_refused(model: str, part: Any, why: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        wire(user("look", part), model=model)
    message = str(info.value)
    assert info.value.field == "input" and why in message
    assert model in message and part.describe() in message


@pytest.mark.parametrize("role", ["system", "assistant"])
def test_media_outside_user_messages_and_tool_results_is_refused(role: str) -> None:
    image = ImagePart(PNG)
    with pytest.raises(ConfigurationError, match=f"not in a {role} message") as info:
        wire(Message(role, (TextPart("x"), image)))  # type: ignore[arg-type]
    assert image.describe() in str(info.value)


def test_a_tools_media_the_model_cannot_take_is_refused_too() -> None:
    turn = tool_turn(ToolResultPart("c", "shot", "", media=(ImagePart(PNG),)))
    with pytest.raises(ConfigurationError, match="o3-mini cannot take"):
        wire(*turn, model="o3-mini")


def test_no_error_shows_the_bytes() -> None:
    secret = PNG + b"SECRET-PIXELS" * 20
    image = ImagePart(secret)
    with pytest.raises(ConfigurationError) as info:
        wire(user(image), model="gpt-3.5-turbo")
    shown = str(info.value) + repr(info.value) + repr(image)
    assert "SECRET" not in shown and B64(secret).decode()[:40] not in shown
    assert B64(b"SECRET-PIXELS").decode()[:12] not in shown


# --- what the client says it takes (the engine's soft error reads it) ------------------------


def test_accepts_media_follows_the_profile_and_the_override() -> None:
    assert OpenAIClient("gpt-4o").accepts_media == {"image", "document"}
    assert OpenAIClient("o3-mini").accepts_media == frozenset()
    assert OpenAIClient("gpt-audio").accepts_media == {"audio"}
    assert OllamaClient("llava:13b").accepts_media == {"image"}
    assert OpenRouterClient("openai/gpt-5", api_key="k").accepts_media == {"image", "document"}
    wide = OllamaClient("qwen2-audio", media={"image", "audio"})
    assert wide.accepts_media == {"image", "audio"}
    assert OpenAIClient("gpt-4o", media="image").accepts_media == {"image"}
    wrapped = build_client(Settings(provider="openai", model="o3-mini", api="chat", api_key="k"))
    assert media_kinds(wrapped) == frozenset()


def test_an_unknown_media_kind_in_the_override_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not 'video'") as info:
        OpenAIClient("gpt-4o", media={"image", "video"})
    assert info.value.field == "media"


def test_the_override_widens_what_is_sent() -> None:
    client = OllamaClient("qwen2-audio", media={"audio"})
    request = ModelRequest([user("hear", AudioPart(WAV))])
    body = json.loads(client._payload(request, client.model, False)[0])
    assert body["messages"][0]["content"][1]["input_audio"] == {
        "data": B64(WAV).decode(),
        "format": "wav",
    }
    with pytest.raises(ConfigurationError, match="takes audio"):
        client._payload(ModelRequest([user(ImagePart(PNG))]), client.model, False)


# --- through the twin: JSON and SSE ----------------------------------------------------------


@dataclass
class Served:
    """A running twin and the base URL it answers under."""

    twin: OpenAIChatTwin
    base: str

    def client(self, model: str = "gpt-4o", **kwargs: Any) -> OpenAIClient:
        return OpenAIClient(model, base_url=f"{self.base}/v1", **kwargs)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    twin = OpenAIChatTwin()
    async with serve_app(twin.app()) as base:
        yield Served(twin, base)


async def ask(client: OpenAIClient, request: ModelRequest, stream: bool) -> ModelResponse:
    try:
        if not stream:
            return await client.complete(request)
        events = [event async for event in client.stream(request)]
        assert events[-1].response is not None
        return events[-1].response
    finally:
        await client.aclose()


PROMPTS = [
    ("gpt-4o", ImagePart(PNG)),
    ("gpt-5-mini", ImagePart(JPEG)),
    ("gpt-4.1", ImagePart(url="https://example.com/cat.png")),
    ("o3", DocumentPart(PDF)),
    ("gpt-4o-mini", DocumentPart(b"plain notes", "text/plain")),
    ("gpt-audio-mini", AudioPart(WAV)),
    ("gpt-4o-audio-preview", AudioPart(MP3)),
]


@pytest.mark.parametrize(("model", "part"), PROMPTS, ids=lambda v: getattr(v, "kind", v))
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_the_twin_accepts_each_prompt(
    served: Served, model: str, part: Any, stream: bool
) -> None:
    served.twin.push(TwinReply("Seen."))
    response = await ask(served.client(model), ModelRequest([user("What?", part)]), stream)
    assert response.text == "Seen."
    (body,) = served.twin.accepted
    assert body["messages"][0]["content"][0] == {"type": "text", "text": "What?"}


@pytest.mark.parametrize(("model", "part", "why"), REFUSED)
async def test_a_refused_part_sends_nothing(
    served: Served, model: str, part: Any, why: str
) -> None:
    with pytest.raises(ConfigurationError, match=why):
        await ask(served.client(model), ModelRequest([user("look", part)]), stream=False)
    assert served.twin.requests == []


@tool
def screenshot(page: str) -> list[object]:
    """Take a screenshot of a page.

    Args:
        page: The page.
    """
    return [f"screenshot of {page}", ImagePart(PNG)]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_tool_returning_an_image_through_the_agent_loop(
    served: Served, stream: bool
) -> None:
    served.twin.push(
        TwinReply(tool_calls=[("screenshot", {"page": "home"})]),
        TwinReply("A blank page."),
    )
    async with served.client("gpt-5-mini") as client:
        agent = Agent(client, tools=[screenshot], config=RunConfig(stream=stream))
        run = await agent.run(["Look at this first:", ImagePart(JPEG)])
    assert run.output == "A blank page."
    first, second = served.twin.accepted
    assert first["messages"][0]["content"][1]["image_url"]["url"] == data_url("image/jpeg", JPEG)
    messages = second["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2]["content"] == "screenshot of home"
    call_id = messages[2]["tool_call_id"]
    assert messages[3]["content"] == [
        {"type": "text", "text": f"Media returned by screenshot ({call_id}):"},
        {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}},
    ]


async def test_a_tools_image_on_a_model_without_vision_is_a_soft_error(served: Served) -> None:
    served.twin.push(
        TwinReply(tool_calls=[("screenshot", {"page": "home"})]),
        TwinReply("I cannot see it."),
    )
    async with served.client("o3-mini") as client:
        run = await Agent(client, tools=[screenshot]).run("Look.")
    assert run.output == "I cannot see it."
    result = run.turns[0].tool_results[0]
    assert result.is_error and "returned image, which openai cannot take" in result.content
    messages = served.twin.accepted[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]


async def test_no_log_line_shows_the_bytes(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    served.twin.push(TwinReply("ok"))
    caplog.set_level(logging.DEBUG)
    secret = PNG + b"LOGGED-PIXELS" * 10
    await ask(served.client(), ModelRequest([user("x", ImagePart(secret))]), stream=False)
    assert B64(secret).decode()[:30] not in caplog.text and "LOGGED" not in caplog.text


# --- the twin refuses a malformed part with OpenAI's status and text ---------------------------


def part_in(part: dict[str, Any], role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": "x"}, part]}


def image(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url, **extra}}


def pdf(file_data: str, **extra: Any) -> dict[str, Any]:
    return {"type": "file", "file": {"filename": "a.pdf", "file_data": file_data, **extra}}


def audio(data: str, fmt: str) -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}


P = "messages[0].content[1]"
IMG = f"{P}.image_url.url"
FILE = f"{P}.file.file_data"
TWIN_REFUSALS: list[tuple[str, dict[str, Any], str, str | None]] = [
    (
        "gpt-4o",
        part_in(image(B64(PNG).decode())),
        IMAGE_URL_TEXT.format(param=IMG, got="a value without the 'data:' prefix"),
        "invalid_value",
    ),
    (
        "gpt-4o",
        part_in(image("data:image/png;base64,@@not-base64@@")),
        IMAGE_URL_TEXT.format(param=IMG, got="an invalid base64-encoded value"),
        "invalid_value",
    ),
    (
        "gpt-4o",
        part_in(image("data:image/png;base64,")),
        IMAGE_URL_TEXT.format(param=IMG, got="empty base64-encoded bytes"),
        "invalid_value",
    ),
    (
        "gpt-4o",
        part_in(image(data_url("application/pdf", PDF))),
        IMAGE_URL_TEXT.format(param=IMG, got="unsupported MIME type 'application/pdf'"),
        "invalid_value",
    ),
    (
        "gpt-4o",
        part_in(image(data_url("image/bmp", b"BM" + bytes(20)))),
        UNSUPPORTED_IMAGE_TEXT,
        "sanitizer_server_error",
    ),
    (
        "gpt-4o",
        part_in(image(data_url("image/png", JPEG))),
        UNSUPPORTED_IMAGE_TEXT,
        "sanitizer_server_error",
    ),
    (
        "gpt-4o",
        part_in(image(data_url("image/png", PNG), detail="ultra")),
        "Invalid value: 'ultra'. Supported values are: 'auto', 'low', and 'high'.",
        "invalid_value",
    ),
    (
        "gpt-4o",
        part_in({"type": "image_url", "image_url": {}}),
        f"Missing required parameter: '{P}.image_url.url'.",
        "missing_required_parameter",
    ),
    (
        "gpt-4o",
        part_in({"type": "image_url"}),
        f"Missing required parameter: '{P}.image_url'.",
        "missing_required_parameter",
    ),
    (
        "gpt-4o",
        part_in(pdf(data_url("text/markdown", b"# hi"))),
        FILE_DATA_TEXT.format(param=FILE, got="unsupported MIME type 'text/markdown'"),
        "invalid_value",
    ),
    (
        "gpt-4o",
        part_in(pdf("data:application/pdf;base64,%%%")),
        FILE_DATA_TEXT.format(param=FILE, got="an invalid base64-encoded value"),
        "invalid_value",
    ),
    (
        "gpt-4o",
        part_in(pdf(B64(PDF).decode())),
        FILE_DATA_TEXT.format(param=FILE, got="a value without the 'data:' prefix"),
        "invalid_value",
    ),
    (
        "gpt-4o",
        part_in({"type": "file", "file": {"file_data": data_url("application/pdf", PDF)}}),
        f"Missing required parameter: '{P}.file.filename'.",
        "missing_required_parameter",
    ),
    (
        "gpt-4o",
        part_in({"type": "file", "file": {"filename": "a.pdf"}}),
        f"Missing required parameter: '{FILE}'.",
        "missing_required_parameter",
    ),
    (
        "gpt-audio",
        part_in(audio(B64(OGG).decode(), "ogg")),
        "Invalid value: 'ogg'. Supported values are: 'wav' and 'mp3'.",
        "invalid_value",
    ),
    (
        "gpt-audio",
        part_in(audio("not base64!", "wav")),
        f"Invalid '{P}.input_audio.data'. Expected base64-encoded audio data, but got an "
        "invalid base64-encoded value.",
        "invalid_value",
    ),
    (
        "gpt-audio",
        part_in({"type": "input_audio", "input_audio": {"data": B64(WAV).decode()}}),
        f"Missing required parameter: '{P}.input_audio.format'.",
        "missing_required_parameter",
    ),
    (
        "gpt-4o",
        part_in({"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}}),
        "Invalid value: 'video_url'. Supported values are: 'text', 'image_url', "
        "'input_audio', and 'file'.",
        "invalid_value",
    ),
    (
        "gpt-4o",
        part_in(image(data_url("image/png", PNG)), role="system"),
        "Invalid value: 'image_url'. Supported values are: 'text'.",
        "invalid_value",
    ),
    (
        "gpt-3.5-turbo",
        part_in(image(data_url("image/png", PNG))),
        ONLY_CERTAIN_MODELS.format(kind="image_url"),
        None,
    ),
    (
        "gpt-4o",
        part_in(audio(B64(WAV).decode(), "wav")),
        ONLY_CERTAIN_MODELS.format(kind="input_audio"),
        None,
    ),
    (
        "gpt-audio-mini",
        part_in(image(data_url("image/png", PNG))),
        "This model does not support image_url content.",
        "invalid_value",
    ),
]


@pytest.mark.parametrize(("model", "message", "text", "code"), TWIN_REFUSALS)
def test_the_twin_refuses_a_malformed_part(
    model: str, message: dict[str, Any], text: str, code: str | None
) -> None:
    with pytest.raises(Refused) as info:
        check_request({"model": model, "messages": [message]})
    assert info.value.status == 400
    assert info.value.error["message"] == text and info.value.error["code"] == code


def test_the_twin_refuses_media_in_a_tool_message() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}
    tool_message = {
        "role": "tool",
        "tool_call_id": "c1",
        "content": [image(data_url("image/png", PNG))],
    }
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        tool_message,
    ]
    with pytest.raises(Refused) as info:
        check_request({"model": "gpt-4o", "messages": messages})
    assert info.value.error["message"] == TOOL_IMAGE_TEXT.format(index=2)
    assert TOOL_IMAGE_TEXT.format(index=2) == (
        "Invalid 'messages[2]'. Image URLs are only allowed for messages with role 'user', but "
        "this message with role 'tool' contains an image URL."
    )
    tool_message["content"] = [pdf(data_url("application/pdf", PDF))]
    with pytest.raises(Refused, match="Supported values are: 'text'"):
        check_request({"model": "gpt-4o", "messages": messages})
    tool_message["content"] = [{"type": "text", "text": "ok"}]
    check_request({"model": "gpt-4o", "messages": messages})  # text parts are fine


async def test_the_client_surfaces_the_twins_refusal(served: Served) -> None:
    """A malformed part that gets past our checks (``extra_body``) comes back as OpenAI's 400."""
    bad = {"messages": [part_in(image("data:image/png;base64,@@"))]}
    request = ModelRequest([Message.user("x")], settings=ModelSettings(extra_body=bad))
    with pytest.raises(BadRequestError) as info:
        await ask(served.client(), request, stream=False)
    assert info.value.status_code == 400
    body = json.loads(info.value.body or "{}")
    assert body["error"]["message"] == IMAGE_URL_TEXT.format(
        param=IMG, got="an invalid base64-encoded value"
    )
    assert body["error"]["param"] == IMG and body["error"]["type"] == "invalid_request_error"
