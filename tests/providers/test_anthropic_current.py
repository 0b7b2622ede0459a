"""AnthropicClient with current models (SPEC 16), every round trip through the Anthropic twin.

Thinking decoded (JSON and SSE) and sent back unchanged and first; redacted thinking; another
provider's reasoning never sent; settings mapped (thinking budgets, effort table, output limits)
or refused before any request; refusals raised, mid-stream too; a tool call cut at the output
limit answered with the cut-off soft text; the full agent loop across two turns, a store and a
new client. The twin (``twins/anthropic.py``) enforces provider-rules Anthropic 1, 3, 4 and 6.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.engine.loop import CUT_CALL_TEXT
from agentloop.errors import (
    BadRequestError,
    ConfigurationError,
    ModelRefused,
    ResponseInvalid,
    TranscriptError,
)
from agentloop.events import ThinkingDelta
from agentloop.messages import (
    Message,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.model import INVALID_JSON_KEY, ModelRequest, ModelSettings, StreamEvent
from agentloop.providers.anthropic import AnthropicClient
from agentloop.providers.retrying import RetryingClient
from agentloop.store import SQLiteStore

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

SSE = Path("/work/shared/fixtures/anthropic-sdk-python/messages-sse")
KEY = "sk-ant-twin-0123456789"
MODEL = "claude-sonnet-4-5"
THINK = ModelSettings(thinking_budget=2048)


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@pytest.fixture
async def clients() -> AsyncIterator[Callable[..., AnthropicClient]]:
    made: list[AnthropicClient] = []

    def make(url: str, model: str = MODEL, **kwargs: Any) -> AnthropicClient:
        client = AnthropicClient(model, api_key=KEY, base_url=url, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()


async def ask(client: AnthropicClient, request: ModelRequest, stream: bool) -> Any:
    """One model call, JSON or SSE; a stream gives (response, events)."""
    if not stream:
        return await client.complete(request), []
    events: list[StreamEvent] = [e async for e in client.stream(request)]
    assert events[-1].kind == "done" and events[-1].response is not None
    return events[-1].response, events


def request(*messages: Message, settings: ModelSettings = THINK) -> ModelRequest:
    return ModelRequest(messages=messages or (Message.user("go"),), settings=settings)


THOUGHT_AND_CALL = TwinReply(
    [twin.thinking("I should look it up."), twin.tool_use("look", {"q": "x"})], "tool_use"
)

# --- decoding -------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_thinking_is_decoded_first_with_its_signature(
    stream: bool, clients: Callable[..., AnthropicClient]
) -> None:
    async with AnthropicTwin([THOUGHT_AND_CALL]) as server:
        response, events = await ask(clients(server.url), request(), stream)
    thought, call = response.message.parts
    assert thought == ThinkingPart(
        "I should look it up.", signature=thought.signature, provider="anthropic"
    )
    assert server.issued.signatures[thought.signature] == thought.text
    assert isinstance(call, ToolCallPart) and call.arguments == {"q": "x"}
    assert response.text == "" and response.usage.reasoning_tokens == 0
    if stream:
        deltas = "".join(e.text for e in events if e.kind == "thinking_delta")
        assert deltas == "I should look it up."
        assert not any(e.kind == "text_delta" for e in events)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_redacted_thinking_is_a_redacted_part_with_the_data_as_signature(
    stream: bool, clients: Callable[..., AnthropicClient]
) -> None:
    reply = TwinReply([twin.redacted(), twin.text("ok")])
    async with AnthropicTwin([reply]) as server:
        response, _ = await ask(clients(server.url), request(), stream)
    [data] = server.issued.redacted
    assert response.message.parts == (
        ThinkingPart("", signature=data, redacted=True, provider="anthropic"),
        TextPart("ok"),
    )


@pytest.mark.parametrize(
    "blocks",
    [
        [{"type": "thinking", "thinking": "t", "signature": ""}, {"type": "text", "text": "a"}],
        [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "a"}],
        [{"type": "redacted_thinking"}],
    ],
    ids=["empty-signature", "no-signature", "redacted-without-data"],
)
async def test_reasoning_that_cannot_be_sent_back_is_response_invalid(
    blocks: list[dict[str, Any]], clients: Callable[..., AnthropicClient]
) -> None:
    body = {"id": "m", "type": "message", "role": "assistant", "model": MODEL,
            "content": blocks, "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
    from agentloop.providers.anthropic import parse_response

    with pytest.raises(ResponseInvalid, match="cannot be sent back"):
        parse_response(body)
    stream = [
        {"type": "message_start", "message": {**body, "content": [], "stop_reason": None}},
        *(
            {"type": "content_block_start", "index": i, "content_block": b}
            for i, b in enumerate(blocks)
        ),
        *({"type": "content_block_stop", "index": i} for i in range(len(blocks))),
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ]
    with pytest.raises(ResponseInvalid, match="cannot be sent back"):
        feed_all(stream)


def feed_all(events: list[Any]) -> Any:
    """Events through the pure stream decoder; the ``done`` response."""
    import json

    from agentloop.providers._sse import SSEEvent
    from agentloop.providers.anthropic import AnthropicStreamState

    state = AnthropicStreamState()
    for data in events:
        for out in state.feed(SSEEvent(event=data["type"], data=json.dumps(data))):
            if out.kind == "done":
                return out.response
    raise AssertionError("no done event")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    "fixture", ["compaction_response", "fallback_response", "fallback_credit_response"]
)
async def test_unknown_block_types_are_skipped_and_logged_compaction_kept(
    stream: bool,
    fixture: str,
    clients: Callable[..., AnthropicClient],
    caplog: pytest.LogCaptureFixture,
) -> None:
    reply = TwinReply.from_fixture(SSE / f"{fixture}.sse")
    async with AnthropicTwin([reply]) as server:
        with caplog.at_level(logging.DEBUG, logger="agentloop"):
            response, _ = await ask(clients(server.url), request(settings=ModelSettings()), stream)
    if fixture == "compaction_response":  # kept for the next request (SPEC 28)
        kept, text = response.message.parts
        assert text == TextPart("Hello there!")
        assert isinstance(kept, ProviderPart) and kept.kind == "compaction"
        if stream:
            assert kept.data["content"] == "Earlier conversation summarized."
            assert kept.data["encrypted_content"].startswith("EpwBCioIDxgCEAEYASJA")
        return
    assert response.message.parts == (TextPart("Hello there!"),)
    if fixture != "fallback_credit_response":
        assert "skipped a" in caplog.text


# --- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("fixture", "said"),
    [
        ("refusal_response", ""),  # a refusal with no text at all
        ("fable-fallback-stream-a-refusal", "Hi"),  # after thinking and some text
        (
            "fable-fallback-stream-a-toolrefusal",
            "Here's a summary of this year's solar eclipses and how",
        ),
    ],
)
async def test_a_refusal_raises_model_refused_with_the_text_before_it(
    stream: bool, fixture: str, said: str, clients: Callable[..., AnthropicClient]
) -> None:
    async with AnthropicTwin([TwinReply.from_fixture(SSE / f"{fixture}.sse")]) as server:
        client = RetryingClient(clients(server.url), sleep=_no_sleep)
        with pytest.raises(ModelRefused) as info:
            await ask(client, request(settings=ModelSettings()), stream)  # type: ignore[arg-type]
    assert (info.value.reason, info.value.text) == ("refusal", said)
    assert len(server.requests) == 1  # never retried


async def test_a_refusal_ends_the_agent_run(clients: Callable[..., AnthropicClient]) -> None:
    refusal = TwinReply([twin.text("I can")], "refusal")
    async with AnthropicTwin([THOUGHT_AND_CALL, refusal]) as server:
        config = RunConfig(model_settings=THINK, stream=True)
        agent = Agent(clients(server.url), tools=[look], config=config)
        with pytest.raises(ModelRefused) as info:
            await agent.run("go")
    assert info.value.text == "I can" and agent.runs[-1].output is None
    assert len(agent.history) == 3  # the completed turn before the refusal is kept


# --- cuts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_tool_call_cut_at_max_tokens_is_kept_with_its_raw_text(
    stream: bool, clients: Callable[..., AnthropicClient]
) -> None:
    reply = TwinReply.from_fixture(SSE / "incomplete_partial_json_response.sse")
    async with AnthropicTwin([reply]) as server:
        response, _ = await ask(clients(server.url), request(settings=ModelSettings()), stream)
    assert response.stop_reason == "max_tokens" and response.text.startswith("I'll create")
    [call] = response.tool_calls
    assert (call.id, call.name) == ("toolu_01EKqbqmZrGRXy18eN7m9kvY", "make_file")
    raw = call.arguments[INVALID_JSON_KEY]
    assert raw.startswith('{"filename": "taxes.txt') and raw.endswith('"Filing taxes')


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_the_model_reads_the_cut_off_text_and_the_run_goes_on(
    stream: bool, clients: Callable[..., AnthropicClient]
) -> None:
    ran: list[str] = []

    @tool
    def make_file(filename: str, lines_of_text: list[str]) -> str:
        """Write a file."""
        ran.append(filename)
        return "written"

    script = [
        TwinReply.from_fixture(SSE / "incomplete_partial_json_response.sse"),
        TwinReply([twin.text("I will write it in smaller pieces.")]),
    ]
    async with AnthropicTwin(script) as server:
        config = RunConfig(stream=stream)
        run = await Agent(clients(server.url), tools=[make_file], config=config).run("taxes")
    assert ran == [] and run.output == "I will write it in smaller pieces."
    sent = server.requests[1]["messages"]
    assert sent[1]["content"][1]["input"] == {INVALID_JSON_KEY: run.turns[0].tool_calls[0]
                                              .arguments[INVALID_JSON_KEY]}  # fmt: skip
    result = sent[2]["content"][0]
    assert result["content"] == CUT_CALL_TEXT.format(name="make_file") and result["is_error"]


@pytest.mark.parametrize("reason", ["end_turn", "stop_sequence", "pause_turn"])
async def test_other_stop_reasons_are_kept_verbatim(
    reason: str, clients: Callable[..., AnthropicClient]
) -> None:
    """Provider-rules Anthropic 2 (refusal and the cuts have tests of their own)."""
    async with AnthropicTwin([TwinReply([twin.text("hi")], reason)] * 2) as server:
        for stream in (False, True):
            response, _ = await ask(clients(server.url), request(), stream)
            assert response.stop_reason == reason and response.text == "hi"


@pytest.mark.parametrize("reason", ["max_tokens", "model_context_window_exceeded"])
async def test_truncation_stop_reasons_are_kept(
    reason: str, clients: Callable[..., AnthropicClient]
) -> None:
    async with AnthropicTwin([TwinReply([twin.text("partial")], reason)]) as server:
        run = await Agent(clients(server.url)).run("go")
    assert run.truncated and run.turns[-1].stop_reason == reason


@pytest.mark.parametrize(
    ("raw", "kept"), [('{"q": "unfinish', '{"q": "unfinish'), ([1, 2], "[1, 2]")]
)
def test_a_json_reply_cut_keeps_a_tool_input_that_is_not_an_object(raw: Any, kept: str) -> None:
    from agentloop.providers.anthropic import parse_response

    block = {"type": "tool_use", "id": "t1", "name": "look", "input": raw}
    body = {"content": [block], "model": MODEL, "stop_reason": "max_tokens"}
    assert parse_response(body).tool_calls == (
        ToolCallPart("t1", "look", {INVALID_JSON_KEY: kept}),
    )
    with pytest.raises(ResponseInvalid, match="input"):
        parse_response({**body, "stop_reason": "tool_use"})


def open_thinking(stop_reason: str) -> list[dict[str, Any]]:
    """A stream whose thinking block never closed and never got its signature."""
    block = {"type": "thinking", "thinking": "", "signature": ""}
    return [
        {"type": "message_start", "message": {"id": "m", "model": MODEL}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "long thou"}},
        {"type": "message_delta", "delta": {"stop_reason": stop_reason}},
        {"type": "message_stop"},
    ]  # fmt: skip


def test_an_unsigned_thinking_block_a_cut_left_open_is_dropped() -> None:
    response = feed_all(open_thinking("max_tokens"))
    assert response.message.parts == () and response.stop_reason == "max_tokens"


def test_an_unsigned_thinking_block_left_open_without_a_cut_is_invalid() -> None:
    with pytest.raises(ResponseInvalid, match="without a signature"):
        feed_all(open_thinking("end_turn"))


async def test_a_closed_tool_block_with_bad_json_outside_a_cut_is_invalid() -> None:
    head = {"id": "m", "model": MODEL, "usage": {"input_tokens": 1}}
    block = {"type": "tool_use", "id": "t1", "name": "look", "input": {}}
    events = [
        {"type": "message_start", "message": head},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": '{"q": '}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]  # fmt: skip
    with pytest.raises(ResponseInvalid, match="not a JSON object"):
        feed_all(events)


async def _no_sleep(seconds: float) -> None:
    return None


# --- the agent loop through the twin ----------------------------------------------------------


def two_turns() -> list[TwinReply]:
    return [
        THOUGHT_AND_CALL,
        TwinReply([twin.thinking("It says found x."), twin.text("The answer is x.")]),
    ]


def thinking_sent(body: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(message index, thinking text, signature) of every thinking block in a request."""
    return [
        (i, b["thinking"], b["signature"])
        for i, m in enumerate(body["messages"])
        for b in m["content"]
        if b["type"] == "thinking"
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_an_agent_thinks_calls_a_tool_and_answers_over_two_turns(
    stream: bool, clients: Callable[..., AnthropicClient]
) -> None:
    async with AnthropicTwin(two_turns()) as server:
        config = RunConfig(model_settings=THINK, stream=stream)
        agent = Agent(clients(server.url), tools=[look], config=config, system="Be brief.")
        run = await agent.run("find x")
    assert run.output == "The answer is x." and server.rejected == []
    first, second = server.requests
    assert twin.breakpoints(second) == 4  # tools, system, two in the transcript (rule 6)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 64_000  # Claude 4.5's own limit, not a fixed 4096
    [signature] = [s for s, t in server.issued.signatures.items() if t == "I should look it up."]
    assistant = second["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]
    assert assistant["content"][0] == {
        "type": "thinking", "thinking": "I should look it up.", "signature": signature
    }  # fmt: skip
    kept = [m.thinking for m in agent.history if m.role == "assistant"]
    assert [[t.text for t in thoughts] for thoughts in kept] == [
        ["I should look it up."],
        ["It says found x."],
    ]


async def test_agent_stream_shows_thinking_deltas(clients: Callable[..., AnthropicClient]) -> None:
    async with AnthropicTwin(two_turns()) as server:
        agent = Agent(clients(server.url), tools=[look], config=RunConfig(model_settings=THINK))
        async with agent.stream("find x") as events:
            thoughts = [e.text async for e in events if isinstance(e, ThinkingDelta)]
    assert "".join(thoughts) == "I should look it up.It says found x."
    assert events.run.output == "The answer is x."


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_reasoning_survives_the_store_and_a_new_client(
    stream: bool, tmp_path: Path, clients: Callable[..., AnthropicClient]
) -> None:
    script = [*two_turns(), *two_turns()]
    config = RunConfig(model_settings=THINK, stream=stream)
    async with AnthropicTwin(script) as server:
        with SQLiteStore(tmp_path / "runs.db") as store:
            agent = Agent(clients(server.url), tools=[look], store=store, config=config)
            await agent.run("find x")
            session, history = agent.session_id, agent.history
        assert [Message.from_dict(m.to_dict()) for m in history] == history
        with SQLiteStore(tmp_path / "runs.db") as store:
            resumed = Agent.resume(
                session, store=store, client=clients(server.url), tools=[look], config=config
            )
            assert resumed.history == history
            run = await resumed.run("and again")
    assert run.output == "The answer is x." and server.rejected == []
    third, fourth = server.requests[2:]
    signed = list(server.issued.signatures.items())  # in the order the twin signed them
    assert thinking_sent(third) == [(1, *reversed(signed[0])), (3, *reversed(signed[1]))]
    assert fourth["messages"][-2]["content"][0]["type"] == "thinking"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_redacted_thinking_goes_back_unchanged(
    stream: bool, clients: Callable[..., AnthropicClient]
) -> None:
    script = [
        TwinReply([twin.redacted(), twin.tool_use("look", {"q": "x"})], "tool_use"),
        TwinReply([twin.text("done")]),
    ]
    async with AnthropicTwin(script) as server:
        config = RunConfig(model_settings=THINK, stream=stream)
        run = await Agent(clients(server.url), tools=[look], config=config).run("go")
    assert run.output == "done" and server.rejected == []
    [data] = server.issued.redacted
    assert server.requests[1]["messages"][1]["content"][0] == {
        "type": "redacted_thinking", "data": data
    }  # fmt: skip


# --- what goes back, and what the twin refuses ------------------------------------------------


def history_with(thought: ThinkingPart) -> tuple[Message, ...]:
    call = ToolCallPart("toolu_1", "look", {"q": "x"})
    return (
        Message.user("go"),
        Message("assistant", (thought, call)),
        Message.tool_results([ToolResultPart("toolu_1", "look", "found x")]),
    )


async def test_another_providers_reasoning_is_never_sent(
    clients: Callable[..., AnthropicClient],
) -> None:
    """Dropped, as SPEC 16 says; with thinking on the twin then answers as the API does."""
    foreign = ThinkingPart("gemini thought", signature="g-sig", provider="gemini")
    async with AnthropicTwin([TwinReply([twin.text("ok")])]) as server:
        client = clients(server.url)
        with pytest.raises(BadRequestError) as info:
            await client.complete(request(*history_with(foreign)))
        await client.complete(request(*history_with(foreign), settings=ModelSettings()))
    assert server.rejected == [twin.MUST_START.format(i=1, found="tool_use")]
    assert str(info.value).endswith(twin.MUST_START.format(i=1, found="tool_use"))
    assert info.value.status_code == 400
    assert [b["type"] for b in server.requests[0]["messages"][1]["content"]] == ["tool_use"]


async def test_the_twin_refuses_edited_or_invented_reasoning(
    clients: Callable[..., AnthropicClient],
) -> None:
    async with AnthropicTwin() as server:
        real = server.issued.sign("the real thought")
        client = clients(server.url)
        for thought in (
            ThinkingPart("an edited thought", signature=real, provider="anthropic"),
            ThinkingPart("t", signature="made-up", provider="anthropic"),
            ThinkingPart("", signature="made-up", redacted=True, provider="anthropic"),
        ):
            with pytest.raises(BadRequestError):
                await client.complete(request(*history_with(thought)))
    assert server.rejected == [twin.BAD_SIGNATURE.format(i=1, j=0)] * 3


async def test_an_anthropic_thinking_part_without_signature_is_a_transcript_error(
    clients: Callable[..., AnthropicClient],
) -> None:
    async with AnthropicTwin() as server:
        with pytest.raises(TranscriptError, match="signature"):
            await clients(server.url).complete(
                request(*history_with(ThinkingPart("t", provider="anthropic")))
            )
    assert server.requests == [] and server.rejected == []


async def test_thinking_blocks_never_carry_a_cache_breakpoint(
    clients: Callable[..., AnthropicClient],
) -> None:
    async with AnthropicTwin([THOUGHT_AND_CALL]) as server:
        signature = server.issued.sign("prefill")
        prefill = Message("assistant", (ThinkingPart("prefill", signature=signature,
                                                     provider="anthropic"),))  # fmt: skip
        await clients(server.url).complete(request(Message.user("go"), prefill))
    last = server.requests[0]["messages"][-1]["content"]
    assert last == [{"type": "thinking", "thinking": "prefill", "signature": signature}]


BASE = {"model": MODEL, "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}
ON = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
MARK = {"cache_control": {"type": "ephemeral"}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_tokens": None}, twin.MAX_TOKENS_REQUIRED),  # rule 4
        ({**ON, "temperature": 0.5}, twin.TEMPERATURE),  # rule 3
        ({**ON, "top_k": 5}, twin.TOP_K),
        ({**ON, "tool_choice": {"type": "any"}}, twin.FORCED_TOOL),
        ({**ON, "tool_choice": {"type": "tool", "name": "look"}}, twin.FORCED_TOOL),
        ({"thinking": {"type": "enabled", "budget_tokens": 512}}, twin.SMALL_BUDGET),
        ({"thinking": {"type": "enabled", "budget_tokens": 4096}}, twin.BUDGET_OVER_MAX),
        ({"temperature": 0.5, "top_p": 0.9}, twin.TEMPERATURE_AND_TOP_P),
        (
            {"tools": [{"name": f"t{i}", "input_schema": {"type": "object"}, **MARK}
                       for i in range(5)]},
            twin.CACHE_BREAKPOINTS.format(n=5),
        ),  # rule 6
    ],
)  # fmt: skip
async def test_the_twin_answers_each_broken_rule_as_the_api_does(
    change: dict[str, Any], message: str
) -> None:
    body = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    async with AnthropicTwin([TwinReply([twin.text("never")])]) as server:
        async with aiohttp.ClientSession() as session:
            headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
            async with session.post(f"{server.url}/v1/messages", json=body,
                                    headers=headers) as reply:  # fmt: skip
                status, data = reply.status, await reply.json()
    assert status == 400 and server.requests == []
    assert data["error"] == {"type": "invalid_request_error", "message": message}


async def test_the_twin_takes_what_the_rules_allow() -> None:
    allowed = [
        {**BASE, **ON, "temperature": 1, "tool_choice": {"type": "auto"}},
        {**BASE, "model": "claude-3-5-haiku-latest", "temperature": 0.5, "top_p": 0.9},
        {**BASE, "tools": [{"name": f"t{i}", "input_schema": {"type": "object"}, **MARK}
                           for i in range(4)]},
    ]  # fmt: skip
    async with AnthropicTwin([TwinReply([twin.text("ok")])] * 3) as server:
        async with aiohttp.ClientSession() as session:
            for body in allowed:
                async with session.post(f"{server.url}/v1/messages", json=body,
                                        headers={"x-api-key": KEY}) as reply:  # fmt: skip
                    assert reply.status == 200
    assert len(server.requests) == 3


# --- settings: mapped, or refused before any request ------------------------------------------


@pytest.mark.parametrize(
    ("model", "settings", "thinking", "max_tokens"),
    [
        (MODEL, ModelSettings(thinking_budget=5000), 5000, 64_000),
        (MODEL, ModelSettings(thinking_budget=5000, top_p=0.95, temperature=None), 5000, 64_000),
        (MODEL, ModelSettings(thinking_budget=0), None, 64_000),  # 0: no thinking
        (MODEL, ModelSettings(reasoning_effort="none"), None, 64_000),
        (MODEL, ModelSettings(reasoning_effort="minimal"), 1024, 64_000),
        (MODEL, ModelSettings(reasoning_effort="low"), 4096, 64_000),
        (MODEL, ModelSettings(reasoning_effort="medium"), 16_384, 64_000),
        (MODEL, ModelSettings(reasoning_effort="high"), 32_768, 64_000),
        ("claude-opus-4-1", ModelSettings(reasoning_effort="high"), 24_000, 32_000),  # capped
        (MODEL, ModelSettings(reasoning_effort="low", max_tokens=4000), 3000, 4000),
        ("claude-3-7-sonnet-latest", ModelSettings(thinking_budget=1024), 1024, 64_000),
        ("claude-3-5-haiku-latest", ModelSettings(), None, 8192),
    ],
)
async def test_reasoning_settings_become_a_thinking_budget(
    model: str,
    settings: ModelSettings,
    thinking: int | None,
    max_tokens: int,
    clients: Callable[..., AnthropicClient],
) -> None:
    async with AnthropicTwin([TwinReply([twin.text("ok")])]) as server:
        await clients(server.url, model).complete(request(settings=settings))
    [body] = server.requests
    expected = None if thinking is None else {"type": "enabled", "budget_tokens": thinking}
    assert body.get("thinking") == expected and body["max_tokens"] == max_tokens


async def test_extra_body_merges_into_the_payload_key_by_key(
    clients: Callable[..., AnthropicClient],
) -> None:
    extra = {"thinking": {"budget_tokens": 4096}, "metadata": {"user_id": "u1"}}
    settings = ModelSettings(thinking_budget=2048, extra_body=extra)
    async with AnthropicTwin([TwinReply([twin.text("ok")])]) as server:
        await clients(server.url).complete(request(settings=settings))
    [body] = server.requests
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert body["metadata"] == {"user_id": "u1"}


def thinking_and(**kwargs: Any) -> ModelSettings:
    return ModelSettings(thinking_budget=2048, **kwargs)


@pytest.mark.parametrize(
    ("model", "settings", "field"),
    [
        (MODEL, thinking_and(temperature=0.5), "temperature"),  # rule 3
        (MODEL, thinking_and(extra_body={"top_k": 5}), "top_k"),
        (MODEL, thinking_and(tool_choice="required"), "tool_choice"),
        (MODEL, thinking_and(tool_choice="look"), "tool_choice"),
        (MODEL, thinking_and(top_p=0.5), "top_p"),
        (MODEL, ModelSettings(extra_body={"thinking": {"type": "enabled", "budget_tokens": 2048},
                                          "temperature": 0.3}), "temperature"),
        (MODEL, ModelSettings(temperature=0.5, top_p=0.9), "top_p"),  # Sonnet 4.5
        (MODEL, ModelSettings(extra_body={"temperature": 0.5, "top_p": 0.9}), "top_p"),
        (MODEL, ModelSettings(thinking_budget=500), "thinking_budget"),
        (MODEL, ModelSettings(thinking_budget=64_000), "thinking_budget"),
        (MODEL, ModelSettings(reasoning_effort="low", thinking_budget=2048), "thinking_budget"),
        (MODEL, ModelSettings(reasoning_effort="minimal", max_tokens=1200), "reasoning_effort"),
        ("claude-3-5-haiku-latest", ModelSettings(reasoning_effort="low"), "reasoning_effort"),
        ("claude-3-haiku-20240307", ModelSettings(thinking_budget=2048), "thinking_budget"),
    ],
)  # fmt: skip
async def test_settings_the_model_refuses_never_reach_the_provider(
    model: str, settings: ModelSettings, field: str, clients: Callable[..., AnthropicClient]
) -> None:
    async with AnthropicTwin([TwinReply([twin.text("never")])] * 2) as server:
        client = clients(server.url, model)
        with pytest.raises(ConfigurationError) as info:
            await client.complete(request(settings=settings))
        with pytest.raises(ConfigurationError):
            await ask(client, request(settings=settings), stream=True)
    assert info.value.field == field and model in str(info.value)
    assert server.requests == [] and server.rejected == []


async def test_a_budget_over_max_tokens_names_both(
    clients: Callable[..., AnthropicClient],
) -> None:
    settings = ModelSettings(thinking_budget=8000, max_tokens=8000)
    async with AnthropicTwin() as server:
        with pytest.raises(ConfigurationError) as info:
            await clients(server.url).complete(request(settings=settings))
    assert "8000 budget_tokens" in str(info.value) and "max_tokens (8000)" in str(info.value)


async def test_a_refused_setting_ends_the_run_before_any_request(
    clients: Callable[..., AnthropicClient],
) -> None:
    async with AnthropicTwin([THOUGHT_AND_CALL]) as server:
        config = RunConfig(model_settings=thinking_and(tool_choice="required"))
        agent = Agent(RetryingClient(clients(server.url), sleep=_no_sleep), tools=[look],
                      config=config)  # fmt: skip
        with pytest.raises(ConfigurationError):
            await agent.run("go")
    assert server.requests == [] and server.rejected == []
