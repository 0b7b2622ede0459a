"""GeminiClient media (SPEC 16; provider-rules Gemini 5) through the Gemini twin.

A real image through a real model is not possible here (the local SmolLM2 has no vision), so
these tests pin the wire exactly: ``inlineData``/``fileData`` in a prompt, a tool's media inside
its ``functionResponse`` on Gemini 3 and in a user turn right after the responses on Gemini 2.5,
the ``ConfigurationError`` before any request for what a model cannot take, and the twin's
refusals of malformed media with Gemini's own texts.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import aiohttp
import pytest

from agentloop import Agent, tool
from agentloop.config import RunConfig
from agentloop.errors import BadRequestError, ConfigurationError
from agentloop.messages import (
    AudioPart,
    DocumentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.model import MEDIA_KINDS, ModelRequest, ModelSettings, media_kinds
from agentloop.providers.gemini import GeminiClient, build_payload
from agentloop.providers.gemini import _encode as _gemini_encode
from agentloop.testing import FakeClock

from .conftest import serve_app
from .twins.gemini import PARTS_UNSUPPORTED, GeminiTwin, Reply, call, text

KEY = "twin-key"
G3 = "gemini-3-flash-preview"
G25 = "gemini-2.5-flash"
OLD = "gemini-2.0-flash"  # the catch-all row: images and documents only
MODES = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


def png() -> bytes:
    """A real 1x1 PNG."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    body = chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


PNG = png()
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
WAV = b"RIFF" + struct.pack("<I", 36) + b"WAVEfmt " + bytes(24)
GIF = b"GIF89a" + bytes(20)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def inline(mime: str, data: bytes) -> dict[str, Any]:
    return {"inlineData": {"mimeType": mime, "data": b64(data)}}


def tool_turn(*results: ToolResultPart) -> list[Message]:
    """A user ask, the model's calls for ``results``, and the tool message with them."""
    calls = [ToolCallPart(r.call_id, r.name, {}) for r in results]
    return [Message.user("look"), Message.assistant(calls=calls), Message("tool", results)]


def shot_result(*media: Any, call_id: str = "c1", name: str = "shot") -> ToolResultPart:
    return ToolResultPart(call_id, name, "took it", media=media)


Serve = Callable[..., Any]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``await serve(twin)`` -> the twin's base URL; servers close at the end."""
    async with AsyncExitStack() as stack:

        async def start(twin: GeminiTwin) -> str:
            url = await stack.enter_async_context(serve_app(twin.app()))
            return f"{url}/v1beta"

        yield start


def gemini(base_url: str, model: str = G3) -> GeminiClient:
    return GeminiClient(model, api_key=KEY, base_url=base_url)


async def ask(client: GeminiClient, request: ModelRequest, stream: bool) -> Any:
    async with client:
        if not stream:
            return await client.complete(request)
        events = [e async for e in client.stream(request)]
        return events[-1].response


# --- the prompt's wire form --------------------------------------------------------------------


def test_media_in_a_prompt_go_inline_in_order_among_the_text() -> None:
    message = Message(
        "user",
        (
            TextPart("compare"),
            ImagePart(PNG),
            DocumentPart(PDF),
            DocumentPart(b"plain notes", "text/plain"),
            AudioPart(WAV),
            TextPart("briefly"),
        ),
    )
    parts = build_payload(ModelRequest(messages=[message]), G25)["contents"][0]["parts"]
    assert parts == [
        {"text": "compare"},
        inline("image/png", PNG),
        inline("application/pdf", PDF),
        inline("text/plain", b"plain notes"),
        inline("audio/wav", WAV),
        {"text": "briefly"},
    ]


def test_a_url_goes_as_file_data_with_its_type_declared_or_named_by_its_path() -> None:
    files_api = "https://generativelanguage.googleapis.com/v1beta/files/abc123"
    message = Message(
        "user",
        (
            ImagePart(url="https://example.com/chart.png?s=2"),
            DocumentPart(media_type="application/pdf", url="https://example.com/report"),
            AudioPart(url=files_api),
        ),
    )
    parts = build_payload(ModelRequest(messages=[message]), G3)["contents"][0]["parts"]
    assert parts == [
        {"fileData": {"fileUri": "https://example.com/chart.png?s=2", "mimeType": "image/png"}},
        {"fileData": {"fileUri": "https://example.com/report", "mimeType": "application/pdf"}},
        {"fileData": {"fileUri": files_api}},  # an upload carries its own type
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("model", "part", "says"),
    [
        (OLD, AudioPart(WAV), "gemini-2.0-flash cannot take [audio: audio/wav, 40 bytes"),
        (G3, ImagePart(GIF), "gemini-3-flash-preview cannot take [image: image/gif, 26 bytes"),
        (G25, ImagePart(url="https://example.com/pic"), "its URL names no media type"),
        (G25, ImagePart(b"BM" + bytes(30), "image/bmp"), "convert it to one of them"),
    ],
    ids=["audio-on-gemini-2.0", "gif", "url-without-a-type", "bmp"],
)
def test_a_part_the_model_cannot_take_is_a_configuration_error(
    model: str, part: Any, says: str
) -> None:
    request = ModelRequest(messages=[Message("user", (TextPart("what is it"), part))])
    with pytest.raises(ConfigurationError) as caught:
        build_payload(request, model)
    assert says in str(caught.value) and caught.value.field == "input"
    if part.data is not None:  # the error shows describe(), never the bytes
        assert b64(part.data) not in str(caught.value) and part.describe() in str(caught.value)


def test_the_profile_says_which_kinds_each_model_takes() -> None:
    for model in (G3, G25, "gemini-3-pro-preview", "gemini-3.1-pro-preview"):
        assert gemini("http://127.0.0.1:9/v1beta", model).accepts_media == MEDIA_KINDS
    old = gemini("http://127.0.0.1:9/v1beta", OLD)
    assert media_kinds(old) == frozenset({"image", "document"})


def test_each_part_is_base64_encoded_once_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    plain = ImagePart.base64

    def counting(self: ImagePart) -> str:
        calls.append(self.size)
        return plain(self)

    monkeypatch.setattr(ImagePart, "base64", counting)
    image = ImagePart(PNG)
    history = [Message("user", (TextPart("see"), image)), *tool_turn(shot_result(image))]
    request = ModelRequest(messages=history)
    for model in (G3, G25, G3, G25):
        build_payload(request, model)
    assert calls == [len(PNG), len(PNG)]  # once for the prompt, once for the tool's result


def test_a_request_without_media_runs_no_media_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any) -> Any:
        raise AssertionError("media code ran for a request without media")

    for name in ("encode_media", "tool_media", "refuse_kind", "_place_media", "_refused"):
        monkeypatch.setattr(_gemini_encode, name, boom)
    history = tool_turn(ToolResultPart("c1", "shot", "no picture"))
    for model in (G3, G25, OLD):
        assert build_payload(ModelRequest(messages=history), model)["contents"]


def test_a_signature_before_a_media_part_goes_on_it() -> None:
    message = Message(
        "assistant", (ThinkingPart("", signature="s1", provider="gemini"), ImagePart(PNG))
    )
    parts = build_payload(ModelRequest(messages=[message]), G3)["contents"][0]["parts"]
    assert parts == [{**inline("image/png", PNG), "thoughtSignature": "s1"}]


# --- a tool's media -----------------------------------------------------------------------------


def test_gemini_3_takes_a_tools_image_inside_its_function_response() -> None:
    contents = build_payload(ModelRequest(messages=tool_turn(shot_result(ImagePart(PNG)))), G3)[
        "contents"
    ]
    assert contents[2] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "shot",
                    "response": {"result": "took it"},
                    "id": "c1",
                    "parts": [inline("image/png", PNG)],
                }
            }
        ],
    }
    assert len(contents) == 3  # nothing after the responses


def test_gemini_2_5_gets_a_tools_media_in_a_user_turn_after_every_response() -> None:
    results = (
        shot_result(ImagePart(PNG), DocumentPart(PDF), call_id="c1"),
        ToolResultPart("c2", "read", "plain text"),
    )
    history = [*tool_turn(*results), Message.user("and now?")]
    contents = build_payload(ModelRequest(messages=history), G25)["contents"]
    responses = contents[2]["parts"]
    assert [p["functionResponse"]["id"] for p in responses] == ["c1", "c2"]
    assert all("parts" not in p["functionResponse"] for p in responses)
    assert contents[3] == {
        "role": "user",
        "parts": [
            {"text": "[media returned by tool 'shot']"},
            inline("image/png", PNG),
            inline("application/pdf", PDF),
            {"text": "and now?"},  # the next user message joins the media turn
        ],
    }


def test_the_media_turn_waits_for_every_tool_message_of_the_turn() -> None:
    first, second = shot_result(ImagePart(PNG)), ToolResultPart("c2", "read", "text")
    history = tool_turn(first, second)
    history[2:] = [Message("tool", (first,)), Message("tool", (second,))]
    contents = build_payload(ModelRequest(messages=history), G25)["contents"]
    assert [len(c["parts"]) for c in contents] == [1, 2, 2, 2]
    assert [p["functionResponse"]["id"] for p in contents[2]["parts"]] == ["c1", "c2"]
    assert contents[3]["parts"][1] == inline("image/png", PNG)


def test_on_gemini_3_what_a_response_cannot_hold_goes_after_it() -> None:
    url = "https://example.com/a.png"
    result = shot_result(ImagePart(PNG), AudioPart(WAV), ImagePart(url=url), ImagePart(GIF))
    contents = build_payload(ModelRequest(messages=tool_turn(result)), G3)["contents"]
    assert contents[2]["parts"][0]["functionResponse"]["parts"] == [inline("image/png", PNG)]
    assert contents[3]["parts"][:3] == [
        {"text": "[media returned by tool 'shot']"},
        inline("audio/wav", WAV),
        {"fileData": {"fileUri": url, "mimeType": "image/png"}},
    ]
    note = contents[3]["parts"][3]["text"]  # a GIF is a line the model reads, never its bytes
    assert note.startswith("tool 'shot' returned [image: image/gif, 26 bytes, sha256 ")
    assert note.endswith("which Gemini cannot take") and b64(GIF) not in str(contents)


def test_the_encoded_tool_media_never_show_their_bytes() -> None:
    message = tool_turn(shot_result(ImagePart(PNG)))[2]
    media = message.encoded("gemini", _gemini_encode._encode_message)[3]
    assert repr(media[1][0]) == "ToolMedia(index=0, nested=1, after=0, after_all=2)"
    assert b64(PNG) not in repr(message)


def test_the_cached_encoding_serves_gemini_3_and_2_5_alike() -> None:
    history = tool_turn(shot_result(ImagePart(PNG)))
    request = ModelRequest(messages=history)
    first = build_payload(request, G3)["contents"]
    older = build_payload(request, G25)["contents"]
    again = build_payload(request, G3)["contents"]
    assert first == again and "parts" not in older[2]["parts"][0]["functionResponse"]
    cached = history[2].encoded("gemini", _gemini_encode._encode_message)
    assert "parts" not in cached[1][0]["functionResponse"]  # requests never change it


def test_a_tools_audio_on_a_model_without_audio_is_a_configuration_error() -> None:
    history = tool_turn(shot_result(AudioPart(WAV)))
    with pytest.raises(ConfigurationError, match=r"gemini-2\.0-flash cannot take \[audio"):
        build_payload(ModelRequest(messages=history), OLD)


# --- through the twin ----------------------------------------------------------------------------


@MODES
async def test_a_prompt_with_an_image_a_pdf_and_audio_is_accepted(
    serve: Serve, stream: bool
) -> None:
    twin = GeminiTwin(Reply([text("a green pixel, a PDF and silence")]))
    message = Message(
        "user", (TextPart("what are these"), ImagePart(PNG), DocumentPart(PDF), AudioPart(WAV))
    )
    response = await ask(gemini(await serve(twin), G25), ModelRequest([message]), stream)
    assert response.text == "a green pixel, a PDF and silence"
    assert [r.status for r in twin.received] == [200]
    assert twin.received[0].body["contents"][0]["parts"][1] == inline("image/png", PNG)


@MODES
async def test_a_url_image_is_accepted(serve: Serve, stream: bool) -> None:
    twin = GeminiTwin(Reply([text("a chart")]))
    message = Message("user", (TextPart("what is it"), ImagePart(url="https://e.com/c.jpg")))
    response = await ask(gemini(await serve(twin)), ModelRequest([message]), stream)
    assert response.text == "a chart" and twin.received[0].status == 200


@MODES
async def test_a_refused_part_costs_no_request(serve: Serve, stream: bool) -> None:
    twin = GeminiTwin(Reply([text("never")]))
    url = await serve(twin)
    message = Message("user", (TextPart("listen"), AudioPart(WAV)))
    with pytest.raises(ConfigurationError, match=r"gemini-2\.0-flash cannot take"):
        await ask(gemini(url, OLD), ModelRequest([message]), stream)
    agent = Agent(gemini(url, OLD), config=RunConfig(stream=stream), clock=FakeClock())
    with pytest.raises(ConfigurationError, match=r"gemini-2\.0-flash cannot take"):
        await agent.run(["listen", AudioPart(WAV)])
    assert twin.received == []


@MODES
@pytest.mark.parametrize("model", [G3, G25])
async def test_a_transcript_holding_a_tools_image_goes_through_the_loop(
    serve: Serve, stream: bool, model: str
) -> None:
    twin = GeminiTwin(Reply([text("a green pixel")]))
    history = tool_turn(shot_result(ImagePart(PNG)))
    history[1] = Message(
        "assistant",
        (ThinkingPart("", signature="skip_thought_signature_validator", provider="gemini"),
         *history[1].parts),
    )  # fmt: skip
    agent = Agent(gemini(await serve(twin), model), config=RunConfig(stream=stream),
                  history=history, clock=FakeClock())  # fmt: skip
    assert (await agent.run("what did the screenshot show?")).output == "a green pixel"
    assert twin.received[0].status == 200
    contents = twin.received[0].body["contents"]
    nested = contents[2]["parts"][0]["functionResponse"].get("parts")
    if model == G3:
        assert nested == [inline("image/png", PNG)] and len(contents) == 3
    else:
        assert nested is None and contents[3]["parts"][1] == inline("image/png", PNG)


@tool
def screenshot() -> ImagePart:
    """Take a screenshot."""
    return ImagePart(PNG)


@MODES
@pytest.mark.parametrize("model", [G3, G25])
async def test_a_tool_returning_an_image_reaches_the_model(
    serve: Serve, stream: bool, model: str
) -> None:
    twin = GeminiTwin(Reply([call("screenshot", {})]), Reply([text("a green pixel")]))
    agent = Agent(gemini(await serve(twin), model), tools=[screenshot],
                  config=RunConfig(stream=stream), clock=FakeClock())  # fmt: skip
    run = await agent.run("what is on the screen?")
    assert run.output == "a green pixel"
    assert [r.status for r in twin.received] == [200, 200]
    contents = twin.received[1].body["contents"]
    response = contents[2]["parts"][0]["functionResponse"]
    assert response["name"] == "screenshot" and contents[1]["role"] == "model"
    if model == G3:  # inside the function response, nothing after it
        assert response["parts"] == [inline("image/png", PNG)] and len(contents) == 3
    else:  # a user turn of its own right after the responses
        assert "parts" not in response
        assert contents[3]["parts"] == [
            {"text": "[media returned by tool 'screenshot']"},
            inline("image/png", PNG),
        ]


# --- the twin refuses malformed media as Gemini does ----------------------------------------------


def _call_turn() -> list[dict[str, Any]]:
    return [
        {"role": "user", "parts": [{"text": "look"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "shot", "args": {}},
                                     "thoughtSignature": "skip_thought_signature_validator"}]},
    ]  # fmt: skip


def _response(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    frame = {"name": "shot", "response": {"result": ""}, "parts": list(parts)}
    return [*_call_turn(), {"role": "user", "parts": [{"functionResponse": frame}]}]


def _user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"text": "look"}, *parts]}]


BAD = [
    (G25, _user({"inlineData": {"mimeType": "image/png", "data": "not base64!"}}),
     "Invalid value at 'contents[0].parts[1].inline_data.data' (TYPE_BYTES), "
     'Base64 decoding failed for "not base64!"'),
    (G25, _user(inline("image/gif", GIF)), "Unsupported MIME type: image/gif"),
    (G25, _user({"inlineData": {"data": b64(PNG)}}), "empty mimeType parameter in inlineData"),
    (G25, _user({"inlineData": {"mimeType": "image/png"}}), "empty data parameter in inlineData"),
    (G25, _user({"fileData": {"mimeType": "image/png"}}), "empty fileUri parameter in fileData"),
    (G25, _user({"fileData": {"fileUri": "https://e.com/x"}}),
     "empty mimeType parameter in fileData"),
    (G25, _user({"fileData": {"fileUri": "https://e.com/x", "mimeType": "video/x-flv"}}),
     "Unsupported MIME type: video/x-flv"),
    (G25, _user({"text": "both", **inline("image/png", PNG)}),
     "Invalid value at 'contents[0].parts[1]' (oneof), oneof field 'data' is already set. "
     "Cannot set 'inlineData'"),
    (G25, _response(inline("image/png", PNG)), PARTS_UNSUPPORTED),
    (G3, _response({"fileData": {"fileUri": "https://e.com/a.png", "mimeType": "image/png"}}),
     "Invalid JSON payload received. Unknown name \"fileData\" at "
     "'contents[2].parts[0].function_response.parts[0]': Cannot find field."),
    (G3, _response(inline("audio/wav", WAV)), "Unsupported MIME type: audio/wav"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "contents", "message"), BAD)
async def test_the_twin_refuses_malformed_media_with_geminis_text(
    serve: Serve, model: str, contents: list[dict[str, Any]], message: str
) -> None:
    twin = GeminiTwin(Reply([text("never")]))
    url = f"{await serve(twin)}/models/{model}:generateContent"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json={"contents": contents}, headers={"x-goog-api-key": KEY}) as reply,
    ):
        body = await reply.json()
    assert reply.status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert message in body["error"]["message"]


@pytest.mark.parametrize(
    ("model", "contents"),
    [
        (G25, _user(inline("image/webp", b"RIFF0000WEBP"), inline("text/plain", b"hi"))),
        (G25, _user({"fileData": {"fileUri": "https://generativelanguage.googleapis.com/v1beta/files/x"}})),
        (G3, _response(inline("image/jpeg", b"\xff\xd8\xff"), inline("application/pdf", PDF))),
    ],
    ids=["inline", "files-api-uri", "gemini-3-function-response"],
)  # fmt: skip
async def test_the_twin_accepts_the_right_shapes(
    serve: Serve, model: str, contents: list[dict[str, Any]]
) -> None:
    twin = GeminiTwin(Reply([text("fine")]))
    assert twin.violation(model, {"contents": contents}) is None


async def test_geminis_400_for_a_malformed_block_is_a_bad_request_error(serve: Serve) -> None:
    twin = GeminiTwin(Reply([text("never")]))
    bad = {"contents": _user(inline("image/gif", GIF))}
    request = ModelRequest([Message.user("x")], settings=ModelSettings(extra_body=bad))
    with pytest.raises(BadRequestError, match="Unsupported MIME type: image/gif"):
        await ask(gemini(await serve(twin), G25), request, False)
    assert [r.status for r in twin.received] == [400]
