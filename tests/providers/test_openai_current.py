"""Current OpenAI models on Chat Completions (SPEC 16), through the twin of OpenAI's endpoint.

Every round trip runs against ``twins/openai_chat.OpenAIChatTwin``, which refuses what OpenAI
refuses with OpenAI's status and words: reasoning-model parameters, Responses-only models,
function tools beside a reasoning effort on dotted gpt-5 releases, strict schemas of the wrong
shape, unanswered tool calls and fields the API does not define.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentloop import Agent, RunConfig, tool
from agentloop.engine.loop import CUT_CALL_TEXT
from agentloop.errors import (
    BadRequestError,
    ConfigurationError,
    ModelNotFound,
    ModelRefused,
    ProviderError,
)
from agentloop.messages import Message, ThinkingPart, Usage
from agentloop.model import INVALID_JSON_KEY, ModelRequest, ModelResponse, ModelSettings, ToolSpec
from agentloop.providers import Settings, build_client
from agentloop.providers.openai import OpenAIClient, parse_completion

from .conftest import serve_app
from .twins.openai_chat import (
    MAX_TOKENS_TEXT,
    RESPONSES_ONLY_TEXT,
    TOOLS_EFFORT_TEXT,
    OpenAIChatTwin,
    Replay,
    TwinReply,
)

FIXTURES = Path("/work/shared/fixtures/openai-python/chat-completions-sse")
WEATHER = ToolSpec(
    "get_weather",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@dataclass
class Served:
    """A running twin and the base URL it answers under."""

    twin: OpenAIChatTwin
    base: str

    def client(self, model: str = "gpt-5-mini", **kwargs: Any) -> OpenAIClient:
        return OpenAIClient(model, base_url=f"{self.base}/v1", **kwargs)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    twin = OpenAIChatTwin()
    async with serve_app(twin.app()) as base:
        yield Served(twin, base)


async def ask(client: OpenAIClient, request: ModelRequest, stream: bool) -> ModelResponse:
    """One reply through ``complete`` or ``stream`` (the client is closed after)."""
    try:
        if not stream:
            return await client.complete(request)
        events = [event async for event in client.stream(request)]
        assert events[-1].kind == "done" and events[-1].response is not None
        return events[-1].response
    finally:
        await client.aclose()


def hi(**kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=[Message.user("hi")], **kwargs)


@tool
def get_weather(city: str, units: str = "celsius") -> str:
    """Weather for a city.

    Args:
        city: The city.
        units: celsius or fahrenheit.
    """
    return f"sunny in {city} ({units})"


# --- the agent loop, two turns with a tool, JSON and SSE ----------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agent_loop_on_a_reasoning_model_with_a_tool(served: Served, stream: bool) -> None:
    served.twin.push(
        # strict mode: the model sends null for the optional ``units``; its default applies
        TwinReply(tool_calls=[("get_weather", {"city": "Paris", "units": None})]),
        TwinReply("It is sunny.", reasoning_tokens=12, cached_tokens=16, completion_tokens=20),
    )
    settings = ModelSettings(max_tokens=256, reasoning_effort="low")
    config = RunConfig(stream=stream, model_settings=settings)
    async with served.client() as client:
        run = await Agent(client, tools=[get_weather], config=config).run("Weather in Paris?")
    assert run.output == "It is sunny."
    assert run.turns[0].tool_results[0].content == "sunny in Paris (celsius)"
    assert run.usage.reasoning_tokens == 12 and run.usage.cache_read_tokens == 16
    first, second = served.twin.accepted
    for body in (first, second):
        assert body["max_completion_tokens"] == 256 and "max_tokens" not in body
        assert body["reasoning_effort"] == "low" and body["model"] == "gpt-5-mini"
        function = body["tools"][0]["function"]
        assert function["strict"] is True and function["parameters"]["required"] == [
            "city",
            "units",
        ]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]
    assert second["messages"][2]["content"] == "sunny in Paris (celsius)"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_stored_history_resumes_with_a_new_client(served: Served, stream: bool) -> None:
    """After ``to_dict``/``from_dict`` and with a new client, the second turn is accepted; the
    reasoning parts another provider (or the Responses API) wrote are never sent."""
    served.twin.push(
        TwinReply(tool_calls=[("get_weather", {"city": "Oslo", "units": "celsius"})]),
        TwinReply("Cold."),
    )
    async with served.client() as client:
        first = await Agent(client, tools=[get_weather]).run("Oslo?")
    stored = [m.to_dict() for m in first.conversation]
    restored = [Message.from_dict(json.loads(json.dumps(d))) for d in stored]
    call_turn = restored[1]
    restored[1] = Message(
        "assistant",
        (
            ThinkingPart("thought", signature="sig-a", provider="anthropic"),
            ThinkingPart("summary", signature="enc", provider="openai", id="rs_9"),
            *call_turn.parts,
        ),
    )
    served.twin.push(TwinReply("Still cold."))
    config = RunConfig(stream=stream)
    async with served.client() as fresh:
        again = await Agent(fresh, tools=[get_weather], history=restored, config=config).run(
            "And now?"
        )
    assert again.output == "Still cold."
    sent = json.dumps(served.twin.accepted[-1])
    assert "sig-a" not in sent and "rs_9" not in sent and "summary" not in sent
    roles = [m["role"] for m in served.twin.accepted[-1]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]


# --- settings the model refuses: ConfigurationError, nothing sent ----------------------------


@pytest.mark.parametrize(
    ("model", "settings", "tools", "field"),
    [
        ("gpt-5-mini", ModelSettings(temperature=0.2), (), "temperature"),
        ("gpt-5-mini", ModelSettings(top_p=0.9), (), "top_p"),
        ("gpt-5", ModelSettings(stop=("END",)), (), "stop"),
        ("o3", ModelSettings(stop=("END",)), (), "stop"),
        ("o4-mini", ModelSettings(reasoning_effort="minimal"), (), "reasoning_effort"),
        ("gpt-5.1", ModelSettings(reasoning_effort="minimal"), (), "reasoning_effort"),
        ("gpt-4o", ModelSettings(reasoning_effort="low"), (), "reasoning_effort"),
        ("gpt-5", ModelSettings(thinking_budget=1024), (), "thinking_budget"),
        ("gpt-5-pro", ModelSettings(), (), "model"),
        ("o3-pro", ModelSettings(), (), "model"),
        ("gpt-5-codex", ModelSettings(), (), "model"),
        ("gpt-5.5", ModelSettings(), (WEATHER,), "reasoning_effort"),
        ("gpt-5.5", ModelSettings(reasoning_effort="high"), (WEATHER,), "reasoning_effort"),
        ("gpt-5.4", ModelSettings(reasoning_effort="low"), (WEATHER,), "reasoning_effort"),
    ],
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_refused_settings_send_nothing(
    served: Served,
    model: str,
    settings: ModelSettings,
    tools: tuple[ToolSpec, ...],
    field: str,
    stream: bool,
) -> None:
    with pytest.raises(ConfigurationError) as info:
        await ask(served.client(model), hi(settings=settings, tools=tools), stream)
    assert info.value.field == field and model in str(info.value)
    assert served.twin.requests == []  # refused before any byte was sent


@pytest.mark.parametrize(
    "model", ["gpt-5-pro", "o3-pro", "gpt-5-codex", "gpt-5.1-codex-max", "o3-deep-research"]
)
async def test_a_responses_only_model_is_told_the_way(served: Served, model: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        await ask(served.client(model), hi(), stream=False)
    message = str(info.value)
    assert 'Settings(provider="openai", api="responses")' in message
    assert "OpenAIResponsesClient" in message and model in message


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_the_tools_rule_passes_with_effort_none(served: Served, stream: bool) -> None:
    served.twin.push(TwinReply("ok"))
    settings = ModelSettings(reasoning_effort="none")
    response = await ask(served.client("gpt-5.5"), hi(settings=settings, tools=[WEATHER]), stream)
    assert response.text == "ok" and served.twin.accepted[0]["reasoning_effort"] == "none"


async def test_older_dotted_releases_take_tools_without_an_effort(served: Served) -> None:
    served.twin.push(TwinReply("ok"))
    assert (await ask(served.client("gpt-5.4"), hi(tools=[WEATHER]), False)).text == "ok"


# --- the twin refuses what OpenAI refuses (extra_body and overrides get past our checks) -----


@pytest.mark.parametrize(
    ("model", "extra", "text", "code"),
    [
        ("gpt-5-mini", {"max_tokens": 10}, MAX_TOKENS_TEXT, "unsupported_parameter"),
        (
            "o3",
            {"temperature": 0.2},
            "Unsupported value: 'temperature' does not support 0.2 with this model. Only the "
            "default (1) value is supported.",
            "unsupported_value",
        ),
        (
            "gpt-5",
            {"top_p": 0.5},
            "Unsupported parameter: 'top_p' is not supported with this model.",
            "unsupported_parameter",
        ),
        (
            "o4-mini",
            {"stop": ["x"]},
            "Unsupported parameter: 'stop' is not supported with this model.",
            "unsupported_parameter",
        ),
    ],
)
async def test_the_twin_answers_reasoning_rules_with_openai_errors(
    served: Served, model: str, extra: dict[str, Any], text: str, code: str
) -> None:
    settings = ModelSettings(extra_body=extra)
    with pytest.raises(BadRequestError) as info:
        await ask(served.client(model), hi(settings=settings), stream=False)
    assert text in str(info.value) and info.value.status_code == 400
    body = json.loads(info.value.body or "{}")
    assert body["error"]["code"] == code and body["error"]["type"] == "invalid_request_error"


async def test_an_explicit_max_tokens_field_is_kept_and_the_twin_refuses_it(
    served: Served,
) -> None:
    client = served.client(max_tokens_field="max_tokens")
    with pytest.raises(BadRequestError) as info:
        await ask(client, hi(settings=ModelSettings(max_tokens=50)), stream=False)
    assert MAX_TOKENS_TEXT in str(info.value)


async def test_the_twin_refuses_tools_beside_an_effort(served: Served) -> None:
    settings = ModelSettings(extra_body={"reasoning_effort": "low"})  # past our check
    with pytest.raises(BadRequestError) as info:
        await ask(served.client("gpt-5.4"), hi(settings=settings, tools=[WEATHER]), False)
    assert TOOLS_EFFORT_TEXT.format(model="gpt-5.4") in str(info.value)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("model", ["gpt-4o-deep-research", "mini-deep-research-2027"])
async def test_a_responses_only_404_names_the_fix(served: Served, stream: bool, model: str) -> None:
    """A Responses-only model the profiles do not know: OpenAI's 404, with the way out."""
    with pytest.raises(ModelNotFound) as info:
        await ask(served.client(model), hi(), stream)
    message = str(info.value)
    assert RESPONSES_ONLY_TEXT in message and "OpenAIResponsesClient" in message
    assert 'api="responses"' in message and info.value.status_code == 404


async def test_an_azure_like_host_gets_max_completion_tokens(served: Served) -> None:
    served.twin.push(TwinReply("a"), TwinReply("b"))
    azure = OpenAIClient("gpt-5-mini", base_url=f"{served.base}/openai/v1")
    await ask(azure, hi(settings=ModelSettings(max_tokens=64)), stream=False)
    classic = OpenAIClient("gpt-4o", base_url=f"{served.base}/openai/v1")
    await ask(classic, hi(settings=ModelSettings(max_tokens=64, temperature=0.3)), stream=True)
    reasoning, chat = served.twin.accepted
    assert reasoning["max_completion_tokens"] == 64 and "max_tokens" not in reasoning
    assert chat["max_tokens"] == 64 and chat["temperature"] == 0.3  # not a reasoning model
    assert served.twin.paths == ["/openai/v1/chat/completions"] * 2


# --- refusals, filtered replies and cuts -----------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_refusal_raises_model_refused(served: Served, stream: bool) -> None:
    served.twin.push(TwinReply(refusal="I can't help with that."))
    with pytest.raises(ModelRefused) as info:
        await ask(served.client("gpt-4o"), hi(), stream)
    assert (info.value.reason, info.value.text) == ("refusal", "I can't help with that.")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_content_filter_raises_with_the_text_so_far(served: Served, stream: bool) -> None:
    served.twin.push(TwinReply("Here is how to", finish_reason="content_filter"))
    with pytest.raises(ModelRefused) as info:
        await ask(served.client("gpt-4o"), hi(), stream)
    assert (info.value.reason, info.value.text) == ("content_filter", "Here is how to")


@pytest.mark.parametrize(
    "name", ["parse_pydantic_model_refusal.sse", "refusal_logprobs_events.sse"]
)
async def test_recorded_refusals_replayed_by_the_twin(served: Served, name: str) -> None:
    served.twin.push(Replay(FIXTURES / name))
    deltas: list[str] = []
    client = served.client("gpt-4o")
    with pytest.raises(ModelRefused) as info:
        async for event in client.stream(hi()):
            deltas.append(event.kind)
    await client.aclose()
    assert info.value.reason == "refusal" and info.value.text.startswith("I'm")
    assert "text_delta" not in deltas  # a refusal is never streamed as an answer


async def test_a_refusal_ends_the_run_after_a_tool_turn(served: Served) -> None:
    served.twin.push(
        TwinReply(tool_calls=[("get_weather", {"city": "Rome", "units": None})]),
        TwinReply(refusal="I won't continue."),
    )
    async with served.client() as client:
        agent = Agent(client, tools=[get_weather])
        with pytest.raises(ModelRefused) as info:
            await agent.run("Rome?")
    assert info.value.text == "I won't continue."
    assert info.value.summary is not None and info.value.summary.turns_completed == 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("raw", ['{"city": "Par', ""], ids=["mid-json", "no-arguments"])
async def test_a_call_cut_at_length_is_kept_invalid(served: Served, stream: bool, raw: str) -> None:
    served.twin.push(
        TwinReply(
            tool_calls=[("get_weather", {"city": "Oslo"}), ("get_weather", raw)],
            finish_reason="length",
        )
    )
    response = await ask(served.client(), hi(tools=[WEATHER]), stream)
    whole, cut = response.tool_calls
    assert whole.arguments == {"city": "Oslo"}  # an earlier, finished call is kept as is
    assert cut.arguments == {INVALID_JSON_KEY: raw} and response.stop_reason == "length"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_the_engine_never_runs_a_cut_call(served: Served, stream: bool) -> None:
    ran: list[str] = []

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        ran.append(path)
        return "written"

    served.twin.push(
        TwinReply(
            tool_calls=[("write_file", '{"path": "a.txt", "content": "long te')],
            finish_reason="length",
        ),
        TwinReply("I will write it in parts."),
    )
    async with served.client() as client:
        run = await Agent(client, tools=[write_file], config=RunConfig(stream=stream)).run("go")
    assert ran == [] and run.output == "I will write it in parts." and not run.truncated
    tool_message = served.twin.accepted[1]["messages"][2]
    assert tool_message["content"] == CUT_CALL_TEXT.format(name="write_file")


async def test_a_recorded_cut_stream_sets_truncated(served: Served) -> None:
    served.twin.push(Replay(FIXTURES / "parse_max_tokens_reached.sse"))
    async with served.client("gpt-4o") as client:
        run = await Agent(client, config=RunConfig(stream=True)).run("json please")
    assert run.truncated and run.output == '{"'


async def test_a_recorded_tool_stream_cut_mid_arguments(served: Served, tmp_path: Path) -> None:
    """``parse_strict_tools.sse`` stopped at its 6th event with ``finish_reason: length``."""
    lines = [ln for ln in (FIXTURES / "parse_strict_tools.sse").read_text().split("\n\n") if ln]
    chunks = [json.loads(line[6:]) for line in lines[:6]]
    sent = "".join(
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for c in chunks
    )
    head = chunks[0]
    cut = {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    body = "\n\n".join([*lines[:6], f"data: {json.dumps(cut)}", "data: [DONE]"]) + "\n\n"
    (tmp_path / "cut.sse").write_text(body)
    served.twin.push(Replay(tmp_path / "cut.sse"))
    response = await ask(served.client("gpt-4o"), hi(tools=[WEATHER]), stream=True)
    (call,) = response.tool_calls
    assert call.arguments == {INVALID_JSON_KEY: sent} and sent.startswith('{"city":"San')
    assert response.stop_reason == "length"


async def test_a_stream_cut_before_done_is_never_an_answer(served: Served) -> None:
    served.twin.push(TwinReply("partial", complete=False))
    with pytest.raises(ProviderError) as info:
        await ask(served.client(), hi(), stream=True)
    assert type(info.value).__name__ == "ResponseInvalid"


# --- strict structured output accepted by the twin -------------------------------------------


class Stop(BaseModel):
    city: str
    nights: int = 1


class Trip(BaseModel):
    title: str
    stops: list[Stop]
    budget: float | None = None
    notes: str = ""


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_native_output_is_strict_and_nulls_restore_defaults(
    served: Served, stream: bool
) -> None:
    reply = {
        "title": "Norway",
        "stops": [{"city": "Oslo", "nights": None}, {"city": "Bergen", "nights": 2}],
        "budget": None,
        "notes": None,
    }
    served.twin.push(TwinReply(json.dumps(reply)))
    config = RunConfig(output_mode="native", stream=stream)
    async with served.client() as client:
        run = await Agent(client, output_type=Trip, config=config).run("plan")
    assert run.output == Trip(
        title="Norway", stops=[Stop(city="Oslo"), Stop(city="Bergen", nights=2)], notes=""
    )
    spec = served.twin.accepted[0]["response_format"]["json_schema"]
    assert spec["strict"] is True and spec["schema"]["additionalProperties"] is False


async def test_a_schema_strict_mode_cannot_take_is_sent_non_strict(served: Served) -> None:
    @tool
    def tally(counts: dict[str, int]) -> str:
        """Sum counts."""
        return str(sum(counts.values()))

    served.twin.push(
        TwinReply(tool_calls=[("tally", {"counts": {"a": 2, "b": 3}})]), TwinReply("5")
    )
    async with served.client() as client:
        run = await Agent(client, tools=[tally]).run("sum")
    assert run.output == "5" and run.turns[0].tool_results[0].content == "5"
    function = served.twin.accepted[0]["tools"][0]["function"]
    assert function["strict"] is False and function["parameters"] == tally.parameters


async def test_usage_counts_cached_and_reasoning_tokens(served: Served) -> None:
    step = TwinReply(
        "x", prompt_tokens=90, completion_tokens=30, cached_tokens=64, reasoning_tokens=24
    )
    served.twin.push(step, step)
    for stream in (False, True):
        response = await ask(served.client(), hi(), stream)
        assert response.usage == Usage(90, 30, cache_read_tokens=64, reasoning_tokens=24)


async def test_through_build_client_nothing_is_retried(served: Served) -> None:
    """``RetryingClient`` (the default wrapper) passes a refused setting and a refusal through:
    the first costs no request, the second exactly one."""
    settings = Settings(provider="openai", model="o3", api="chat", base_url=f"{served.base}/v1")
    client = build_client(settings)
    with pytest.raises(ConfigurationError):
        await client.complete(hi(settings=ModelSettings(top_p=0.5)))
    assert served.twin.requests == []
    served.twin.push(TwinReply(refusal="No."))
    with pytest.raises(ModelRefused):
        await client.complete(hi())
    await client.aclose()
    assert len(served.twin.requests) == 1


def test_an_empty_refusal_is_no_refusal() -> None:
    body: dict[str, Any] = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi", "refusal": ""},
                "finish_reason": "stop",
            }
        ]
    }
    assert parse_completion(body, "", provider="openai", model="m").text == "hi"
    body["choices"][0]["finish_reason"] = "content_filter"
    body["choices"][0]["message"]["content"] = None
    with pytest.raises(ModelRefused) as info:
        parse_completion(body, "", provider="openai", model="m")
    assert (info.value.reason, info.value.text) == ("content_filter", "")


async def test_an_azure_client_named_otherwise_keeps_the_endpoint_rules(served: Served) -> None:
    served.twin.push(TwinReply("a"))
    azure = OpenAIClient("gpt-5-mini", base_url=f"{served.base}/openai/v1", provider="azure")
    await ask(azure, hi(settings=ModelSettings(max_tokens=64)), stream=False)
    assert served.twin.accepted[0]["max_completion_tokens"] == 64
    with pytest.raises(ConfigurationError):
        await ask(OpenAIClient("o3-pro", base_url=served.base, provider="azure"), hi(), False)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_compatible_servers_reasoning_is_shown_and_never_sent_back(stream: bool) -> None:
    """``reasoning_content`` (DeepSeek, vLLM, llama.cpp): a ThinkingPart, ThinkingDelta events,
    and Chat Completions never replays it (it has no field for it)."""
    from agentloop import events as ev
    from agentloop.testing import FakeProviderServer, FakeReply

    async with FakeProviderServer(
        [FakeReply("It is 4.", thinking="2 + 2 is 4."), FakeReply("Still 4.", thinking="Yes.")]
    ) as server:
        client = OpenAIClient("deepseek-reasoner", base_url=server.base_url, api_key="k")
        async with Agent(client, config=RunConfig(stream=stream)) as agent:
            async with agent.stream("2 + 2?") as events:
                seen = [e async for e in events]
            await agent.run("sure?")
        first, second_reply = [m for m in agent.history if m.role == "assistant"]
        assert first.thinking == (ThinkingPart("2 + 2 is 4.", provider="openai"),)
        # the second run is not streamed when stream=False: the JSON body's field decodes too
        assert second_reply.thinking[0].text == "Yes."
        assert "".join(e.text for e in seen if isinstance(e, ev.ThinkingDelta)) == "2 + 2 is 4."
        second = server.received[1].body["messages"]
        assert all("reasoning_content" not in m and "reasoning" not in m for m in second)
