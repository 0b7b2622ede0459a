"""GeminiClient on current models (SPEC 16) through the Gemini twin (tests/providers/twins).

Reasoning on the message (thoughtSignature and thought parts, JSON and SSE, across a new
client, a store round trip, ``Agent.resume`` and a fallback), thinkingConfig beside the rest of
generationConfig, refused settings before any request, refusals, finish reasons and usage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from agentloop import Agent, tool
from agentloop.config import RunConfig
from agentloop.errors import (
    BadRequestError,
    ConfigurationError,
    ModelRefused,
    ResponseInvalid,
)
from agentloop.events import ThinkingDelta
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.model import ModelRequest, ModelSettings, OutputSpec, StreamEvent
from agentloop.providers.anthropic import AnthropicClient
from agentloop.providers.fallback import FallbackClient
from agentloop.providers.gemini import (
    BYPASS_SIGNATURE,
    GeminiClient,
    GeminiStreamState,
    build_payload,
    encode_contents,
    parse_response,
)
from agentloop.store import SQLiteStore
from agentloop.testing import FakeClock

from .conftest import serve_app
from .twins.gemini import (
    CORRUPTED_SIGNATURE,
    GeminiTwin,
    Reply,
    call,
    text,
    thought,
)

KEY = "twin-key"
G3 = "gemini-3-pro-preview"
G25 = "gemini-2.5-flash"
HI = ModelRequest(messages=[Message.user("hi")])
MODES = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


Serve = Callable[..., Any]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``await serve(twin)`` -> the twin's base URL; servers and clients close at the end."""
    async with AsyncExitStack() as stack:

        async def start(twin: GeminiTwin) -> str:
            url = await stack.enter_async_context(serve_app(twin.app()))
            return f"{url}/v1beta"

        yield start


def gemini(base_url: str, model: str = G3) -> GeminiClient:
    return GeminiClient(model, api_key=KEY, base_url=base_url)


async def ask(client: GeminiClient, request: ModelRequest, stream: bool) -> Any:
    """The response, and the events of a stream (empty for JSON)."""
    if not stream:
        return await client.complete(request), []
    events = [e async for e in client.stream(request)]
    assert events[-1].kind == "done" and events[-1].response is not None
    return events[-1].response, events[:-1]


def sig(part: Any) -> ThinkingPart:
    return ThinkingPart("", signature=part, provider="gemini")


# --- decoding: the signature lives on the message ---------------------------------------------


def test_a_signed_call_is_a_signature_part_right_before_the_call() -> None:
    body = {
        "candidates": [{
            "content": {"parts": [
                {"text": "Reading."},
                {"functionCall": {"name": "read", "args": {"p": 1}}, "thoughtSignature": "S1"},
                {"functionCall": {"name": "read", "args": {"p": 2}}},
            ]},
            "finishReason": "STOP",
        }],
        "responseId": "r",
    }  # fmt: skip
    response = parse_response(body)
    assert response.message.parts == (
        TextPart("Reading."),
        sig("S1"),
        ToolCallPart("gemini_r_0", "read", {"p": 1}),
        ToolCallPart("gemini_r_1", "read", {"p": 2}),
    )
    assert response.stop_reason == "tool_use" and response.text == "Reading."


def test_thoughts_and_text_signatures_decode_in_place() -> None:
    body = {
        "candidates": [{
            "content": {"parts": [
                {"text": "Let me ", "thought": True},
                {"text": "think.", "thought": True, "thoughtSignature": "T1"},
                {"text": "Answer", "thoughtSignature": "S1"},
                {"text": "", "thoughtSignature": "S2"},
            ]},
            "finishReason": "STOP",
        }],
    }  # fmt: skip
    parts = parse_response(body).message.parts
    assert parts == (
        ThinkingPart("Let me think.", signature="T1", provider="gemini"),
        sig("S1"),
        TextPart("Answer"),
        sig("S2"),
    )
    assert encode_contents([Message("assistant", parts)])[0]["parts"] == [
        {"text": "Let me think.", "thought": True, "thoughtSignature": "T1"},
        {"text": "Answer", "thoughtSignature": "S1"},
        {"text": "", "thoughtSignature": "S2"},
    ]


def test_a_signature_mid_stream_starts_a_new_text_part_where_gemini_put_it() -> None:
    state = GeminiStreamState()
    for piece in ({"text": "Hel"}, {"text": "lo", "thoughtSignature": "S"}, {"text": "!"}):
        state.feed_chunk({"candidates": [{"content": {"parts": [piece]}}]})
    state.feed_chunk({"candidates": [{"finishReason": "STOP"}]})
    response = state.response()
    assert response.message.parts == (TextPart("Hel"), sig("S"), TextPart("lo!"))
    assert response.text == "Hello!"
    assert encode_contents([response.message])[0]["parts"] == [
        {"text": "Hel"},
        {"text": "lo!", "thoughtSignature": "S"},
    ]


@pytest.mark.parametrize(
    ("part", "field"),
    [
        ({"inlineData": {"mimeType": "image/png", "data": "AA=="}}, "inlineData"),
        (
            {"functionCallDraft": {"code": "print(1)"}},
            "functionCallDraft",
        ),  # executableCode: kept (SPEC 24)
        ({"text": "x", "thought": "yes"}, "thought"),
        ({"text": "x", "thoughtSignature": 7}, "thoughtSignature"),
    ],
)
def test_a_part_agentloop_cannot_keep_is_invalid_never_dropped(
    part: dict[str, Any], field: str
) -> None:
    body = {"candidates": [{"content": {"parts": [part]}, "finishReason": "STOP"}]}
    with pytest.raises(ResponseInvalid) as info:
        parse_response(body)
    assert field in str(info.value)


def test_an_empty_part_carries_nothing_and_is_skipped() -> None:
    body = {"candidates": [{"content": {"parts": [{}, {"text": "ok"}]}, "finishReason": "STOP"}]}
    assert parse_response(body).message.parts == (TextPart("ok"),)


# --- encoding: Gemini's parts go back in place, nobody else's ---------------------------------


def test_signature_parts_go_back_on_the_part_after_them_and_foreign_reasoning_is_dropped() -> None:
    message = Message(
        "assistant",
        (
            ThinkingPart("claude thinks", signature="A", provider="anthropic"),
            ThinkingPart("summary", signature="O", provider="openai", id="rs_1"),
            ThinkingPart("unattributed"),
            sig("S1"),
            ToolCallPart("g1", "read", {}),
            ToolCallPart("g2", "read", {}),
            sig("S2"),
            sig("S3"),
        ),
    )
    assert encode_contents([message])[0]["parts"] == [
        {"functionCall": {"name": "read", "args": {}, "id": "g1"}, "thoughtSignature": "S1"},
        {"functionCall": {"name": "read", "args": {}, "id": "g2"}},
        {"text": "", "thoughtSignature": "S2"},
        {"text": "", "thoughtSignature": "S3"},
    ]


def test_a_model_turn_gemini_never_signed_gets_the_bypass_on_gemini_3_only() -> None:
    foreign = Message(
        "assistant",
        (ThinkingPart("hm", signature="A", provider="anthropic"), ToolCallPart("t1", "read", {})),
    )
    result = Message.tool_results([ToolResultPart("t1", "read", "x")])
    request = ModelRequest(messages=[Message.user("go"), foreign, result])
    on_3 = build_payload(request, G3)["contents"][1]["parts"]
    wire_call = {"functionCall": {"name": "read", "args": {}, "id": "t1"}}
    assert on_3 == [{**wire_call, "thoughtSignature": BYPASS_SIGNATURE}]
    on_25 = build_payload(request, G25)["contents"][1]["parts"]
    assert on_25 == [wire_call]
    signed = Message("assistant", (sig("S"), ToolCallPart("t1", "read", {})))
    again = build_payload(ModelRequest(messages=[Message.user("go"), signed, result]), G3)
    assert again["contents"][1]["parts"][0]["thoughtSignature"] == "S"


# --- settings: thinkingConfig inside generationConfig, refused ones never sent ----------------


@MODES
async def test_effort_becomes_thinking_level_beside_the_rest_of_generation_config(
    serve: Serve, stream: bool
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    kept = {"maxOutputTokens": 64, "temperature": 0.5, "responseJsonSchema": schema}
    twin = GeminiTwin(Reply([thought("Weighing."), text('{"n": 1}')]), require_config=kept)
    settings = ModelSettings(max_tokens=64, temperature=0.5, reasoning_effort="low")
    request = ModelRequest(
        messages=[Message.user("n?")], settings=settings, output=OutputSpec("n", schema)
    )
    response, events = await ask(gemini(await serve(twin)), request, stream)
    config = twin.accepted[0].body["generationConfig"]
    assert config["thinkingConfig"] == {"thinkingLevel": "LOW", "includeThoughts": True}
    assert config["responseMimeType"] == "application/json"
    assert response.text == '{"n": 1}'
    assert response.message.thinking[0].text == "Weighing."
    if stream:
        thinking = "".join(e.text for e in events if e.kind == "thinking_delta")
        assert thinking == "Weighing." and "text_delta" in {e.kind for e in events}


@pytest.mark.parametrize(
    ("budget", "thinking"),
    [(2048, {"thinkingBudget": 2048, "includeThoughts": True}), (0, {"thinkingBudget": 0})],
)
async def test_a_budget_becomes_thinking_budget_on_gemini_2_5(
    serve: Serve, budget: int, thinking: dict[str, Any]
) -> None:
    twin = GeminiTwin(Reply([text("ok")]), require_config={"maxOutputTokens": 100})
    settings = ModelSettings(max_tokens=100, thinking_budget=budget)
    await gemini(await serve(twin), G25).complete(
        ModelRequest([Message.user("q")], settings=settings)
    )
    assert twin.accepted[0].body["generationConfig"]["thinkingConfig"] == thinking


async def test_extra_body_merges_into_generation_config_instead_of_replacing_it(
    serve: Serve,
) -> None:
    twin = GeminiTwin(Reply([text("ok")]), require_config={"maxOutputTokens": 9, "seed": 3})
    extra = {"generationConfig": {"thinkingConfig": {"thinkingLevel": "HIGH"}}}
    settings = ModelSettings(max_tokens=9, seed=3, extra_body=extra)
    await gemini(await serve(twin)).complete(ModelRequest([Message.user("q")], settings=settings))
    assert twin.accepted[0].body["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "HIGH"}


@pytest.mark.parametrize(
    ("model", "settings", "setting"),
    [
        (G3, ModelSettings(thinking_budget=1024), "thinking_budget"),
        (G3, ModelSettings(reasoning_effort="none"), "reasoning_effort"),
        (G25, ModelSettings(reasoning_effort="high"), "reasoning_effort"),
        ("gemini-2.0-flash", ModelSettings(thinking_budget=10), "thinking_budget"),
        ("gemini-3-pro-preview", ModelSettings(reasoning_effort="minimal"), "reasoning_effort"),
        ("gemini-3-pro-preview", ModelSettings(reasoning_effort="medium"), "reasoning_effort"),
        ("gemini-3.1-pro-preview", ModelSettings(reasoning_effort="minimal"), "reasoning_effort"),
    ],
)
@MODES
async def test_a_refused_setting_is_a_configuration_error_and_nothing_is_sent(
    serve: Serve, model: str, settings: ModelSettings, setting: str, stream: bool
) -> None:
    twin = GeminiTwin(Reply([text("never")]))
    client = gemini(await serve(twin), model)
    with pytest.raises(ConfigurationError) as info:
        await ask(client, ModelRequest([Message.user("q")], settings=settings), stream)
    assert info.value.field == setting and model in str(info.value)
    assert twin.received == []


@pytest.mark.parametrize(
    ("model", "effort"),
    [("gemini-3-flash-preview", "minimal"), ("gemini-3.1-pro-preview", "medium"),
     ("gemini-3-pro-preview", "high")],
)  # fmt: skip
async def test_each_gemini_3_model_gets_the_levels_it_takes(
    serve: Serve, model: str, effort: Any
) -> None:
    twin = GeminiTwin(Reply([text("ok")]))
    settings = ModelSettings(reasoning_effort=effort)
    await gemini(await serve(twin), model).complete(
        ModelRequest([Message.user("q")], settings=settings)
    )
    assert (
        twin.accepted[0].body["generationConfig"]["thinkingConfig"]["thinkingLevel"]
        == effort.upper()
    )


@pytest.mark.parametrize(
    ("model", "extra", "said"),
    [
        (G3, {"thinkingConfig": {"thinkingLevel": "LOW"}}, 'Unknown name "thinkingConfig"'),
        (G25, {"generationConfig": {"thinkingConfig": {"thinkingLevel": "LOW"}}},
         "Thinking level is not supported for this model."),
        (G3, {"generationConfig": {"thinkingConfig": {"thinkingLevel": "MINIMAL"}}},
         "Thinking level is not supported for this model."),
        (G3, {"generationConfig": {"thinkingConfig": {"thinkingLevel": "LOW",
                                                      "thinkingBudget": 5}}},
         "You can only set only one of thinking budget and thinking level."),
        ("gemini-2.5-pro", {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
         "The thinking budget (0) is invalid."),
    ],
)  # fmt: skip
async def test_the_twin_answers_a_misplaced_thinking_config_as_gemini_does(
    serve: Serve, model: str, extra: dict[str, Any], said: str
) -> None:
    twin = GeminiTwin(Reply([text("never")]))
    client = gemini(await serve(twin), model)
    request = ModelRequest([Message.user("q")], settings=ModelSettings(extra_body=extra))
    with pytest.raises(BadRequestError) as info:
        await client.complete(request)
    assert said in str(info.value) and info.value.status_code == 400


# --- refusals, cuts and the other finish reasons ----------------------------------------------


REFUSED = ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"]


@pytest.mark.parametrize("reason", REFUSED)
@MODES
async def test_a_safety_finish_raises_model_refused_with_the_text_so_far(
    serve: Serve, reason: str, stream: bool
) -> None:
    twin = GeminiTwin(Reply([thought("Hm."), text("Here is how")], finish=reason))
    client = gemini(await serve(twin))
    seen: list[StreamEvent] = []
    with pytest.raises(ModelRefused) as info:
        if stream:
            async for event in client.stream(HI):
                seen.append(event)
        else:
            await client.complete(HI)
    assert (info.value.reason, info.value.text) == (reason, "Here is how")
    if stream:  # the refusal arrives mid-stream, after the text it cut
        assert "".join(e.text for e in seen if e.kind == "text_delta") == "Here is how"
        assert "done" not in {e.kind for e in seen}


@MODES
async def test_a_blocked_prompt_raises_model_refused_with_no_text(
    serve: Serve, stream: bool
) -> None:
    twin = GeminiTwin(Reply(block="PROHIBITED_CONTENT"))
    with pytest.raises(ModelRefused) as info:
        await ask(gemini(await serve(twin)), HI, stream)
    assert (info.value.reason, info.value.text) == ("PROHIBITED_CONTENT", "")


@pytest.mark.parametrize(
    ("finish", "error"),
    [
        ("MALFORMED_FUNCTION_CALL", ResponseInvalid),
        ("UNEXPECTED_TOOL_CALL", ResponseInvalid),
        ("TOO_MANY_TOOL_CALLS", ResponseInvalid),
        ("OTHER", ResponseInvalid),
        ("SOMETHING_NEW", ResponseInvalid),
        ("MISSING_THOUGHT_SIGNATURE", BadRequestError),
    ],
)
@MODES
async def test_finishes_that_are_not_replies_are_typed_errors(
    serve: Serve, finish: str, error: type[Exception], stream: bool
) -> None:
    twin = GeminiTwin(Reply([text("partial")], finish=finish, finish_message="details here"))
    with pytest.raises(error) as info:
        await ask(gemini(await serve(twin)), HI, stream)
    assert type(info.value) is error
    assert finish in str(info.value) and "details here" in str(info.value)


@MODES
async def test_max_tokens_is_a_truncation_and_the_run_says_so(serve: Serve, stream: bool) -> None:
    twin = GeminiTwin(Reply([text("The answer is")], finish="MAX_TOKENS"))
    agent = Agent(gemini(await serve(twin)), config=RunConfig(stream=stream), clock=FakeClock())
    run = await agent.run("q")
    assert run.truncated and run.output == "The answer is"
    assert run.turns[-1].stop_reason == "max_tokens"


async def test_a_call_in_a_cut_reply_is_whole_and_runs(serve: Serve) -> None:
    """Gemini sends arguments as parsed objects: no cut JSON to keep, the call runs."""
    twin = GeminiTwin(
        Reply([text("Reading."), call("read_file", {"path": "a"})], finish="MAX_TOKENS"),
        Reply([text("done")]),
    )
    agent = Agent(gemini(await serve(twin)), tools=[read_file], clock=FakeClock())
    run = await agent.run("read a")
    assert run.turns[0].stop_reason == "max_tokens" and not run.truncated
    assert run.turns[0].tool_results[0].content == "contents of a"


@MODES
async def test_a_refusal_after_a_tool_turn_ends_the_run_and_keeps_the_turn(
    serve: Serve, stream: bool
) -> None:
    twin = GeminiTwin(Reply([call("read_file", {"path": "a"})]), Reply([], finish="SAFETY"))
    agent = Agent(gemini(await serve(twin)), tools=[read_file], config=RunConfig(stream=stream),
                  clock=FakeClock())  # fmt: skip
    with pytest.raises(ModelRefused) as info:
        await agent.run("read a")
    assert (info.value.reason, info.value.text) == ("SAFETY", "")
    assert [m.role for m in agent.history] == ["user", "assistant", "tool"]


async def test_agent_stream_shows_gemini_thoughts_as_thinking_deltas(serve: Serve) -> None:
    twin = GeminiTwin(Reply([thought("Think first."), text("Done.")]))
    settings = ModelSettings(reasoning_effort="high")
    agent = Agent(gemini(await serve(twin)), config=RunConfig(model_settings=settings),
                  clock=FakeClock())  # fmt: skip
    async with agent.stream("q") as events:
        seen = [e async for e in events]
    assert "".join(e.text for e in seen if isinstance(e, ThinkingDelta)) == "Think first."
    assert events.run.output == "Done."
    assert agent.history[-1].thinking[0].text == "Think first."


RECORDED_SSE = (  # the shape Gemini 3 streams: text chunks, then a signature on an empty part
    'data: {"candidates": [{"content": {"parts": [{"text": "1+1"}],"role": "model"},'
    '"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 2,'
    '"totalTokenCount": 40,"thoughtsTokenCount": 30},"modelVersion": "gemini-3-flash-preview",'
    '"responseId": "abc"}\r\n\r\n'
    'data: {"candidates": [{"content": {"parts": [{"text": " is 2."}],"role": "model"},'
    '"index": 0}],"modelVersion": "gemini-3-flash-preview","responseId": "abc"}\r\n\r\n'
    'data: {"candidates": [{"content": {"parts": [{"text": "","thoughtSignature": "EjQK"}],'
    '"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {'
    '"promptTokenCount": 8,"candidatesTokenCount": 5,"totalTokenCount": 43,'
    '"thoughtsTokenCount": 30},"modelVersion": "gemini-3-flash-preview","responseId": "abc"}'
    "\r\n\r\n"
)


async def test_the_twin_replays_raw_stream_bytes(serve: Serve) -> None:
    twin = GeminiTwin(Reply(raw=RECORDED_SSE))
    response, events = await ask(gemini(await serve(twin)), HI, stream=True)
    assert response.message.parts == (TextPart("1+1 is 2."), sig("EjQK"))
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (35, 30)
    assert [e.kind for e in events] == ["text_delta", "text_delta"]


# --- usage ------------------------------------------------------------------------------------


@MODES
async def test_thoughts_are_output_and_reasoning_tokens_cached_content_is_cache_reads(
    serve: Serve, stream: bool
) -> None:
    usage = {"promptTokenCount": 100, "cachedContentTokenCount": 60, "candidatesTokenCount": 7,
             "thoughtsTokenCount": 30}  # fmt: skip
    twin = GeminiTwin(Reply([text("ok")], usage=usage))
    response, _ = await ask(gemini(await serve(twin)), HI, stream)
    assert response.usage.input_tokens == 100 and response.usage.cache_read_tokens == 60
    assert response.usage.output_tokens == 37 and response.usage.reasoning_tokens == 30


# --- the agent loop through the twin: the case that broke -------------------------------------


def tool_script() -> list[Reply]:
    """Two runs, each a signed call then a signed answer (with a thought on the first)."""
    return [
        Reply([thought("I should read a.", signed=True), call("read_file", {"path": "a"})]),
        Reply([text("a says hello")]),
        Reply([call("read_file", {"path": "b"}), call("read_file", {"path": "c"})]),
        Reply([text("b and c read")]),
    ]


def signatures_sent(twin: GeminiTwin) -> list[str]:
    """Every thoughtSignature in the last request's contents, in order."""
    contents = twin.received[-1].body["contents"]
    return [p["thoughtSignature"] for c in contents for p in c["parts"] if "thoughtSignature" in p]


@MODES
async def test_two_runs_with_tools_send_every_signature_back(serve: Serve, stream: bool) -> None:
    twin = GeminiTwin(*tool_script())
    agent = Agent(gemini(await serve(twin)), tools=[read_file], config=RunConfig(stream=stream),
                  clock=FakeClock())  # fmt: skip
    assert (await agent.run("read a")).output == "a says hello"
    assert (await agent.run("now b and c")).output == "b and c read"
    assert [r.status for r in twin.received] == [200] * 4
    assert signatures_sent(twin) == list(twin.issued)[:-1]  # all but the last answer's
    replay = twin.received[1].body["contents"][1]["parts"]
    assert replay[0] == {
        "text": "I should read a.",
        "thought": True,
        "thoughtSignature": "twin-sig-1",
    }


@MODES
async def test_a_new_client_and_a_store_round_trip_continue_the_conversation(
    serve: Serve, stream: bool
) -> None:
    twin = GeminiTwin(*tool_script())
    url = await serve(twin)
    config = RunConfig(stream=stream)
    first = Agent(gemini(url), tools=[read_file], config=config, clock=FakeClock())
    await first.run("read a")
    stored = [Message.from_dict(m.to_dict()) for m in first.history]
    second = Agent(gemini(url), tools=[read_file], config=config, history=stored, clock=FakeClock())
    assert (await second.run("now b and c")).output == "b and c read"
    assert [r.status for r in twin.received] == [200] * 4
    assert "twin-sig-1" in signatures_sent(twin) and "twin-sig-2" in signatures_sent(twin)


@MODES
async def test_agent_resume_over_sqlite_with_a_new_client(
    serve: Serve, stream: bool, tmp_path: Path
) -> None:
    twin = GeminiTwin(*tool_script())
    url = await serve(twin)
    config = RunConfig(stream=stream)
    store = SQLiteStore(tmp_path / "runs.db")
    first = Agent(gemini(url), tools=[read_file], config=config, store=store, session_id="s",
                  clock=FakeClock())  # fmt: skip
    await first.run("read a")
    store.close()
    again = SQLiteStore(tmp_path / "runs.db")
    try:
        resumed = Agent.resume("s", store=again, client=gemini(url), tools=[read_file],
                               config=config)  # fmt: skip
        assert (await resumed.run("now b and c")).output == "b and c read"
    finally:
        again.close()
    assert [r.status for r in twin.received] == [200] * 4
    assert resumed.history[1].thinking[0].signature == "twin-sig-1"


async def test_the_twin_refuses_a_call_sent_back_without_its_signature(serve: Serve) -> None:
    """What a client that kept signatures in its own memory sent after a restart: a 400."""
    twin = GeminiTwin(Reply([call("read_file", {"path": "a"})]), Reply([text("never")]))
    url = await serve(twin)
    response = await gemini(url).complete(HI)
    body = build_payload(ModelRequest([*HI.messages, response.message]), G3)
    del body["contents"][1]["parts"][0]["thoughtSignature"]  # the signature the old client lost
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/models/{G3}:generateContent", json=body,
                                headers={"x-goog-api-key": KEY}) as reply:  # fmt: skip
            status, error = reply.status, (await reply.json())["error"]
    assert status == 400 and error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
    assert error["message"].startswith(
        "Function call is missing a thought_signature in functionCall parts."
    )
    assert "default_api:read_file" in error["message"]


@MODES
async def test_a_history_that_lost_gemini_signatures_goes_with_the_bypass(
    serve: Serve, stream: bool
) -> None:
    """A transcript stripped of its signatures (written by hand, or by another tool) still
    works on Gemini 3: each unsigned model turn's first call carries the bypass value."""
    twin = GeminiTwin(*tool_script())
    url = await serve(twin)
    agent = Agent(gemini(url), tools=[read_file], clock=FakeClock())
    await agent.run("read a")
    stripped = [
        Message(m.role, tuple(p for p in m.parts if not isinstance(p, ThinkingPart)))
        for m in agent.history
    ]
    later = Agent(gemini(url), tools=[read_file], history=stripped, config=RunConfig(stream=stream),
                  clock=FakeClock())  # fmt: skip
    assert (await later.run("now b and c")).output == "b and c read"
    assert BYPASS_SIGNATURE in signatures_sent(twin)


async def test_a_signature_gemini_never_issued_is_corrupted(serve: Serve) -> None:
    twin = GeminiTwin(Reply([text("never")]))
    forged = Message("assistant", (sig("forged"), ToolCallPart("g", "read_file", {})))
    result = Message.tool_results([ToolResultPart("g", "read_file", "x")])
    request = ModelRequest([Message.user("q"), forged, result])
    with pytest.raises(BadRequestError) as info:
        await gemini(await serve(twin)).complete(request)
    assert CORRUPTED_SIGNATURE in str(info.value)


def anthropic_down(seen: list[Any]) -> web.Application:
    """An Anthropic endpoint that is overloaded (503 with Anthropic's error body)."""

    async def handle(request: web.Request) -> web.Response:
        seen.append(await request.json())
        body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return web.json_response(body, status=503)

    app = web.Application()
    app.router.add_post("/v1/messages", handle)
    return app


@MODES
async def test_a_fallback_from_another_provider_sends_gemini_only_its_own_reasoning(
    serve: Serve, stream: bool
) -> None:
    """Claude wrote the first turn (thinking + a call); then it is down and Gemini takes over."""
    claude_saw: list[Any] = []
    twin = GeminiTwin(*tool_script()[2:])
    async with AsyncExitStack() as stack:
        down = await stack.enter_async_context(serve_app(anthropic_down(claude_saw)))
        claude = AnthropicClient("claude-sonnet-4-5", api_key="sk-ant-test", base_url=down)
        client = FallbackClient([claude, gemini(await serve(twin))], clock=FakeClock().monotonic)
        history = [
            Message.user("read a"),
            Message("assistant", (
                ThinkingPart("Claude thinks", signature="claude-sig", provider="anthropic"),
                ToolCallPart("toolu_1", "read_file", {"path": "a"}),
            )),
            Message.tool_results([ToolResultPart("toolu_1", "read_file", "contents of a")]),
            Message.assistant("a says hello"),
        ]  # fmt: skip
        agent = Agent(client, tools=[read_file], history=history, config=RunConfig(stream=stream),
                      clock=FakeClock())  # fmt: skip
        assert (await agent.run("now b and c")).output == "b and c read"
        await claude.aclose()
    assert len(claude_saw) == 2 and [r.status for r in twin.received] == [200, 200]
    sent = signatures_sent(twin)
    assert sent == [BYPASS_SIGNATURE, "twin-sig-1"] and "claude-sig" not in str(twin.received)
    assert "Claude thinks" not in str(twin.received)
