"""The fault-injecting fake server: scripts (Python and files), recording, every fault, strict
paths and models, clean shutdown, and a command that prints no tracebacks.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest

from agentloop.errors import (
    ConfigurationError,
    InsufficientCredits,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    ResponseInvalid,
)
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault, load_fake_script

REQUEST = ModelRequest(messages=(Message.user("hi"),))


async def test_script_then_default_then_exhaustion() -> None:
    async with FakeProviderServer([FakeReply("one"), FakeReply("two")]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            assert (await client.complete(REQUEST)).text == "one"
            assert (await client.complete(REQUEST)).text == "two"
            with pytest.raises(ProviderUnavailable, match="script exhausted"):
                await client.complete(REQUEST)
            server.default = FakeReply("fallback")
            assert (await client.complete(REQUEST)).text == "fallback"
        finally:
            await client.aclose()
    assert len(server.requests) == 4
    assert server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert server.received[0].path == "/v1/chat/completions"


async def test_callable_steps_see_the_request_body() -> None:
    def echo(body: Mapping[str, Any]) -> FakeReply:
        return FakeReply(f"you said {body['messages'][-1]['content']}")

    async with FakeProviderServer(default=echo) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            assert (await client.complete(REQUEST)).text == "you said hi"
        finally:
            await client.aclose()


async def test_streamed_tool_calls_round_trip() -> None:
    reply = FakeReply(tool_calls=[FakeToolCall("read_file", {"path": "a.txt"})])
    async with FakeProviderServer([reply]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            events = [e async for e in client.stream(REQUEST)]
        finally:
            await client.aclose()
    response = events[-1].response
    assert response is not None and response.tool_calls[0].arguments == {"path": "a.txt"}
    assert response.tool_calls[0].id == "call_fake_1_0"


async def test_status_fault_with_custom_body_and_headers() -> None:
    fault = Fault.http(402, "no money", {"x-extra": "1"})
    async with FakeProviderServer([fault]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            with pytest.raises(InsufficientCredits) as info:
                await client.complete(REQUEST)
        finally:
            await client.aclose()
    assert info.value.body == "no money" and info.value.request_id == "req_fake_1"


async def test_raw_http_view_of_faults() -> None:
    async with (
        FakeProviderServer(
            [
                Fault.redirect("https://other.example/x", 307),
                Fault.rate_limit(0.5),
                Fault.malformed(),
            ]
        ) as server,
        aiohttp.ClientSession() as session,
    ):
        url = f"{server.base_url}/chat/completions"
        async with session.post(url, json={}, allow_redirects=False) as first:
            assert first.status == 307 and first.headers["Location"] == "https://other.example/x"
        async with session.post(url, json={}) as second:
            assert second.status == 429 and second.headers["Retry-After"] == "0.5"
        async with session.post(url, json={}) as third:
            assert third.status == 200 and await third.text() == '{"choices": ['


async def test_hanging_request_is_released_on_close() -> None:
    server = await FakeProviderServer([Fault.hang(30)]).start()
    client = OpenAIClient("m", base_url=server.base_url, timeout=5)
    task = asyncio.create_task(client.complete(REQUEST))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    await server.close()
    with pytest.raises(ProviderError):
        await task
    await client.aclose()
    assert time.monotonic() - started < 2


async def test_hang_gives_a_read_timeout() -> None:
    async with FakeProviderServer([Fault.hang(5)]) as server:
        client = OpenAIClient("m", base_url=server.base_url, timeout=0.2)
        try:
            with pytest.raises(ProviderTimeout):
                await client.complete(REQUEST)
        finally:
            await client.aclose()


async def test_reset_then_recovery_on_the_next_request() -> None:
    async with FakeProviderServer([Fault.reset(), FakeReply("back")]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            with pytest.raises(ProviderUnavailable):
                await client.complete(REQUEST)
            assert (await client.complete(REQUEST)).text == "back"
        finally:
            await client.aclose()


async def test_truncated_stream_has_no_done() -> None:
    async with FakeProviderServer([Fault.truncate(FakeReply("x" * 80))]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            seen = []
            with pytest.raises(ResponseInvalid):
                async for event in client.stream(REQUEST):
                    seen.append(event.kind)
        finally:
            await client.aclose()
    assert "done" not in seen and "text_delta" in seen


async def test_slow_chunks_are_paced() -> None:
    async with FakeProviderServer([FakeReply("abcdefgh" * 3, chunk_delay=0.05)]) as server:
        client = OpenAIClient("m", base_url=server.base_url)
        try:
            started = time.monotonic()
            events = [e async for e in client.stream(REQUEST)]
        finally:
            await client.aclose()
    assert time.monotonic() - started >= 0.2 and events[-1].kind == "done"


async def test_port_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        _ = FakeProviderServer().base_url


async def test_anthropic_messages_format() -> None:
    from agentloop.providers.anthropic import AnthropicClient

    call = FakeToolCall("read_file", {"path": "a.txt"}, id="toolu_1")
    script: list[FakeReply | Fault] = [
        FakeReply("hello", input_tokens=7, output_tokens=2),
        FakeReply("let me look", tool_calls=[call]),
        Fault.truncate(FakeReply("cut " * 20)),
    ]
    async with FakeProviderServer(script) as server:
        client = AnthropicClient("claude-test", api_key="k-1234", base_url=server.root_url)
        try:
            first = await client.complete(REQUEST)
            events = [e async for e in client.stream(REQUEST)]
            with pytest.raises(ResponseInvalid):
                async for _ in client.stream(REQUEST):
                    pass
        finally:
            await client.aclose()
    assert first.text == "hello" and (first.usage.input_tokens, first.usage.output_tokens) == (7, 2)
    response = events[-1].response
    assert response is not None and response.text == "let me look"
    assert [(c.id, c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("toolu_1", "read_file", {"path": "a.txt"})
    ]
    assert server.received[0].path == "/v1/messages"


async def test_the_responses_format_json_sse_cuts_and_faults() -> None:
    from agentloop.errors import ModelRefused
    from agentloop.providers.responses import OpenAIResponsesClient

    call = FakeToolCall("read_file", {"path": "a.txt"})
    script: list[FakeReply | Fault] = [
        FakeReply("hello", tool_calls=[call], input_tokens=7, output_tokens=2),
        FakeReply("hello", tool_calls=[call], thinking="plan", thinking_signature="enc"),
        FakeReply("Sure", refusal="I can't."),
        FakeReply("long", finish_reason="length"),
        FakeReply("rude", finish_reason="content_filter"),
        Fault.truncate(FakeReply("cut " * 20)),
        Fault.malformed(),
    ]
    async with FakeProviderServer(script) as server:
        async with OpenAIResponsesClient("m", base_url=server.base_url) as client:
            first = await client.complete(REQUEST)
            events = [e async for e in client.stream(REQUEST)]
            with pytest.raises(ModelRefused, match="I can't"):
                await client.complete(REQUEST)
            assert (await client.complete(REQUEST)).stop_reason == "max_output_tokens"
            with pytest.raises(ModelRefused, match="content_filter"):
                await client.complete(REQUEST)
            for _ in range(2):
                with pytest.raises(ResponseInvalid):
                    async for _event in client.stream(REQUEST):
                        pass
    assert first.text == "hello" and first.tool_calls[0].arguments == {"path": "a.txt"}
    assert (first.usage.input_tokens, first.usage.output_tokens) == (7, 2)
    streamed = events[-1].response
    assert streamed is not None and streamed.message.thinking[0].signature == "enc"
    assert [e.kind for e in events].count("thinking_delta") == 1
    assert server.received[0].path == "/v1/responses"


async def test_chat_and_anthropic_replies_carry_reasoning_and_refusals() -> None:
    reply = FakeReply("ok", thinking="plan", thinking_signature="sig-1")
    refusal = FakeReply(refusal="No.")
    script: list[FakeReply | Fault] = [reply, reply, refusal, refusal, reply, reply, refusal]
    async with FakeProviderServer(script) as server, aiohttp.ClientSession() as session:
        chat, messages = f"{server.base_url}/chat/completions", f"{server.root_url}/v1/messages"
        async with session.post(chat, json={}) as answer:
            message = (await answer.json())["choices"][0]["message"]
        assert (message["reasoning_content"], message["content"]) == ("plan", "ok")
        async with session.post(chat, json={"stream": True}) as answer:
            assert '"reasoning_content": "plan"' in await answer.text()
        async with session.post(chat, json={}) as answer:
            message = (await answer.json())["choices"][0]["message"]
        assert (message["refusal"], message["content"]) == ("No.", None)
        async with session.post(chat, json={"stream": True}) as answer:
            assert '"refusal": "No."' in await answer.text()
        async with session.post(messages, json={}) as answer:
            blocks = (await answer.json())["content"]
        assert blocks[0] == {"type": "thinking", "thinking": "plan", "signature": "sig-1"}
        async with session.post(messages, json={"stream": True}) as answer:
            assert '"signature_delta", "signature": "sig-1"' in await answer.text()
        async with session.post(messages, json={"stream": True}) as answer:
            text = await answer.text()
        assert '"stop_reason": "refusal"' in text and '"text": "No."' in text


# --- strict paths and models -------------------------------------------------------------------


async def test_models_are_listed_and_unknown_paths_are_404() -> None:
    async with (
        FakeProviderServer(model="echo-model") as server,
        aiohttp.ClientSession() as session,
    ):
        async with session.get(f"{server.base_url}/models") as listing:
            assert listing.status == 200
            body = await listing.json()
        assert body["object"] == "list" and [m["id"] for m in body["data"]] == ["echo-model"]
        async with session.get(f"{server.base_url}/models/echo-model") as one:
            assert (await one.json())["id"] == "echo-model"
        async with session.post(f"{server.root_url}/chat/completions", json={}) as missing:
            assert missing.status == 404
            error = (await missing.json())["error"]
        assert error["code"] == "unknown_url"
        assert error["message"] == "Invalid URL (POST /chat/completions)"
        async with session.get(f"{server.base_url}/chat/completions") as wrong:
            assert wrong.status == 405
    assert server.received == []  # neither listing nor a wrong path is a model request


async def test_a_model_list_rejects_other_models_without_using_a_step() -> None:
    from agentloop.errors import ModelNotFound

    async with FakeProviderServer([FakeReply("served")], models=["small", "large"]) as server:
        wrong = OpenAIClient("huge", base_url=server.base_url)
        right = OpenAIClient("large", base_url=server.base_url)
        try:
            with pytest.raises(ModelNotFound) as info:
                await wrong.complete(REQUEST)
            response = await right.complete(REQUEST)
        finally:
            await wrong.aclose()
            await right.aclose()
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.base_url}/models") as listing:
                listed = [m["id"] for m in (await listing.json())["data"]]
            async with session.get(f"{server.base_url}/models/huge") as one:
                assert one.status == 404
    assert "huge" in str(info.value) and info.value.status_code == 404
    assert response.text == "served" and response.model == "large"  # the requested name echoes
    assert listed == ["small", "large"]


# --- scripts from files ------------------------------------------------------------------------

SCRIPT_TOML = """
model = "scripted-model"

[default]
text = "the script is over"

[[steps]]
fault = "server_error"
status = 503
repeat = 2

[[steps]]
text = "Reading both."
tool_calls = [
    { name = "read_file", arguments = { path = "a.txt" }, id = "call_a" },
    { name = "read_file", arguments = { path = "b.txt" } },
]

[[steps]]
status = 429
body = { error = { message = "slow down", type = "rate_limit", code = "rate_limit_exceeded" } }
headers = { "Retry-After" = "0" }

[[steps]]
text = "Both files are empty."
delay = 0.2
chunk_delay = 0.01
"""


@pytest.mark.parametrize("stream", [False, True])
async def test_a_toml_script_drives_an_agent_through_the_real_adapter(
    tmp_path: Any, stream: bool
) -> None:
    from agentloop import Agent, RetryingClient, RunConfig, tool

    @tool
    def read_file(path: str) -> str:
        """Read a UTF-8 text file."""
        return ""

    path = tmp_path / "script.toml"
    path.write_text(SCRIPT_TOML)
    async with FakeProviderServer.from_script(path) as server:
        inner = OpenAIClient("scripted-model", base_url=server.base_url)
        client = RetryingClient(inner, base_delay=0.001, rate_limit_max_delay=0.01)
        agent = Agent(client, tools=[read_file], config=RunConfig(stream=stream))
        started = time.monotonic()
        async with client:
            run = await agent.run("What is in a.txt and b.txt?")
        elapsed = time.monotonic() - started
    calls = run.turns[0].tool_calls
    assert [(c.id, c.name, dict(c.arguments)) for c in calls] == [
        ("call_a", "read_file", {"path": "a.txt"}),
        ("call_fake_3_1", "read_file", {"path": "b.txt"}),
    ]
    assert run.output == "Both files are empty." and elapsed >= 0.2
    assert [r.get("stream", False) for r in server.requests] == [stream] * 5
    assert run.turns[0].model == "scripted-model"


async def test_a_json_script_of_faults_and_anthropic_replies(tmp_path: Any) -> None:
    from agentloop.providers.anthropic import AnthropicClient

    script = {
        "steps": [
            {"fault": "hang", "seconds": 5},
            {"fault": "reset"},
            {"fault": "malformed"},
            {"fault": "truncate", "text": "cut " * 20},
            {"tool_calls": [{"name": "search", "arguments": '{"q": '}]},
        ]
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    async with FakeProviderServer.from_script(str(path)) as server:
        openai = OpenAIClient("m", base_url=server.base_url, timeout=0.2)
        anthropic = AnthropicClient("m", api_key="k-1", base_url=server.root_url)
        try:
            with pytest.raises(ProviderTimeout):
                await openai.complete(REQUEST)
            with pytest.raises(ProviderUnavailable):
                await openai.complete(REQUEST)
            with pytest.raises(ResponseInvalid):
                await openai.complete(REQUEST)
            with pytest.raises(ResponseInvalid):
                async for _ in anthropic.stream(REQUEST):
                    pass
            broken = await openai.complete(REQUEST)  # invalid argument JSON, sent verbatim
        finally:
            await openai.aclose()
            await anthropic.aclose()
    assert broken.tool_calls[0].name == "search"
    assert '{"q": ' in str(broken.tool_calls[0].arguments)


def test_script_parsing() -> None:
    parsed = load_fake_script(
        [
            {"text": "hi", "delay": 1, "repeat": 2},
            {"fault": "rate_limit", "retry_after": 0.5},
            {"status": 402, "body": "no money"},
            {"fault": "truncate"},
            {"text": "x", "thinking": "t", "thinking_signature": "s", "refusal": "r"},
        ]
    )
    assert parsed.steps[:2] == (FakeReply("hi", delay=1.0),) * 2
    assert parsed.steps[5] == FakeReply("x", thinking="t", thinking_signature="s", refusal="r")
    assert parsed.steps[2] == Fault.rate_limit(0.5)
    assert parsed.steps[3] == Fault.http(402, "no money")
    assert parsed.steps[4] == Fault.truncate()
    assert (parsed.default, parsed.model, parsed.models) == (None, "fake-model", None)
    listed = load_fake_script({"models": ["a", "b"]})
    assert (listed.model, listed.models) == ("a", ("a", "b"))


@pytest.mark.parametrize(
    ("script", "field", "words"),
    [
        ({"steps": [{"txt": "typo"}]}, "steps[0] (a reply)", "unknown key(s) txt"),
        ({"steps": [{"fault": "explode"}]}, "steps[0].fault", "unknown fault 'explode'"),
        ({"steps": [{"fault": "hang", "status": 500}]}, "steps[0] (fault 'hang')", "seconds"),
        ({"steps": [{"fault": "status"}]}, "steps[0].status", "needs a status code"),
        ({"steps": [{"text": 3}]}, "steps[0].text", "must be a string"),
        ({"steps": [{"thinking": 3}]}, "steps[0].thinking", "must be a string"),
        ({"steps": [{"tool_calls": [{"arguments": {}}]}]}, "steps[0].tool_calls[0].name", "name"),
        ({"steps": [{"text": "x", "repeat": 0}]}, "steps[0].repeat", ">= 1"),
        ({"steps": [{"text": "x", "delay": -1}]}, "steps[0].delay", ">= 0"),
        ({"steps": "x"}, "steps", "must be a list"),
        ({"step": []}, "the script", "unknown key(s) step"),
        ({"steps": [{"status": 99}]}, "steps[0].status", "100-599"),
        ({"steps": [{"status": 1000}]}, "steps[0].status", "100-599"),
        ({"steps": [{"fault": "server_error", "status": 0}]}, "steps[0].status", "100-599"),
        (
            {"steps": [{"status": 500, "headers": {"X-A": "1\r\nSet-Cookie: x=1"}}]},
            "steps[0].headers",
            "no CR, LF",
        ),
        ({"steps": [{"status": 500, "headers": {"X A": "1"}}]}, "steps[0].headers", "token"),
        (
            {"steps": [{"fault": "redirect", "location": "https://a/\nX-Evil: 1"}]},
            "steps[0].headers",
            "no CR, LF",
        ),
    ],
)
def test_script_mistakes_name_the_step_and_key(
    script: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_fake_script(script)
    assert info.value.field == field and words in str(info.value)


def test_an_unreadable_script_file_names_the_file(tmp_path: Any) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("steps = [")
    with pytest.raises(ConfigurationError, match=r"broken\.toml"):
        load_fake_script(path)
    with pytest.raises(ConfigurationError, match=r"missing\.json"):
        load_fake_script(tmp_path / "missing.json")


def test_a_script_nested_too_deeply_is_refused_at_load(tmp_path: Any) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    for name, text in (
        ("deep.json", '{"steps": ' + deep + "}"),
        ("deep.toml", "steps = " + deep),
        ("args.json", '[{"tool_calls": [{"name": "f", "arguments": {"a": ' + deep + "}}]}]"),
    ):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ConfigurationError, match=re.escape(name)):
            load_fake_script(path)
    arguments: dict[str, Any] = {}
    for _ in range(100_000):
        arguments = {"a": arguments}
    with pytest.raises(ConfigurationError, match="cannot be sent as JSON"):
        load_fake_script([{"tool_calls": [{"name": "f", "arguments": arguments}]}])
    with pytest.raises(ConfigurationError, match="100-599"):
        Fault.http(42)


def test_the_command_refuses_a_deep_script_with_a_message(tmp_path: Any) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    command = [sys.executable, "-m", "agentloop", "fake-server", "--script", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "nested too deeply" in done.stderr


# --- the command: quiet about its own faults and about clients that leave ---------------------


def test_the_command_prints_no_tracebacks(tmp_path: Any) -> None:
    script = {
        "models": ["fake-model"],
        "steps": [
            {"text": "a long answer " * 40, "chunk_delay": 0.05},
            {"fault": "hang", "seconds": 0.5},
            {"fault": "reset"},
            {"text": "still here"},
        ],
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    command = [sys.executable, "-m", "agentloop", "fake-server", "--script", str(path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first, second = process.stdout.readline(), process.stdout.readline()
        url = first.split(" on ", 1)[1].split()[0]
        asyncio.run(_misbehaving_client(url))
        time.sleep(0.6)  # the hang ends and the stream writes on into the closed connection
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=10)
    assert "Traceback" not in err, err
    assert second == "models: fake-model\n"
    assert process.returncode == 130


async def _misbehaving_client(url: str) -> None:
    body = {"model": "fake-model", "stream": True, "messages": []}
    timeout = aiohttp.ClientTimeout(total=0.2)
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/chat/completions", json=body) as streaming:
            await streaming.content.readline()  # the first chunk; then hang up mid-stream
            streaming.close()
        with pytest.raises(asyncio.TimeoutError):
            async with session.post(f"{url}/chat/completions", json=body, timeout=timeout):
                pass
        with pytest.raises(aiohttp.ClientError):
            async with session.post(f"{url}/chat/completions", json=body):
                pass
        async with session.post(f"{url}/chat/completions", json={**body, "stream": False}) as ok:
            assert (await ok.json())["choices"][0]["message"]["content"] == "still here"


@pytest.mark.looptime
async def test_hang_outlasts_any_client_timeout_so_the_client_times_out() -> None:
    """``Fault.hang()`` (as ``--faults hang`` makes it) answers nothing until the client gives up.

    A client whose read timeout is longer than a fixed hang used to see the dropped connection
    (``ProviderUnavailable``); on fake loop time, a 120 s read timeout is reached first.
    """
    async with FakeProviderServer([Fault.hang(), FakeReply("after")]) as server:
        client = OpenAIClient("m", base_url=server.base_url, timeout=120)
        try:
            with pytest.raises(ProviderTimeout) as caught:
                await client.complete(REQUEST)
            assert caught.value.request_sent is True
            assert (await client.complete(REQUEST)).text == "after"
        finally:
            await client.aclose()


def test_the_command_counts_its_faults_in_words_and_hang_is_a_timeout() -> None:
    """``--faults hang``: "the first request fails" (not "the first 1 requests"), a timeout."""
    command = [sys.executable, "-m", "agentloop", "fake-server", "--faults", "hang"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        url = lines[0].split(" on ", 1)[1].split()[0]
        asyncio.run(_times_out(url))
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=10)
    assert lines[2] == "the first request fails with: hang\n", lines
    assert "Traceback" not in err, err


async def _times_out(url: str) -> None:
    client = OpenAIClient("m", base_url=url, timeout=0.3)
    try:
        with pytest.raises(ProviderTimeout):
            await client.complete(REQUEST)
        assert (await client.complete(REQUEST)).text == "ok"
    finally:
        await client.aclose()


# -- an append-only Claude (SPEC 28) -----------------------------------------------------------


async def test_the_fake_server_plays_an_append_only_claude() -> None:
    """A thought sent back after its prefix changed is the documented 400; kept, it is fine."""
    from agentloop import Agent
    from agentloop.errors import BadRequestError
    from agentloop.messages import Message
    from agentloop.providers.anthropic import AnthropicClient
    from agentloop.testing.fake_binding import PREFIX_MISMATCH

    steps = [FakeReply("one", thinking="think"), FakeReply("two", thinking="again")]
    async with FakeProviderServer([*steps, *steps], model="claude-fable-5-1") as server:
        client = AnthropicClient("claude-fable-5-1", api_key="k", base_url=server.root_url)
        agent = Agent(client, instructions=lambda: "fixed")
        await agent.run("a")
        await agent.run("b")  # append-only: the same system, the thought kept in place
        edited = [agent.history[0], Message.user("a, edited"), *agent.history[2:]]
        with pytest.raises(BadRequestError) as info:
            await agent.session(history=edited).run("c")
        await client.aclose()
    assert str(info.value).endswith(PREFIX_MISMATCH.format(i=1, j=0))
    assert len(server.received) == 3
