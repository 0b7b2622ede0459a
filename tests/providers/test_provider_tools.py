"""Provider-native tools (SPEC 24) through the public API, against each provider's twin.

Each test pins one bullet: declarations checked where they are made; what a provider or model
lacks refused before anything is sent; server blocks kept raw and sent back unchanged, in
place, on later requests (the twins refuse a turn that altered or lost them); a server tool's
own error soft; ``pause_turn`` continued; events, usage and citations; and an agent without
provider tools sending the very bytes it sent before this feature.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.errors import BadRequestError, ConfigurationError
from agentloop.events import ModelResponded, ProviderToolCalled, ProviderToolReturned
from agentloop.messages import (
    Message,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from agentloop.model import ModelRequest, ModelResponse, ModelSettings, ToolSpec
from agentloop.observers import Observer
from agentloop.provider_tools import (
    CodeExecution,
    FileSearch,
    UserLocation,
    WebFetch,
    WebSearch,
)
from agentloop.providers.anthropic import build_payload as anthropic_payload
from agentloop.providers.fallback import FallbackClient
from agentloop.providers.gemini._encode import build_payload as gemini_payload
from agentloop.providers.openai import OpenAIClient
from agentloop.providers.openai._responses_request import encode_request
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import ScriptedModel

from .conftest import serve_app
from .twins import anthropic as twin
from .twins import anthropic_server_tools as st
from .twins.anthropic import AnthropicTwin, TwinReply
from .twins.gemini import GeminiTwin
from .twins.gemini import Reply as GeminiReply
from .twins.openai_responses import Reply as ResponsesReply
from .twins.openai_responses import ResponsesTwin

KEY = "sk-ant-twin-0123456789"


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def anthropic(url: str, model: str = "claude-sonnet-4-5") -> Any:
    return build_client(
        Settings(provider="anthropic", model=model, api_key=KEY, base_url=url, max_retries=0)
    )


# --- declarations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: WebSearch(max_uses=0),
        lambda: WebSearch(max_uses=True),
        lambda: WebFetch(max_uses=1.5),  # type: ignore[arg-type]
        lambda: WebSearch(allowed_domains=["a.com"], blocked_domains=["b.com"]),
        lambda: WebSearch(allowed_domains=["https://a.com"]),
        lambda: WebFetch(blocked_domains=["a.com/path"]),
        lambda: UserLocation(country="GBR"),
        lambda: FileSearch([]),
        lambda: FileSearch(["vs_1"], max_results=0),
    ],
)
def test_a_bad_declaration_is_refused_where_it_is_made(make: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        make()
    assert caught.value.field == "provider_tools"


def test_declarations_have_their_kinds() -> None:
    kinds = [t.kind for t in (WebSearch(), CodeExecution(), WebFetch(), FileSearch(["vs_1"]))]
    assert kinds == ["web_search", "code_execution", "web_fetch", "file_search"]


def test_the_agent_refuses_what_cannot_be_told_apart_or_approved() -> None:
    model = ScriptedModel([])
    with pytest.raises(ConfigurationError, match="declared twice"):
        Agent(model, provider_tools=[WebSearch(), WebSearch(max_uses=2)])
    with pytest.raises(ConfigurationError, match="web_search"):  # inside tools= too
        Agent(model, tools=[WebSearch(), tool(name="web_search")(lambda q: q)])
    with pytest.raises(ConfigurationError, match="code_interpreter"):
        Agent(model, tools=[tool(name="code_interpreter")(lambda q: q)],
              provider_tools=[CodeExecution()])  # fmt: skip
    with pytest.raises(ConfigurationError, match="deferred"):
        WebSearch().deferred()
    with pytest.raises(ConfigurationError, match="approval"):
        WebSearch().approval_required()
    with pytest.raises(TypeError, match="provider_tools="):
        Agent(model, builtin_tools=[WebSearch()])  # type: ignore[call-overload]
    agent = Agent(model, tools=[look, WebSearch()])  # a test double takes them all
    assert [s.name for s in agent.registry.specs()] == ["look"]


def test_a_client_that_says_nothing_is_refused_not_trusted() -> None:
    class Mine:
        model, provider = "m", "mine"

        async def complete(self, request: ModelRequest) -> Any: ...

    with pytest.raises(ConfigurationError, match="check_provider_tools"):
        Agent(Mine(), provider_tools=[WebSearch()])  # type: ignore[call-overload]


ANTHROPIC = Settings(provider="anthropic", model="claude-sonnet-4-5", api_key=KEY)
RESPONSES = Settings(provider="openai", model="gpt-5", api_key="sk-x", api="responses")
CHAT = Settings(provider="openai", model="gpt-5", api_key="sk-x", api="chat")
GEMINI3 = Settings(provider="gemini", model="gemini-3-flash", api_key="g-x")
GEMINI25 = Settings(provider="gemini", model="gemini-2.5-pro", api_key="g-x")
OPENROUTER = Settings(provider="openrouter", model="openai/gpt-5", api_key="sk-or")


@pytest.mark.parametrize(
    ("settings", "tools", "words"),
    [
        (ANTHROPIC, [FileSearch(["vs_1"])], "FileSearch (file_search) is not available on anthr"),
        (RESPONSES, [WebFetch()], "WebFetch (web_fetch) is not available on openai"),
        (RESPONSES, [WebSearch(blocked_domains=["a.com"])], "WebSearch.blocked_domains"),
        (RESPONSES, [WebSearch(max_uses=2)], "WebSearch.max_uses"),
        (GEMINI3, [WebSearch(max_uses=2)], "WebSearch.max_uses is not available on gemini"),
        (GEMINI3, [FileSearch(["vs_1"])], "OpenAI's Responses API only"),
        (CHAT, [WebSearch()], 'api="responses"'),
        (OPENROUTER, [WebSearch()], "openrouter has no provider tools"),
        (Settings(provider="anthropic", model="claude-3-haiku-20240307", api_key=KEY),
         [WebSearch()], "claude-3-haiku-20240307"),
        (GEMINI25, [WebSearch()], "beside function tools"),
    ],
)  # fmt: skip
def test_what_a_provider_or_model_lacks_fails_before_sending(
    settings: Settings, tools: list[Any], words: str
) -> None:
    client = build_client(settings)
    with pytest.raises(
        ConfigurationError, match=words.replace("(", r"\(").replace(")", r"\)")
    ) as e:
        Agent(client, tools=[look], provider_tools=tools)
    assert e.value.field == "provider_tools"


def test_final_result_counts_as_a_function_tool_on_gemini_2() -> None:
    with pytest.raises(ConfigurationError, match="final_result included"):
        Agent(build_client(GEMINI25), output_type=int, provider_tools=[WebSearch()])
    Agent(build_client(GEMINI25), provider_tools=[WebSearch()])  # alone it is fine


def test_every_model_of_a_fallback_chain_is_checked_at_construction() -> None:
    chain = FallbackClient([build_client(ANTHROPIC), build_client(CHAT)])
    with pytest.raises(ConfigurationError, match='api="responses"'):
        Agent(chain, provider_tools=[WebSearch()])


def test_the_adapters_refuse_it_too_when_asked_directly() -> None:
    request = ModelRequest(messages=[Message.user("x")], provider_tools=[FileSearch(["vs_1"])])
    with pytest.raises(ConfigurationError):
        anthropic_payload(request, model="claude-sonnet-4-5", stream=False)
    with pytest.raises(ConfigurationError):
        gemini_payload(request, "gemini-3-flash")


# --- no provider tools: not a byte changes ---------------------------------------------------


def _request(**more: Any) -> ModelRequest:
    spec = ToolSpec(
        "look",
        "Look something up.",
        {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
            "additionalProperties": False,
        },
    )
    msgs = [
        Message.user("hi"),
        Message.assistant("let me look", [ToolCallPart("c1", "look", {"q": "x"})]),
        Message.tool_results([ToolResultPart("c1", "look", "found x")]),
    ]
    return ModelRequest(messages=msgs, tools=[spec], system="Be brief.", **more)


BEFORE = {  # sha256 of each payload, computed with the code before SPEC 24 landed
    "anthropic": "2aa27b9c1f670dd0ed6261b3e11da939ddb1d82a58be5bfee35c3b8712bc2791",
    "gemini": "64b9bcb9bbecaab3aec2d63894adb04c23f1590be7a26f067f9e41ffb1523b62",
    "responses": "d3bfa67cbcfa08711a1902161a6664b4a222d54dc5938e7e75394f95238b1713",
    "chat": "9df814dbd326def2a974cd1e8220ecdb4fc82d8b4e5e126eff403ecd1dccc672",
}


def test_declaring_none_sends_the_same_bytes_as_before() -> None:
    request = _request()
    payloads = {
        "anthropic": anthropic_payload(request, model="claude-sonnet-4-5", stream=False),
        "gemini": gemini_payload(request, "gemini-3-flash"),
        "responses": encode_request(request, "gpt-5", include_reasoning=True),
    }
    digests = {k: hashlib.sha256(json.dumps(v).encode()).hexdigest() for k, v in payloads.items()}
    chat = OpenAIClient("gpt-4o", api_key="sk-test", base_url="https://api.openai.com/v1")
    digests["chat"] = hashlib.sha256(chat._payload(request, "gpt-4o", False)[0]).hexdigest()
    assert digests == BEFORE


def test_import_agentloop_loads_no_declarations() -> None:
    code = (
        "import sys, agentloop, agentloop.providers\n"
        "assert 'agentloop.provider_tools' not in sys.modules, 'declarations loaded'\n"
        "assert not any(m.startswith(('botocore', 'google.auth')) for m in sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- Anthropic: server blocks go back unchanged and in place ---------------------------------


class Events(Observer):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_event(self, event: Any) -> None:
        self.seen.append(event)


def _search_turn(n: int) -> TwinReply:
    call = f"srvtoolu_{n}"
    return TwinReply(
        [
            st.server_tool_use("web_search", {"query": "agentloop"}, call),
            st.web_search_result(call, [("https://a.example", "A")]),
            st.cited_text("A says it loops.", "https://a.example", "A"),
            twin.tool_use("look", {"q": "x"}),
        ],
        "tool_use",
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_web_search_turn_round_trips_twice_on_anthropic(stream: bool) -> None:
    events = Events()
    script = [_search_turn(1), TwinReply([twin.text("It loops.")]), TwinReply([twin.text("Yes.")])]
    async with AnthropicTwin(script) as server:
        agent = Agent(anthropic(server.url), tools=[look], provider_tools=[WebSearch(max_uses=3)],
                      config=RunConfig(stream=stream), observers=[events])  # fmt: skip
        first = await agent.run("does it loop?")
        await agent.run("sure?")
    assert server.rejected == [] and first.output == "It loops."
    served = server.requests[1]["messages"][1]["content"]
    for later in server.requests[1:]:  # the same blocks, unchanged, in place, every time
        assert [b for b in later["messages"][1]["content"] if st.is_server(b)] == [
            b for b in served if st.is_server(b)
        ]
    assert served[0]["type"] == "server_tool_use" and served[2]["citations"][0]["encrypted_index"]
    assert server.requests[0]["tools"][-1]["type"] == "web_search_20250305"
    assert first.usage.provider_tool_calls == {"web_search": 1}
    message = first.conversation[1] if hasattr(first, "conversation") else agent.history[1]
    call, result, text = message.parts[:3]
    assert isinstance(call, ProviderToolCallPart) and call.raw == served[0]
    assert (
        isinstance(result, ProviderToolResultPart)
        and result.content[0]["url"] == "https://a.example"
    )
    assert isinstance(text, TextPart) and text.citations[0].url == "https://a.example"
    kinds = [
        type(e)
        for e in events.seen
        if isinstance(e, ProviderToolCalled | ProviderToolReturned | ModelResponded)
    ]
    assert kinds[:3] == [ProviderToolCalled, ProviderToolReturned, ModelResponded]


async def test_an_altered_or_lost_server_block_is_the_providers_400() -> None:
    async with AnthropicTwin([_search_turn(1)]) as server:
        client = anthropic(server.url)
        reply = await client.complete(
            ModelRequest(messages=[Message.user("x")], provider_tools=[WebSearch()])
        )
        result = reply.message.parts[1]
        assert isinstance(result, ProviderToolResultPart) and result.raw is not None
        bad = dict(
            result.raw, content=[dict(result.raw["content"][0], encrypted_content="Eqforged")]
        )
        forged = ProviderToolResultPart(
            result.call_id, result.name, result.content, provider="anthropic", raw=bad
        )
        altered = Message("assistant", (reply.message.parts[0], forged, *reply.message.parts[2:]))
        lost = Message("assistant", (reply.message.parts[0], *reply.message.parts[2:]))
        for sent in (altered, lost):
            history = [
                Message.user("x"),
                sent,
                Message.tool_results([ToolResultPart(reply.tool_calls[0].id, "look", "ok")]),
            ]
            with pytest.raises(BadRequestError):
                await client.complete(ModelRequest(messages=history, provider_tools=[WebSearch()]))
        await client.aclose()
    assert "Invalid `encrypted_content`" in server.rejected[0]
    assert "without a corresponding `web_search_tool_result`" in server.rejected[1]


async def test_another_provider_gets_none_of_them() -> None:
    part = ProviderToolCallPart(
        "s1", "web_search", {}, provider="anthropic", raw={"type": "server_tool_use"}
    )
    history = [Message.user("x"), Message("assistant", (part, TextPart("hi"))), Message.user("y")]
    body = gemini_payload(ModelRequest(messages=history), "gemini-3-flash")
    assert body["contents"][1]["parts"] == [{"text": "hi"}]
    body = encode_request(ModelRequest(messages=history), "gpt-5")
    assert all(item.get("type") != "server_tool_use" for item in body["input"])


@pytest.mark.parametrize("stream", [False, True])
async def test_pause_turn_is_continued_not_paused(stream: bool) -> None:
    paused = TwinReply([st.server_tool_use("web_search", {"query": "q"}, "srvtoolu_p"),
                        st.web_search_result("srvtoolu_p", [("https://b.example", "B")])],
                       "pause_turn")  # fmt: skip
    async with AnthropicTwin([paused, TwinReply([twin.text("Found B.")])]) as server:
        agent = Agent(
            anthropic(server.url), provider_tools=[WebSearch()], config=RunConfig(stream=stream)
        )
        run = await agent.run("find B")
    assert server.rejected == [] and run.output == "Found B." and not run.paused
    assert [t.stop_reason for t in run.turns] == ["pause_turn", "end_turn"]
    last = server.requests[1]["messages"][-1]
    sent = [{k: v for k, v in b.items() if k != "cache_control"} for b in last["content"]]
    assert last["role"] == "assistant" and sent == list(paused.blocks)  # unchanged, last


async def test_pause_turn_is_continued_without_provider_tools_too() -> None:
    async with AnthropicTwin(
        [TwinReply([twin.text("Part one")], "pause_turn"), TwinReply([twin.text(" and two.")])]
    ) as server:
        run = await Agent(anthropic(server.url)).run("go")
    assert len(server.requests) == 2 and server.rejected == []
    assert run.output == "Part one and two."  # one answer: the turn it continues, then its own
    assert [t.text for t in run.turns] == ["Part one", " and two."]
    last = server.requests[1]["messages"][-1]
    assert last["role"] == "assistant" and last["content"][0]["text"] == "Part one"


async def test_a_server_tools_own_error_is_soft() -> None:
    failed = TwinReply([st.server_tool_use("web_search", {"query": "q"}, "srvtoolu_e"),
                        st.search_error("srvtoolu_e", "max_uses_exceeded"),
                        twin.text("I could not search.")])  # fmt: skip
    async with AnthropicTwin([failed]) as server:
        run = await Agent(anthropic(server.url), provider_tools=[WebSearch()]).run("q")
    result = run.turns and Agent  # the run finished: the error did not end it
    assert result and run.output == "I could not search."
    part = next(p for p in run.conversation[-1].parts if isinstance(p, ProviderToolResultPart))
    assert part.is_error and part.error_code == "max_uses_exceeded"
    assert run.usage.provider_tool_calls == {"web_search": 1}
    assert all(t.tool_calls == [] for t in run.turns)  # function calls only


async def test_code_execution_and_web_fetch_send_their_beta_headers() -> None:
    seen: list[str] = []

    def step(body: Any) -> TwinReply:
        return TwinReply([twin.text("ok")])

    async with AnthropicTwin([step]) as server:
        client = anthropic(server.url)
        request = ModelRequest(
            messages=[Message.user("x")],
            provider_tools=[CodeExecution(), WebFetch(allowed_domains=["a.example"])],
        )
        await client.complete(request)
        await client.aclose()
        seen = [t["type"] for t in server.requests[0]["tools"]]
    assert server.rejected == [] and seen == ["code_execution_20250825", "web_fetch_20250910"]


def test_anthropic_wire_form_of_web_search() -> None:
    location = UserLocation(city="Leeds", country="GB", timezone="Europe/London")
    request = ModelRequest(
        messages=[Message.user("x")],
        provider_tools=[
            WebSearch(max_uses=2, allowed_domains=["a.example"], user_location=location)
        ],
    )
    body = anthropic_payload(request, model="claude-sonnet-4-5", stream=False)
    entry = {k: v for k, v in body["tools"][0].items() if k != "cache_control"}
    assert entry == {"type": "web_search_20250305", "name": "web_search", "max_uses": 2,
                     "allowed_domains": ["a.example"],
                     "user_location": {"type": "approximate", "city": "Leeds", "country": "GB",
                                       "timezone": "Europe/London"}}  # fmt: skip


# --- OpenAI Responses -------------------------------------------------------------------------

SEARCH_ITEM = {"type": "web_search_call", "id": "ws_1", "status": "completed",
               "action": {"type": "search", "query": "agentloop"}}  # fmt: skip
CITE = {"type": "url_citation", "url": "https://a.example", "title": "A", "start_index": 0,
        "end_index": 4}  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
async def test_a_web_search_turn_round_trips_twice_on_responses(stream: bool) -> None:
    state = ResponsesTwin(
        ResponsesReply(
            text="Look.", calls=[("look", {"q": "x"})], hosted=[SEARCH_ITEM], annotations=[CITE]
        ),
        ResponsesReply(text="It loops."),
        ResponsesReply(text="Yes."),
    )
    async with serve_app(state.app()) as url:
        client = build_client(
            Settings(
                provider="openai",
                model="gpt-5",
                api_key="twin-key",
                base_url=url + "/v1",
                api="responses",
                max_retries=0,
            )
        )
        agent = Agent(
            client,
            tools=[look],
            provider_tools=[WebSearch(allowed_domains=["a.example"])],
            config=RunConfig(stream=stream),
        )
        first = await agent.run("q")
        await agent.run("sure?")
    bodies = state.accepted
    assert len(bodies) == 3 and first.output == "It loops."
    for later in bodies[1:]:
        assert SEARCH_ITEM in later["input"]
    assert bodies[0]["tools"][-1] == {
        "type": "web_search",
        "filters": {"allowed_domains": ["a.example"]},
    }
    assert first.usage.provider_tool_calls == {"web_search": 1}
    text = next(p for p in agent.history[1].parts if isinstance(p, TextPart))
    assert text.citations[0].url == "https://a.example" and text.citations[0].end == 4


def test_a_failed_hosted_call_is_a_soft_error_part() -> None:
    from agentloop.providers.openai._responses_reply import parse_response

    item = {"type": "code_interpreter_call", "id": "ci_1", "status": "failed", "code": "1/0"}
    body = {
        "status": "completed",
        "output": [item],
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    reply = parse_response(body, "", provider="openai", model="gpt-5")
    call, result = reply.message.parts
    assert (
        isinstance(call, ProviderToolCallPart)
        and call.raw == item
        and call.name == "code_execution"
    )
    assert (
        isinstance(result, ProviderToolResultPart)
        and result.is_error
        and result.error_code == "failed"
    )
    assert reply.usage.provider_tool_calls == {"code_execution": 1}


def test_responses_wire_form_of_file_search_and_code() -> None:
    request = ModelRequest(
        messages=[Message.user("x")],
        provider_tools=[FileSearch(["vs_1"], max_results=3), CodeExecution()],
    )
    body = encode_request(request, "gpt-5")
    assert body["tools"] == [
        {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 3},
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ]


# --- Gemini -----------------------------------------------------------------------------------

CODE = {"executableCode": {"language": "PYTHON", "code": "print(2+2)"}}
RESULT = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_code_execution_turn_round_trips_twice_on_gemini(stream: bool) -> None:
    state = GeminiTwin(
        GeminiReply(parts=[CODE, RESULT, {"text": "It is 4."}]),
        GeminiReply(parts=[{"text": "Still 4."}]),
    )
    async with serve_app(state.app()) as url:
        client = build_client(
            Settings(
                provider="gemini",
                model="gemini-3-flash",
                api_key="twin-key",
                base_url=url + "/v1beta",
                max_retries=0,
            )
        )
        agent = Agent(
            client, tools=[look], provider_tools=[CodeExecution()], config=RunConfig(stream=stream)
        )
        first = await agent.run("2+2?")
        await agent.run("sure?")
    bodies = [r.body for r in state.accepted]
    assert first.output == "It is 4." and len(bodies) == 2
    assert bodies[1]["contents"][1]["parts"][:2] == [CODE, RESULT]
    assert bodies[0]["tools"][-1] == {"code_execution": {}}
    assert bodies[0]["toolConfig"] == {"includeServerSideToolInvocations": True}
    assert first.usage.provider_tool_calls == {"code_execution": 1}


def test_gemini_grounding_is_a_search_with_citations() -> None:
    from agentloop.providers.gemini.client import parse_response

    metadata = {
        "webSearchQueries": ["agentloop"],
        "groundingChunks": [{"web": {"uri": "https://a.example", "title": "A"}}],
        "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 8, "text": "It loops"},
                               "groundingChunkIndices": [0]}],
        "searchEntryPoint": {"renderedContent": "<div>search</div>"},
    }  # fmt: skip
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "It loops."}]},
                            "finishReason": "STOP", "groundingMetadata": metadata}]}  # fmt: skip
    reply = parse_response(body)
    call, result, text = reply.message.parts
    assert isinstance(call, ProviderToolCallPart) and call.arguments == {"query": "agentloop"}
    assert isinstance(result, ProviderToolResultPart) and result.raw is not None
    assert result.raw["searchEntryPoint"]["renderedContent"] == "<div>search</div>"
    assert isinstance(text, TextPart) and text.citations[0].url == "https://a.example"
    assert (text.citations[0].start, text.citations[0].end) == (0, 8)
    assert reply.usage.provider_tool_calls == {"web_search": 1}
    history = [Message.user("x"), reply.message, Message.user("y")]
    sent = gemini_payload(ModelRequest(messages=history), "gemini-3-flash")
    assert sent["contents"][1]["parts"] == [{"text": "It loops."}]  # grounding is not content


# --- the transcript keeps them ----------------------------------------------------------------


def test_parts_citations_and_counts_survive_to_dict() -> None:
    from agentloop.messages import Citation

    message = Message("assistant", (
        ProviderToolCallPart("s1", "web_search", {"query": "q"}, provider="anthropic", raw={"type": "server_tool_use", "id": "s1"}),  # noqa: E501
        ProviderToolResultPart("s1", "web_search", [{"url": "u"}], provider="anthropic", raw={"type": "web_search_tool_result"}, is_error=True, error_code="unavailable"),  # noqa: E501
        TextPart("cited", citations=(Citation("https://a.example", "A", "cited", 0, 5, raw={"type": "x"}),)),  # noqa: E501
    ))  # fmt: skip
    again = Message.from_dict(json.loads(json.dumps(message.to_dict())))
    assert again == message and again.parts[0].raw == message.parts[0].raw  # type: ignore[union-attr]
    usage = Usage(1, 2, provider_tool_calls={"web_search": 2})
    assert Usage.from_dict(usage.to_dict()) == usage
    assert (usage + usage).provider_tool_calls == {"web_search": 4}
    assert Usage(1, 2).to_dict() == {"input_tokens": 1, "output_tokens": 2}


async def test_a_web_search_turn_round_trips_twice_on_gemini() -> None:
    metadata = {"webSearchQueries": ["agentloop"],
                "groundingChunks": [{"web": {"uri": "https://a.example", "title": "A"}}],
                "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 8},
                                       "groundingChunkIndices": [0]}]}  # fmt: skip
    state = GeminiTwin(
        GeminiReply(parts=[{"text": "It loops."}], grounding=metadata),
        GeminiReply(parts=[{"text": "Yes."}]),
        GeminiReply(parts=[{"text": "Sure."}]),
    )
    async with serve_app(state.app()) as url:
        client = build_client(
            Settings(
                provider="gemini",
                model="gemini-3-flash",
                api_key="twin-key",
                base_url=url + "/v1beta",
                max_retries=0,
            )
        )
        agent = Agent(client, provider_tools=[WebSearch()])
        first = await agent.run("q")
        await agent.run("sure?")
        await agent.run("really?")
    bodies = [r.body for r in state.accepted]
    assert len(bodies) == 3 and bodies[0]["tools"] == [{"google_search": {}}]
    assert bodies[2]["contents"][1] == bodies[1]["contents"][1]  # the same turn, unchanged
    assert first.usage.provider_tool_calls == {"web_search": 1}


async def test_the_gemini_twin_enforces_the_built_in_rules() -> None:
    from .twins import gemini_builtin

    state = GeminiTwin(GeminiReply(parts=[CODE, RESULT, {"text": "4"}]))
    async with serve_app(state.app()) as url:
        client = build_client(
            Settings(
                provider="gemini",
                model="gemini-3-flash",
                api_key="twin-key",
                base_url=url + "/v1beta",
                max_retries=0,
            )
        )
        spec = ToolSpec("look", "Look.", {"type": "object", "properties": {}})
        unflagged = ModelRequest(
            messages=[Message.user("x")],
            tools=[spec],
            provider_tools=[CodeExecution()],
            settings=ModelSettings(
                extra_body={"toolConfig": {"includeServerSideToolInvocations": False}}
            ),
        )
        with pytest.raises(BadRequestError, match="include_server_side_tool_invocations"):
            await client.complete(unflagged)
        reply = await client.complete(
            ModelRequest(messages=[Message.user("x")], provider_tools=[CodeExecution()])
        )
        code = reply.message.parts[0]
        assert isinstance(code, ProviderToolCallPart) and code.raw == CODE
        forged = ProviderToolCallPart(
            code.id,
            code.name,
            {},
            provider="gemini",
            raw={"executableCode": {"language": "PYTHON", "code": "print(5)"}},
        )
        history = [
            Message.user("x"),
            Message("assistant", (forged, *reply.message.parts[1:])),
            Message.user("y"),
        ]
        with pytest.raises(BadRequestError, match="not one the twin served"):
            await client.complete(ModelRequest(messages=history, provider_tools=[CodeExecution()]))
        await client.aclose()
    assert gemini_builtin.WITH_FUNCTIONS_2X.startswith("Tool use")


def test_provider_tool_calls_are_priced_per_call() -> None:
    from agentloop.pricing import PROVIDER_TOOL_PRICES, Price, estimate_cost

    usage = Usage(1_000_000, 0, provider_tool_calls={"web_search": 3})
    own = {"claude-x": Price(1.0, 0.0, per_call={"web_search": 0.02})}
    assert estimate_cost(usage, "claude-x", prices=own) == pytest.approx(1.06)
    listed = {"claude-x": Price(1.0, 0.0)}
    each = PROVIDER_TOOL_PRICES["anthropic"]["web_search"]
    assert estimate_cost(usage, "claude-x", prices=listed) == pytest.approx(1.0 + 3 * each)
    unpriced = Usage(1, 0, provider_tool_calls={"code_execution": 1})  # billed by the hour
    assert estimate_cost(unpriced, "claude-x", provider="anthropic", prices=listed) is None
    with pytest.raises(ConfigurationError):
        Price(1.0, 1.0, per_call={"web_search": -1})


def test_the_docs_page_prints_what_it_says(tmp_path: Any) -> None:
    """Every example of docs/provider-tools.md prints the text block that follows it."""
    import os
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "provider-tools.md"
    pairs = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", page.read_text(), re.DOTALL)
    assert len(pairs) == 4
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for source, expected in pairs:
        done = subprocess.run([sys.executable, "-c", source], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected


def test_server_blocks_count_toward_the_context() -> None:
    from agentloop.tokens import message_chars

    raw = {
        "type": "web_search_tool_result",
        "tool_use_id": "s1",
        "content": [{"encrypted_content": "E" * 400}],
    }
    result = ProviderToolResultPart("s1", "web_search", [], provider="anthropic", raw=raw)
    assert message_chars(Message("assistant", (result, TextPart("hi")))) > 400


def test_more_wire_forms_and_refusals() -> None:
    location = UserLocation(country="GB", city="Leeds")
    request = ModelRequest(
        messages=[Message.user("x")], provider_tools=[WebSearch(user_location=location)]
    )
    assert encode_request(request, "gpt-5")["tools"] == [
        {
            "type": "web_search",
            "user_location": {"type": "approximate", "city": "Leeds", "country": "GB"},
        }
    ]
    fetch = ModelRequest(messages=[Message.user("x")], provider_tools=[WebFetch()])
    assert gemini_payload(fetch, "gemini-3-flash")["tools"] == [{"url_context": {}}]
    ollama = build_client(Settings(provider="ollama", model="llama3.2"))
    with pytest.raises(ConfigurationError, match="ollama has no provider tools"):
        Agent(ollama, provider_tools=[WebSearch()])


def test_a_failed_code_run_on_gemini_is_soft() -> None:
    from agentloop.providers.gemini.client import parse_response

    failed = {"codeExecutionResult": {"outcome": "OUTCOME_FAILED", "output": "ZeroDivisionError"}}
    parts = [CODE, failed, {"text": "Oops."}]
    body = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}
    call, result, _ = parse_response(body).message.parts
    assert isinstance(result, ProviderToolResultPart) and result.is_error
    assert result.error_code == "OUTCOME_FAILED" and isinstance(call, ProviderToolCallPart)
    assert result.call_id == call.id


def test_budget_tool_calls_and_hooks_see_function_calls_only() -> None:
    import pickle

    from agentloop.safety import Budget

    searches = [
        p for i in range(5) for p in (
            ProviderToolCallPart(f"s{i}", "web_search", {"query": str(i)}, provider="anthropic"),
            ProviderToolResultPart(f"s{i}", "web_search", [], provider="anthropic"),
        )
    ]  # fmt: skip
    many = ModelResponse(
        Message("assistant", (*searches, TextPart("done"))),
        usage=Usage(1, 1, provider_tool_calls={"web_search": 5}),
        stop_reason="end_turn",
    )  # fmt: skip
    agent = Agent(ScriptedModel([many]), provider_tools=[WebSearch()],
                  config=RunConfig(budget=Budget(tool_calls=1)))  # fmt: skip
    run = agent.run_sync("search a lot")
    assert run.output == "done" and run.usage.provider_tool_calls == {"web_search": 5}
    assert pickle.loads(pickle.dumps(run.conversation[-1])) == run.conversation[-1]


def test_a_wire_without_provider_tools_refuses_them_by_name() -> None:
    from agentloop.providers._provider_tools import refuse_all

    with pytest.raises(
        ConfigurationError,
        match=r"WebSearch \(web_search\) is not available on bedrock \(Converse\) for m1: use",
    ):
        refuse_all([WebSearch()], "bedrock (Converse)", "m1", "use anthropic or vertex")
    refuse_all([], "bedrock (Converse)", "m1", "")  # nothing declared: nothing to refuse


async def test_a_forged_citation_is_refused_by_the_twin() -> None:
    from agentloop.messages import Citation

    async with AnthropicTwin([_search_turn(1)]) as server:
        client = anthropic(server.url)
        reply = await client.complete(
            ModelRequest(messages=[Message.user("x")], provider_tools=[WebSearch()])
        )
        text = reply.message.parts[2]
        assert isinstance(text, TextPart) and text.citations[0].raw is not None
        raw = {**text.citations[0].raw, "encrypted_index": "forged"}
        forged = TextPart(text.text, citations=(Citation(text.citations[0].url, raw=raw),))
        parts = (*reply.message.parts[:2], forged, *reply.message.parts[3:])
        results = Message.tool_results([ToolResultPart(reply.tool_calls[0].id, "look", "ok")])
        history = [Message.user("x"), Message("assistant", parts), results]
        with pytest.raises(BadRequestError, match="encrypted_index"):
            await client.complete(ModelRequest(messages=history, provider_tools=[WebSearch()]))
        await client.aclose()
