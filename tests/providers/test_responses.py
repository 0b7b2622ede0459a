"""OpenAIResponsesClient (SPEC 16): the request it sends, the replies it reads, and whole agent
loops through the Responses twin (``twins/openai_responses.py``), which enforces the API's rules
with OpenAI's own error texts: JSON and SSE, two turns, a resume from a store with a new client,
refusals, cuts, failures, retries and a fallback.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, FallbackClient, ModelSettings, RetryingClient, RunConfig, tool
from agentloop.errors import (
    BadRequestError,
    ConfigurationError,
    ModelNotFound,
    ModelRefused,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    ResponseInvalid,
    TranscriptError,
)
from agentloop.events import Event, ThinkingDelta
from agentloop.messages import (
    Message,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.model import (
    INVALID_JSON_KEY,
    ModelRequest,
    ModelResponse,
    OutputSpec,
    StreamEvent,
    ToolSpec,
)
from agentloop.observers import Observer
from agentloop.providers import (
    OllamaClient,
    OpenAIClient,
    OpenAIResponsesClient,
    Settings,
    build_client,
)
from agentloop.providers.responses import ResponsesStream, encode_request, parse_response
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply

from .conftest import serve_app
from .twins.openai_responses import NO_ENCRYPTION, Reply, ResponsesTwin, encrypt

KEY = "twin-key"
CLOSED = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
          "additionalProperties": False}  # fmt: skip
LOOSE = {"type": "object", "properties": {"q": {"type": "string"}}}
FREE = {"type": "object", "additionalProperties": {"type": "string"}}  # strict mode cannot say it


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@pytest.fixture
async def twin() -> AsyncIterator[tuple[ResponsesTwin, str]]:
    state = ResponsesTwin()
    async with serve_app(state.app()) as url:
        yield state, url + "/v1"


def client_for(url: str, model: str = "gpt-5", **kwargs: Any) -> OpenAIResponsesClient:
    return OpenAIResponsesClient(model, api_key=KEY, base_url=url, **kwargs)


def request(*messages: Message, **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=messages or (Message.user("hi"),), **kwargs)


async def reply_of(client: OpenAIResponsesClient, req: ModelRequest, stream: bool) -> Any:
    if not stream:
        return await client.complete(req)
    events = [event async for event in client.stream(req)]
    assert events[-1].kind == "done" and all(e.kind != "done" for e in events[:-1])
    return events[-1].response


# --- the request ---------------------------------------------------------------------------


def test_the_request_carries_the_whole_transcript_in_order_and_keeps_no_state() -> None:
    thought = ThinkingPart("plan", signature="enc1", provider="openai", id="rs_1")
    transcript = (
        Message.system("be brief"),
        Message.user("go"),
        Message("assistant", (thought, TextPart("looking"), ToolCallPart("c1", "look", {"q": 1}))),
        Message.tool_results([ToolResultPart("c1", "look", "found 1")]),
    )
    tools = [ToolSpec("look", "Look.", CLOSED), ToolSpec("free", "Free.", FREE)]
    payload = encode_request(request(*transcript, tools=tools, system="sys"), "gpt-5")
    assert payload["store"] is False and payload["instructions"] == "sys\n\nbe brief"
    assert payload["input"] == [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc1",
         "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "message", "role": "assistant", "content": "looking"},
        {"type": "function_call", "call_id": "c1", "name": "look", "arguments": '{"q": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "found 1"},
    ]  # fmt: skip
    assert [t["strict"] for t in payload["tools"]] == [True, False]  # said either way
    assert payload["tools"][1]["parameters"] == FREE
    assert payload["tools"][0] == {"type": "function", "name": "look", "description": "Look.",
                                   "parameters": CLOSED, "strict": True}  # fmt: skip


def test_only_this_providers_signed_reasoning_goes_back() -> None:
    parts = (
        ThinkingPart("claude", signature="s", provider="anthropic"),
        ThinkingPart("", signature="g", provider="gemini"),
        ThinkingPart("unsigned", provider="openai", id="rs_x"),  # no encrypted_content: dropped
        ToolCallPart("c1", "look", {INVALID_JSON_KEY: '{"q": '}),
    )
    items = encode_request(request(Message("assistant", parts)), "gpt-5")["input"]
    assert items == [{"type": "function_call", "call_id": "c1", "name": "look",
                      "arguments": '{"q": '}]  # fmt: skip  # invalid JSON goes back verbatim
    broken = Message("assistant", (ThinkingPart("x", signature="s", provider="openai"),))
    with pytest.raises(TranscriptError, match="no id"):
        encode_request(request(broken), "gpt-5")
    for odd in (Message("user", (ToolResultPart("c", "n", "x"),)),
                Message("assistant", (ToolResultPart("c", "n", "x"),))):  # fmt: skip
        with pytest.raises(ConfigurationError, match="cannot send a ToolResultPart"):
            encode_request(request(odd), "gpt-5")  # never silently dropped


def test_settings_map_to_the_responses_form() -> None:
    extra = {"reasoning": {"summary": "detailed"}, "user": "u"}
    settings = ModelSettings(
        max_tokens=300, reasoning_effort="low", tool_choice="look", extra_body=extra
    )
    payload = encode_request(request(settings=settings), "gpt-5", include_reasoning=True)
    assert payload["max_output_tokens"] == 300 and payload["user"] == "u"
    assert payload["reasoning"] == {"effort": "low", "summary": "detailed"}  # merged, not replaced
    assert payload["tool_choice"] == {"type": "function", "name": "look"}
    assert payload["include"] == ["reasoning.encrypted_content"]
    plain = encode_request(request(settings=ModelSettings(temperature=0.2, top_p=0.5)), "gpt-4.1")
    assert (plain["temperature"], plain["top_p"]) == (0.2, 0.5) and "include" not in plain
    off = ModelSettings(reasoning_effort="none")
    assert encode_request(request(settings=off), "gpt-5.1")["reasoning"] == {"effort": "none"}
    quiet = encode_request(request(settings=settings), "gpt-5", reasoning_summary=None)
    assert quiet["reasoning"] == {"effort": "low", "summary": "detailed"}  # extra_body still wins
    output = OutputSpec("answer", CLOSED)
    text = encode_request(request(output=output), "gpt-5")["text"]
    assert text == {"format": {"type": "json_schema", "name": "answer", "schema": CLOSED,
                               "strict": True}}  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        (ModelSettings(seed=1), "seed"),
        (ModelSettings(stop=("x",)), "stop"),
        (ModelSettings(temperature=0.2), "temperature"),
        (ModelSettings(top_p=0.9), "top_p"),
        (ModelSettings(thinking_budget=1000), "thinking_budget"),
    ],
)
async def test_refused_settings_fail_before_anything_is_sent(
    twin: tuple[ResponsesTwin, str], settings: ModelSettings, field: str
) -> None:
    state, url = twin
    async with client_for(url) as client:
        for stream in (False, True):
            with pytest.raises(ConfigurationError) as info:
                await reply_of(client, request(settings=settings), stream)
            assert info.value.field == field
    assert state.received == []


def test_the_client_checks_its_own_options() -> None:
    with pytest.raises(ConfigurationError, match="reasoning_summary"):
        OpenAIResponsesClient("gpt-5", reasoning_summary="verbose")
    with pytest.raises(ConfigurationError, match="encrypted_reasoning"):
        OpenAIResponsesClient("gpt-5", encrypted_reasoning="yes")  # type: ignore[arg-type]
    assert "sk-secret" not in repr(OpenAIResponsesClient("gpt-5", api_key="sk-secret"))


# --- the reply -----------------------------------------------------------------------------


def body(*output: dict[str, Any], status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {"status": status, "model": "gpt-5", "output": list(output), **extra}


def parse(data: dict[str, Any]) -> ModelResponse:
    return parse_response(data, json.dumps(data), provider="openai", model="gpt-5")


def test_a_reply_decodes_reasoning_text_calls_and_usage() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "encrypted_content": "e",
                 "summary": [{"type": "summary_text", "text": "a"},
                             {"type": "summary_text", "text": "b"}]}  # fmt: skip
    message = {"type": "message", "content": [{"type": "output_text", "text": "hi"}]}
    call = {"type": "function_call", "call_id": "c1", "name": "look", "arguments": '{"q": "x"'}
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}  # kept (SPEC 24)
    usage = {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 10},
             "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 12}}  # fmt: skip
    response = parse(body(reasoning, search, message, call, usage=usage))
    assert response.message.parts == (
        ThinkingPart("a\n\nb", signature="e", provider="openai", id="rs_1"),
        ProviderToolCallPart("ws_1", "web_search", {}, provider="openai", raw=search),
        ProviderToolResultPart("ws_1", "web_search", {}, provider="openai"),
        TextPart("hi"),
        ToolCallPart("c1", "look", {INVALID_JSON_KEY: '{"q": "x"'}),
    )
    assert (response.usage.input_tokens, response.usage.cache_read_tokens) == (30, 10)
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (20, 12)
    assert response.stop_reason == "completed"
    raw = {"type": "reasoning", "id": "rs_2", "summary": [],
           "content": [{"type": "reasoning_text", "text": "raw"}]}  # fmt: skip
    assert parse(body(raw)).message.thinking == (ThinkingPart("raw", provider="openai", id="rs_2"),)


def test_refusals_and_cuts_are_never_answers() -> None:
    text = {"type": "output_text", "text": "Sure: "}
    refused = {"type": "message", "content": [text, {"type": "refusal", "refusal": "No."}]}
    with pytest.raises(ModelRefused) as info:
        parse(body(refused))
    assert (info.value.reason, info.value.text) == ("refusal", "No.")
    empty = {"type": "message", "content": [text, {"type": "refusal", "refusal": ""}]}
    with pytest.raises(ModelRefused) as info:  # a refusal without words is still a refusal
        parse(body(empty))
    assert info.value.text == "Sure: "
    said = {"type": "message", "content": [text]}
    filtered = body(said, status="incomplete", incomplete_details={"reason": "content_filter"})
    with pytest.raises(ModelRefused) as info:
        parse(filtered)
    assert (info.value.reason, info.value.text) == ("content_filter", "Sure: ")
    cut = body(said, status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    assert parse(cut).stop_reason == "max_output_tokens"
    marked = {"type": "function_call", "call_id": "c1", "name": "w", "arguments": '{"a": 1}',
              "status": "incomplete"}  # fmt: skip  # parses, but the API says it was cut
    empty = {"type": "function_call", "call_id": "c2", "name": "w", "arguments": ""}
    calls = parse({**cut, "output": [marked, empty]}).tool_calls
    assert [c.arguments for c in calls] == [{INVALID_JSON_KEY: '{"a": 1}'}, {INVALID_JSON_KEY: ""}]
    assert parse(body(empty)).tool_calls[0].arguments == {}  # not cut: no arguments


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (body(status="failed", error={"code": "server_error", "message": "boom"}),
         ProviderUnavailable),
        (body(status="failed", error={"code": "rate_limit_exceeded", "message": "slow"}),
         RateLimited),
        (body(status="failed", error={"code": "invalid_prompt", "message": "bad"}),
         BadRequestError),
        ({"error": {"message": "gone", "type": "invalid_request_error", "code": 404}},
         ModelNotFound),
        (body(status="cancelled"), ResponseInvalid),
        (body({"type": "function_call", "call_id": "c", "name": 3}), ResponseInvalid),
        (body({"type": "reasoning", "summary": []}), ResponseInvalid),  # no id
        ({"output": "nope"}, ResponseInvalid),
    ],
)  # fmt: skip
def test_failures_and_bad_shapes_are_typed_errors(
    data: dict[str, Any], expected: type[ProviderError]
) -> None:
    with pytest.raises(expected) as info:
        parse(data)
    assert type(info.value) is expected and info.value.request_sent is True


def feed(*events: dict[str, Any]) -> tuple[list[StreamEvent], ResponsesStream]:
    state = ResponsesStream(provider="openai", model="gpt-5")
    out = [delta for event in events for delta in state.feed(json.dumps(event))]
    return out, state


def test_a_stream_assembles_its_items_when_the_terminal_event_brings_none() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "look", "arguments": ""}
    reasoning: dict[str, Any] = {"type": "reasoning", "id": "rs_1", "summary": []}
    out, state = feed(
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "th"},
        {"type": "response.output_text.delta", "output_index": 1, "delta": "hi"},
        {"type": "response.output_item.added", "output_index": 2, "item": call},
        {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": '{"q":'},
        {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": '"x"}'},
        {"type": "response.some_new_event", "output_index": 2},  # unknown events are skipped
        {"type": "response.completed", "response": {"status": "completed", "output": []}},
    )
    assert [e.kind for e in out] == ["thinking_delta", "text_delta"] + ["tool_call_delta"] * 3
    assert {e.index for e in out if e.kind == "tool_call_delta"} == {0}
    assert state.response().message.parts == (
        ThinkingPart("th", provider="openai", id="rs_1"),
        TextPart("hi"),
        ToolCallPart("c1", "look", {"q": "x"}),
    )


def test_an_event_named_only_by_its_sse_name_is_read() -> None:
    state = ResponsesStream(provider="openai", model="gpt-5")
    delta = state.feed(json.dumps({"output_index": 0, "delta": "hi"}), "response.output_text.delta")
    assert [e.text for e in delta] == ["hi"]


def test_stream_errors_are_typed() -> None:
    with pytest.raises(RateLimited):
        feed({"type": "error", "code": "rate_limit_exceeded", "message": "slow", "param": None})
    with pytest.raises(ProviderUnavailable):
        feed({"type": "error", "error": {"message": "proxy down"}})  # a proxy's shape
    with pytest.raises(ResponseInvalid, match=r"without response\.completed"):
        feed({"type": "response.output_text.delta", "delta": "partial"})[1].response()
    with pytest.raises(ResponseInvalid, match="malformed"):
        feed({"type": "response.output_text.delta", "output_index": "first"})
    weird = {"type": "message", "content": "not a list"}
    with pytest.raises(ResponseInvalid):
        feed(
            {"type": "response.output_item.added", "output_index": 0, "item": weird},
            {"type": "response.output_text.delta", "output_index": 0, "delta": "x"},
        )


# --- whole loops through the twin ----------------------------------------------------------


async def test_strict_tools_get_their_optional_arguments_back_as_absent(
    twin: tuple[ResponsesTwin, str],
) -> None:
    """The shared strict rewrite: optional properties go nullable, and their nulls are dropped."""
    state, url = twin
    got: list[tuple[str, int]] = []

    @tool
    def search(q: str, limit: int = 5) -> str:
        """Search."""
        got.append((q, limit))
        return "hits"

    state.script = [Reply(calls=[("search", {"q": "x", "limit": None})]), Reply(text="done")]
    async with client_for(url) as client:
        run = await Agent(client, tools=[search]).run("find x")
    assert run.output == "done" and got == [("x", 5)]
    sent = state.received[0].body["tools"][0]
    assert sent["strict"] is True and sent["parameters"]["required"] == ["q", "limit"]


class Thoughts(Observer):
    """Collects the readable reasoning the engine streamed."""

    def __init__(self) -> None:
        self.text = ""

    def on_event(self, event: Event) -> None:
        if isinstance(event, ThinkingDelta):
            self.text += event.text


def loop_script() -> list[Reply]:
    return [Reply(calls=[("look", {"q": "a"})]), Reply(calls=[("look", {"q": "b"})]),
            Reply(text="both found")]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
async def test_an_agent_loop_sends_reasoning_back_on_every_turn(
    twin: tuple[ResponsesTwin, str], stream: bool
) -> None:
    state, url = twin
    state.script = loop_script()
    observer = Thoughts()
    config = RunConfig(stream=stream, model_settings=ModelSettings(reasoning_effort="low"))
    async with client_for(url) as client:
        agent = Agent(client, tools=[look], config=config, observers=[observer])
        run = await agent.run("look up a and b")
    assert run.output == "both found" and [r.status for r in state.received] == [200] * 3
    assert run.usage.reasoning_tokens == 18 and run.usage.cache_read_tokens == 12
    last = state.received[-1].body
    assert [item["type"] for item in last["input"]] == [
        "message", "reasoning", "function_call", "function_call_output",
        "reasoning", "function_call", "function_call_output",
    ]  # fmt: skip
    assert last["include"] == ["reasoning.encrypted_content"] and last["store"] is False
    assert last["reasoning"] == {"effort": "low", "summary": "auto"}
    assert observer.text == ("I should think about this." * 3 if stream else "")


async def test_a_resumed_session_with_a_new_client_still_satisfies_the_twin(
    twin: tuple[ResponsesTwin, str], tmp_path: Path
) -> None:
    state, url = twin
    state.script = [*loop_script(), Reply(calls=[("look", {"q": "c"})]), Reply(text="c too")]
    with SQLiteStore(tmp_path / "s.db") as store:
        async with client_for(url) as first:
            agent = Agent(first, tools=[look], store=store, session_id="s")
            assert (await agent.run("a and b")).output == "both found"
    with SQLiteStore(tmp_path / "s.db") as store:
        async with client_for(url) as second:  # a new process: nothing but the store
            config = RunConfig(stream=True)
            resumed = Agent.resume("s", store=store, client=second, tools=[look], config=config)
            assert (await resumed.run("and c")).output == "c too"
    assert [r.status for r in state.received] == [200] * 5
    sent = [i for i in state.received[-1].body["input"] if i["type"] == "reasoning"]
    assert [i["id"] for i in sent] == ["rs_twin1", "rs_twin2", "rs_twin3", "rs_twin4"]


async def test_the_twin_refuses_a_call_sent_without_its_reasoning(
    twin: tuple[ResponsesTwin, str],
) -> None:
    state, url = twin
    state.script = [Reply(calls=[("look", {"q": "a"})])]
    async with client_for(url) as client:
        first = await client.complete(request(Message.user("go")))
        call = first.message.tool_calls[0]
        stripped = Message("assistant", (call,))  # what an adapter that drops reasoning sends
        results = Message.tool_results([ToolResultPart(call.id, "look", "found a")])
        with pytest.raises(BadRequestError, match="without its required 'reasoning' item") as info:
            await client.complete(request(Message.user("go"), stripped, results))
        assert "'fc_twin1_0'" in str(info.value) and "'rs_twin1'" in str(info.value)
        thought = first.message.thinking[0]
        forged = ThinkingPart(thought.text, signature=encrypt("rs_other"), provider="openai",
                              id=thought.id)  # fmt: skip
        tampered = Message("assistant", (forged, call))
        with pytest.raises(BadRequestError, match="could not be verified"):
            await client.complete(request(Message.user("go"), tampered, results))
        alone = Message("assistant", (thought,))  # its call cut away: nothing follows it
        with pytest.raises(BadRequestError, match="without its required following item"):
            await client.complete(request(Message.user("go"), alone, Message.user("again")))


async def test_the_twin_enforces_the_parameters_it_documents(
    twin: tuple[ResponsesTwin, str],
) -> None:
    state, url = twin
    async with client_for(url, "gpt-4.1", encrypted_reasoning=True) as client:
        with pytest.raises(BadRequestError, match=NO_ENCRYPTION):  # asked of a non-reasoning model
            await client.complete(request())
    async with client_for(url) as client:
        refused: list[tuple[dict[str, Any], str]] = [
            ({"stop": ["x"]}, "Unknown parameter: 'stop'. Did you mean 'store'?"),
            ({"seed": 7}, "Unknown parameter: 'seed'."),
            ({"temperature": 0.2}, "Unsupported parameter: 'temperature' is not supported"),
            ({"top_p": 0.5}, "Unsupported parameter: 'top_p' is not supported"),
            ({"max_tokens": 10}, "this parameter has moved to 'max_output_tokens'"),
            ({"store": True}, "store must be false"),
        ]
        for extra, words in refused:  # each sneaked past the client's checks: the twin refuses
            with pytest.raises(BadRequestError) as info:
                await client.complete(request(settings=ModelSettings(extra_body=extra)))
            assert words in str(info.value)
        loose = ToolSpec("loose", "Loose.", LOOSE)
        forced = ModelSettings(extra_body={"tools": [{"type": "function", "name": "loose",
                                                      "parameters": LOOSE}]})  # fmt: skip
        with pytest.raises(BadRequestError, match="'additionalProperties' is required"):
            await client.complete(request(tools=[loose], settings=forced))  # strict by default
    assert [r.status for r in state.received] == [400] * 8


async def test_without_encrypted_content_the_next_turn_fails(
    twin: tuple[ResponsesTwin, str],
) -> None:
    """Why ``include`` matters: reasoning that comes back unsigned cannot be sent back."""
    state, url = twin
    state.script = [Reply(calls=[("look", {"q": "a"})]), Reply(text="unreachable")]
    async with client_for(url, encrypted_reasoning=False) as client:
        agent = Agent(client, tools=[look])
        with pytest.raises(BadRequestError, match="without its required 'reasoning' item"):
            await agent.run("go")
    assert "include" not in state.received[0].body


async def test_a_recorded_litellm_stream_replays_through_the_client(
    twin: tuple[ResponsesTwin, str],
) -> None:
    """LiteLLM's proxy (``test_responses_litellm.py``) streams ``data:`` lines without ``event:``
    lines, adds a ``model`` to every event and sends null usage details; recorded from it."""
    state, url = twin
    text = {"type": "output_text", "text": "Hello Ada.", "annotations": []}
    item: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant",
                            "status": "completed", "content": [text]}  # fmt: skip
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress",
                                                  "output": [], "store": True}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "part": {"type": "output_text", "text": ""}},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "delta": "Hello "},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "delta": "Ada."},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {
            "id": "resp_1", "status": "completed", "output": [item], "usage": {
                "input_tokens": 10, "input_tokens_details": None, "output_tokens": 5,
                "output_tokens_details": None, "total_tokens": 15, "cost": None}}},
    ]  # fmt: skip
    raw = "".join(f"data: {json.dumps({**e, 'model': 'smollm2-135m'})}\n\n" for e in events)
    state.script = [Reply(raw=raw)]
    async with client_for(url, "smollm2-135m") as client:
        response = await reply_of(client, request(), True)
    assert response.text == "Hello Ada." and response.usage.output_tokens == 5


@pytest.mark.parametrize("stream", [False, True])
async def test_refusal_incomplete_and_failure_through_the_twin(
    twin: tuple[ResponsesTwin, str], stream: bool
) -> None:
    state, url = twin
    state.script = [
        Reply(text="Well. ", refusal="I can't help with that."),
        Reply(text="Par", incomplete="content_filter"),
        Reply(text="long answer", calls=[("look", '{"q": "unfin')], incomplete="max_output_tokens"),
        Reply(failed={"code": "server_error", "message": "The model failed."}),
    ]
    async with client_for(url) as client:
        with pytest.raises(ModelRefused) as refused:
            await reply_of(client, request(), stream)
        assert (refused.value.reason, refused.value.text) == ("refusal", "I can't help with that.")
        with pytest.raises(ModelRefused) as filtered:
            await reply_of(client, request(), stream)
        assert (filtered.value.reason, filtered.value.text) == ("content_filter", "Par")
        cut = await reply_of(client, request(), stream)
        assert cut.stop_reason == "max_output_tokens"
        assert cut.tool_calls[0].arguments == {INVALID_JSON_KEY: '{"q": "unfin'}
        with pytest.raises(ProviderUnavailable, match="The model failed") as failed:
            await reply_of(client, request(), stream)
        assert failed.value.request_sent is True and failed.value.phase is not None


async def test_an_error_event_and_an_early_end_of_stream(twin: tuple[ResponsesTwin, str]) -> None:
    state, url = twin
    state.script = [
        Reply(text="hi", error_event={"code": "rate_limit_exceeded", "message": "Slow down"}),
        Reply(text="hello there", cut=True),
    ]
    async with client_for(url) as client:
        with pytest.raises(RateLimited, match="Slow down") as limited:
            await reply_of(client, request(), True)
        assert limited.value.request_sent is True
        with pytest.raises(ResponseInvalid, match=r"without response\.completed"):
            await reply_of(client, request(), True)


async def test_a_cut_tool_call_never_runs_and_the_run_says_truncated(
    twin: tuple[ResponsesTwin, str],
) -> None:
    state, url = twin
    state.script = [
        Reply(calls=[("look", '{"q": "a very long inp')], incomplete="max_output_tokens"),
        Reply(text="smaller then"),
    ]
    ran: list[str] = []

    @tool
    def write(q: str) -> str:
        """Write."""
        ran.append(q)
        return "ok"

    async with client_for(url) as client:
        agent = Agent(client, tools=[look, write], config=RunConfig(stream=True))
        run = await agent.run("write it")
    assert run.output == "smaller then" and ran == []
    result = state.received[-1].body["input"][-1]
    assert result["type"] == "function_call_output" and "cut off" in result["output"]


async def test_retry_on_503_and_fallback_to_chat_completions(
    twin: tuple[ResponsesTwin, str],
) -> None:
    state, url = twin
    busy = {"error": {"message": "Overloaded", "type": "server_error", "code": None}}
    state.script = [Reply(status=503, error=busy), Reply(text="second try")]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with RetryingClient(client_for(url), sleep=sleep) as retrying:
        assert (await retrying.complete(request())).text == "second try"
    assert len(waits) == 1 and [r.status for r in state.received] == [503, 200]
    state.script = [Reply(status=503, error=busy)]
    async with FakeProviderServer([FakeReply("from chat")]) as fake:
        backup = OpenAIClient("fake-model", base_url=fake.base_url)
        async with FallbackClient([client_for(url), backup]) as fallback:
            events = [e async for e in fallback.stream(request())]
    assert events[-1].response is not None and events[-1].response.text == "from chat"


async def test_the_fake_server_speaks_responses_for_the_client() -> None:
    steps = [FakeReply("hi", thinking="hmm", thinking_signature="sig")] * 2
    async with FakeProviderServer(steps) as fake:
        async with OpenAIResponsesClient("m", base_url=fake.base_url) as client:
            for stream in (False, True):
                response = await reply_of(client, request(), stream)
                assert response.message.parts[0] == ThinkingPart(
                    "hmm", signature="sig", provider="openai", id=f"rs_resp_fake{1 + stream}"
                )
    assert [r.path for r in fake.received] == ["/v1/responses"] * 2


# --- choosing the API ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "kind"),
    [
        (Settings(provider="openai"), OpenAIResponsesClient),
        (Settings(provider="openai", base_url="https://api.openai.com/v1"), OpenAIResponsesClient),
        (Settings(provider="openai", base_url="http://127.0.0.1:8080/v1"), OpenAIClient),
        (Settings(provider="openai", base_url="http://127.0.0.1:8080/v1", api="responses"),
         OpenAIResponsesClient),
        (Settings(provider="openai", api="chat"), OpenAIClient),
        (Settings(provider="ollama", api="chat"), OllamaClient),
    ],
)  # fmt: skip
async def test_settings_pick_the_api(settings: Settings, kind: type[Any]) -> None:
    client = build_client(Settings(**{**_fields(settings), "api_key": "k", "max_retries": 0}))
    try:
        assert type(client) is kind
    finally:
        await client.aclose()


def _fields(settings: Settings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__dataclass_fields__}


@pytest.mark.parametrize(
    "settings",
    [
        Settings(provider="openai", api="graphql"),
        Settings(provider="anthropic", api="chat"),
        Settings(provider="openrouter", api="responses"),
        Settings(provider="openai", api=None),  # type: ignore[arg-type]
    ],
)
def test_a_wrong_api_is_a_configuration_error(settings: Settings) -> None:
    with pytest.raises(ConfigurationError) as info:
        build_client(settings)
    assert info.value.field == "api"


def test_the_api_comes_from_the_environment() -> None:
    settings = Settings.from_env({"AGENTLOOP_API": "chat"})
    assert settings.api == "chat" and "api='chat'" in repr(settings)
