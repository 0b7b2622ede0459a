"""OpenAIResponsesClient with media (SPEC 16, provider-rules OpenAI 3 and 7), through the twin.

Images and PDFs go as ``input_image`` / ``input_file`` content in the prompt and inside a
``function_call_output``'s ``output`` list, byte for byte as OpenAI's spec names them (JSON and
SSE, through the agent loop); what the API or the model cannot take (audio, above all) is a
``ConfigurationError`` naming the part and the model before any request; the twin refuses a
malformed part with the API's own status and text and takes every right shape. No local model
can see (SmolLM2 has no vision), so the wire is tested precisely instead.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import AsyncIterator
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
from agentloop.model import ModelRequest, media_kinds
from agentloop.providers import OpenAIResponsesClient
from agentloop.providers.responses import encode_request

from .conftest import serve_app
from .twins import openai_responses_media as rules
from .twins.openai_responses import Reply, ResponsesTwin

KEY = "twin-key"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(200))
PDF = b"%PDF-1.7\n" + b"0" * 300
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 64


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image(data: bytes = PNG, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "input_image", "image_url": f"data:{media_type};base64,{b64(data)}",
            "detail": "auto"}  # fmt: skip


def pdf(data: bytes = PDF) -> dict[str, Any]:
    name = f"document-{hashlib.sha256(data).hexdigest()[:12]}.pdf"
    return {"type": "input_file", "filename": name,
            "file_data": f"data:application/pdf;base64,{b64(data)}"}  # fmt: skip


@pytest.fixture
async def twin() -> AsyncIterator[tuple[ResponsesTwin, str]]:
    state = ResponsesTwin()
    async with serve_app(state.app()) as url:
        yield state, url + "/v1"


def client_for(url: str, model: str = "gpt-5") -> OpenAIResponsesClient:
    return OpenAIResponsesClient(model, api_key=KEY, base_url=url)


def user(*parts: Any) -> Message:
    return Message("user", tuple(TextPart(p) if isinstance(p, str) else p for p in parts))


# --- the prompt --------------------------------------------------------------------------------

TEXT = "Grüße, plain text.".encode()
PROMPTS = [
    (ImagePart(PNG), image()),
    (ImagePart(JPEG, "image/jpeg"), image(JPEG, "image/jpeg")),
    (DocumentPart(PDF), pdf()),
    (DocumentPart(TEXT, "text/plain"),
     {"type": "input_text",
      "text": f"{DocumentPart(TEXT, 'text/plain').describe()}\nGrüße, plain text."}),
    (ImagePart(url="https://example.com/chart.png"),
     {"type": "input_image", "image_url": "https://example.com/chart.png", "detail": "auto"}),
    (DocumentPart(url="https://example.com/report.pdf"),
     {"type": "input_file", "file_url": "https://example.com/report.pdf"}),
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("part", "item"), PROMPTS, ids=["png", "jpeg", "pdf", "text", "url-image",
                                                         "url-pdf"])  # fmt: skip
async def test_a_prompt_with_media_goes_as_input_content(
    twin: tuple[ResponsesTwin, str], stream: bool, part: Any, item: dict[str, Any]
) -> None:
    state, url = twin
    state.script = [Reply(text="A chart.")]
    async with client_for(url) as client:
        run = await Agent(client, config=RunConfig(stream=stream)).run(["What is this?", part])
    assert run.output == "A chart." and [r.status for r in state.received] == [200]
    [message] = state.received[0].body["input"]
    question = {"type": "input_text", "text": "What is this?"}
    assert message == {"type": "message", "role": "user", "content": [question, item]}


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


def output_of(body: dict[str, Any]) -> Any:
    [result] = [item for item in body["input"] if item["type"] == "function_call_output"]
    return result["output"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_tools_image_goes_in_its_function_call_output(
    twin: tuple[ResponsesTwin, str], stream: bool
) -> None:
    state, url = twin
    state.script = [Reply(calls=[("screenshot", {"page": "home"})]), Reply(text="Seen.")]
    async with client_for(url) as client:
        agent = Agent(client, tools=[screenshot], config=RunConfig(stream=stream))
        run = await agent.run("Look at the home page")
    assert run.output == "Seen." and [r.status for r in state.received] == [200, 200]
    second = state.received[1].body
    assert output_of(second) == [{"type": "input_text", "text": "the home page"}, image()]
    assert [item["type"] for item in second["input"]] == [
        "message", "reasoning", "function_call", "function_call_output",
    ]  # fmt: skip  # no extra user message: the output is the last item


async def test_a_tools_pdf_alone_goes_without_a_text_item(twin: tuple[ResponsesTwin, str]) -> None:
    state, url = twin
    state.script = [Reply(calls=[("report", {})]), Reply(text="Read.")]
    async with client_for(url) as client:
        await Agent(client, tools=[report]).run("Read the report")
    assert [r.status for r in state.received] == [200, 200]
    assert output_of(state.received[1].body) == [pdf()]


async def test_a_tools_audio_is_a_soft_error_the_model_reads(
    twin: tuple[ResponsesTwin, str],
) -> None:
    state, url = twin
    state.script = [Reply(calls=[("record", {})]), Reply(text="No sound then.")]
    async with client_for(url) as client:
        run = await Agent(client, tools=[record]).run("Record something")
    assert run.output == "No sound then." and [r.status for r in state.received] == [200, 200]
    output = output_of(state.received[1].body)
    assert isinstance(output, str) and "audio" in output


def test_bytes_are_base64_encoded_once_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = ImagePart.base64

    def counting(self: ImagePart) -> str:
        calls.append(self.sha256)
        return original(self)

    monkeypatch.setattr(ImagePart, "base64", counting)
    prompt = user("two of the same", ImagePart(PNG), ImagePart(PNG))
    call = Message("assistant", (ToolCallPart("c1", "screenshot", {"page": "a"}),))
    result = Message("tool", (ToolResultPart("c1", "screenshot", "", media=(ImagePart(PNG),)),))
    request = ModelRequest(messages=(prompt, call, result))
    first = encode_request(request, "gpt-5")
    again = encode_request(request, "gpt-5")  # the next turn resends the same messages
    assert first == again and len(calls) == 2  # once per message, never per request


def test_a_request_without_media_is_unchanged() -> None:
    call = Message("assistant", (ToolCallPart("c1", "look", {"q": "a"}),))
    result = Message("tool", (ToolResultPart("c1", "look", "found a"),))
    items = encode_request(ModelRequest(messages=(user("hi"), call, result)), "gpt-5")["input"]
    assert items[0] == {"type": "message", "role": "user", "content": "hi"}
    assert items[2] == {"type": "function_call_output", "call_id": "c1", "output": "found a"}


# --- refused before any request ------------------------------------------------------------------

BIG = b"\x89PNG\r\n\x1a\n" + bytes(16 * 1024 * 1024)  # 21.3 MiB of base64: past image_url's limit
REFUSED = [
    ("gpt-5", user("hear this", AudioPart(WAV)), "no input_audio"),
    ("gpt-audio", user("hear this", AudioPart(WAV)), "no input_audio"),
    ("o3-mini", user("see this", ImagePart(PNG)), "its profile takes no media"),
    ("gpt-4", user("read this", DocumentPart(PDF)), "its profile takes no media"),
    ("gpt-5", user("see", ImagePart(b"II*\x00" + bytes(64), "image/tiff")), "png, jpeg, gif"),
    ("gpt-5", user("see", ImagePart(BIG)), "over the API's 20,971,520"),
    ("gpt-5", Message("system", (TextPart("x"), ImagePart(PNG))), "not in a system message"),
    ("gpt-5", Message("assistant", (ImagePart(PNG),)), "not in a assistant message"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "message", "why"), REFUSED,
                         ids=["audio", "audio-model", "o3-mini", "gpt-4", "tiff", "too-big",
                              "system", "assistant"])  # fmt: skip
async def test_what_the_api_cannot_take_is_refused_before_any_request(
    twin: tuple[ResponsesTwin, str], model: str, message: Message, why: str
) -> None:
    state, url = twin
    async with client_for(url, model) as client:
        with pytest.raises(ConfigurationError, match=why) as caught:
            await client.complete(ModelRequest(messages=(message,)))
    assert state.received == []  # nothing was sent
    text = str(caught.value)
    part = next(p for p in message.parts if isinstance(p, ImagePart | DocumentPart | AudioPart))
    assert part.describe() in text and caught.value.field == "input"
    assert "AAAA" not in text and b64(PNG)[:40] not in text  # never the bytes


async def test_a_tools_audio_in_a_transcript_is_refused_too(
    twin: tuple[ResponsesTwin, str],
) -> None:
    state, url = twin
    call = Message("assistant", (ToolCallPart("c1", "record", {}),))
    result = Message("tool", (ToolResultPart("c1", "record", "", media=(AudioPart(WAV),)),))
    async with client_for(url) as client:
        with pytest.raises(ConfigurationError, match=r"gpt-5 cannot take \[audio"):
            await client.complete(ModelRequest(messages=(user("go"), call, result)))
    assert state.received == []


async def test_a_refused_prompt_ends_the_run_before_any_request(
    twin: tuple[ResponsesTwin, str],
) -> None:
    state, url = twin
    async with client_for(url) as client:
        with pytest.raises(ConfigurationError, match="no input_audio"):
            await Agent(client).run(["Transcribe this", AudioPart(WAV)])
    assert state.received == []


@pytest.mark.parametrize(("model", "kinds"), [
    ("gpt-5", {"image", "document"}), ("gpt-4.1", {"image", "document"}),
    ("gpt-audio", set()), ("o3-mini", set()), ("gpt-3.5-turbo", set()),
])  # fmt: skip
def test_accepts_media_follows_the_profile_and_never_says_audio(
    model: str, kinds: set[str]
) -> None:
    client = OpenAIResponsesClient(model, api_key=KEY)
    assert client.accepts_media == kinds and media_kinds(client) == kinds


# --- the twin ----------------------------------------------------------------------------------


def body_with(*content: dict[str, Any], model: str = "gpt-5") -> dict[str, Any]:
    message = {"type": "message", "role": "user", "content": list(content)}
    return {"model": model, "input": [message], "store": False}


def in_output(*content: dict[str, Any]) -> dict[str, Any]:
    items = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": list(content)},
    ]
    return {"model": "gpt-4.1", "input": items, "store": False}


AT = "input[0].content[0]"
OUT = "input[2].output[0]"
AUDIO = {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}}
LONG = "data:image/png;base64," + "A" * rules._IMAGE_URL_MAX
BROKEN = [
    (body_with({"type": "text", "text": "hi"}),
     "Invalid value: 'text'. Supported values are: 'input_text', 'input_image', 'input_audio', "
     "'output_text', 'refusal', 'input_file', 'computer_screenshot', 'summary_text', and "
     "'encrypted_content'.", f"{AT}.type", "invalid_value"),
    (body_with(AUDIO), "input_audio is not supported in the Responses API input content.",
     f"{AT}.type", "invalid_value"),
    (body_with({"type": "input_image", "image_url": "data:image/png;base64,%%%", "detail": "auto"}),
     rules.IMAGE_URL_TEXT.format(param=f"{AT}.image_url", got="an invalid base64-encoded value"),
     f"{AT}.image_url", "invalid_value"),
    (body_with({"type": "input_image", "image_url": "data:image/png;base64,", "detail": "auto"}),
     rules.IMAGE_URL_TEXT.format(param=f"{AT}.image_url", got="empty base64-encoded bytes"),
     f"{AT}.image_url", "invalid_value"),
    (body_with(image(PNG, "application/octet-stream")),
     rules.IMAGE_URL_TEXT.format(param=f"{AT}.image_url",
                                 got="unsupported MIME type 'application/octet-stream'"),
     f"{AT}.image_url", "invalid_value"),
    (body_with(image(b"II*\x00" + bytes(64), "image/tiff")), rules.UNSUPPORTED_IMAGE_TEXT, None,
     "invalid_image_format"),
    (body_with(image(PDF, "image/png")), rules.UNSUPPORTED_IMAGE_TEXT, None,
     "invalid_image_format"),
    (body_with({"type": "input_image", "detail": "auto"}),
     f"Missing required parameter: '{AT}.image_url'.", f"{AT}.image_url",
     "missing_required_parameter"),
    (body_with({**image(), "detail": "max"}),
     "Invalid value: 'max'. Supported values are: 'low', 'high', 'auto', and 'original'.",
     f"{AT}.detail", "invalid_value"),
    (body_with({"type": "input_image", "image_url": LONG, "detail": "auto"}),
     f"Invalid '{AT}.image_url': string too long. Expected a string with maximum length "
     f"20971520, but got a string with length {len(LONG)} instead.", f"{AT}.image_url",
     "string_above_max_length"),
    (body_with({k: v for k, v in pdf().items() if k != "filename"}),
     f"Missing required parameter: '{AT}.filename'.", f"{AT}.filename",
     "missing_required_parameter"),
    (body_with({"type": "input_file", "filename": "a.pdf"}),
     f"Missing required parameter: '{AT}.file_data'.", f"{AT}.file_data",
     "missing_required_parameter"),
    (body_with(pdf(PNG)),
     f"Invalid '{AT}.file_data': the file is not a valid application/pdf file.",
     f"{AT}.file_data", None),
    (body_with(image(), model="o3-mini"),
     "Invalid content type. image_url is only supported by certain models.", f"{AT}.type", None),
    (in_output({"type": "output_text", "text": "x"}),
     "Invalid value: 'output_text'. Supported values are: 'input_text', 'input_image', and "
     "'input_file'.", f"{OUT}.type", "invalid_value"),
    (in_output(AUDIO), "input_audio is not supported in the Responses API input content.",
     f"{OUT}.type", "invalid_value"),
    (in_output({"type": "input_image", "image_url": "data:image/png;base64,", "detail": "auto"}),
     rules.IMAGE_URL_TEXT.format(param=f"{OUT}.image_url", got="empty base64-encoded bytes"),
     f"{OUT}.image_url", "invalid_value"),
]  # fmt: skip


async def post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    raw = io.BytesIO(json.dumps(body).encode())  # a large body as bytes would warn
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/responses", data=raw, headers=headers) as reply:
            return reply.status, await reply.json()


@pytest.mark.parametrize(("body", "message", "param", "code"), BROKEN)
async def test_the_twin_refuses_a_malformed_media_part_as_the_api_does(
    twin: tuple[ResponsesTwin, str], body: dict[str, Any], message: str, param: str | None,
    code: str | None,
) -> None:  # fmt: skip
    state, url = twin
    status, data = await post(url, body)
    assert status == 400 and state.accepted == []
    assert data["error"] == {"message": message, "type": "invalid_request_error", "param": param,
                             "code": code}  # fmt: skip


async def test_the_twin_takes_every_right_shape(twin: tuple[ResponsesTwin, str]) -> None:
    state, url = twin
    state.script = [Reply(text="ok"), Reply(text="ok")]
    shapes = [
        {"type": "input_text", "text": "look"},
        image(), image(JPEG, "image/jpeg"), pdf(),
        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"},
        {"type": "input_image", "file_id": "file-123", "detail": "high"},
        {"type": "input_file", "file_url": "https://example.com/a.pdf"},
        {"type": "input_file", "file_id": "file-123"},
    ]  # fmt: skip
    assert (await post(url, body_with(*shapes)))[0] == 200
    assert (await post(url, in_output(*shapes)))[0] == 200
