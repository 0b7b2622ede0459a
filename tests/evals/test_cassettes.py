"""Cassettes (SPEC 23): real HTTP to the fake server recorded, replayed with no socket, redacted,
media by digest, strict and ordered matching, and every way into a run (run, stream, sessions,
continue_run, the decorator)."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, RetryingClient, tool
from agentloop.cassettes import use_cassette
from agentloop.errors import CassetteMismatch, ConfigurationError
from agentloop.events import TextDelta
from agentloop.media import ImagePart
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

from .conftest import serving

KEY = "sk-test-cassette-0123456789abcdef"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
DEAD = "http://127.0.0.1:9/v1"  # nothing listens: a replay that tried the network would fail


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def script() -> list[Any]:
    return [FakeReply(tool_calls=[FakeToolCall("add", {"a": 1, "b": 2})]), FakeReply("three")]


def agent_at(url: str, **kwargs: Any) -> Agent[Any]:
    return Agent(OpenAIClient("m", api_key=KEY, base_url=url), tools=[add], **kwargs)


def forbid_sockets(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """From now on any connection attempt fails (and is listed)."""
    tried: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        tried.append(address)
        raise OSError(f"a replay opened a socket to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return tried


async def record(path: Path, steps: list[Any] | None = None, **kwargs: Any) -> Any:
    async with FakeProviderServer(steps or script()) as server:
        agent = agent_at(server.base_url)
        try:
            async with use_cassette(path, mode="once", **kwargs) as cassette:
                run = await agent.run("add 1 and 2")
        finally:
            await agent.aclose()
        assert cassette.recording
        return run


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
async def test_a_recorded_run_replays_with_no_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    path = tmp_path / f"run{suffix}"
    recorded = await record(path)
    tried = forbid_sockets(monkeypatch)
    async with use_cassette(path) as cassette:
        replayed = await agent_at(DEAD).run("add 1 and 2")
    assert not cassette.recording and cassette.all_played and cassette.play_count == 2
    assert replayed.output == recorded.output == "three"
    assert [m.to_dict() for m in replayed.messages] == [m.to_dict() for m in recorded.messages]
    assert tried == []


async def test_the_file_is_sorted_diffable_and_holds_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    await record(path, redact=("add 1",))
    text = path.read_text()
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert data["agentloop_cassette"] == 1 and len(data["interactions"]) == 2
    first = data["interactions"][0]
    assert set(first["request"]) == {"method", "path", "body"}  # no request header at all
    assert first["request"]["path"] == "/v1/chat/completions"
    assert first["request"]["body"]["messages"][0]["content"] == "<redacted> and 2"
    assert KEY not in text and "authorization" not in text.lower()
    assert first["response"]["status"] == 200 and "date" not in first["response"]["headers"]


async def test_a_key_in_the_query_is_redacted(tmp_path: Path) -> None:
    from agentloop.cassettes._format import request_record

    stored = request_record("POST", "https://h/v1/x?key=AIzaSECRET0123456789&alt=sse", b"{}", ())
    assert stored["path"] == "/v1/x?key=<redacted>&alt=sse"
    assert stored["body"] == {}


async def test_stream_replays_the_same_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "stream.yaml"
    long = "a streamed answer in several pieces"

    async def deltas(agent: Agent[Any]) -> list[str]:
        try:
            async with agent.stream("say it") as events:
                return [e.text async for e in events if isinstance(e, TextDelta)]
        finally:
            await agent.aclose()

    async with FakeProviderServer([FakeReply(long)]) as server:
        async with use_cassette(path, mode="once"):
            live = await deltas(agent_at(server.base_url))
    data = path.read_text()
    assert "events:" in data
    forbid_sockets(monkeypatch)
    async with use_cassette(path) as cassette:
        again = await deltas(agent_at(DEAD))
    assert again == live and len(live) > 1 and "".join(live) == long
    assert cassette.all_played


# aiohttp warns on a body over 1 MiB sent as bytes (providers/_http.py could send a BytesIO)
@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
async def test_request_media_is_stored_by_digest(tmp_path: Path) -> None:
    path = tmp_path / "image.yaml"
    image = PNG + bytes(range(256)) * 2400  # 600 KiB: the fake server takes 1 MiB bodies at most
    async with FakeProviderServer([FakeReply("a picture")]) as server:
        agent = agent_at(server.base_url)
        async with use_cassette(path, mode="once"):
            await agent.run(["what is this?", ImagePart(data=image, media_type="image/png")])
        await agent.aclose()
    text = path.read_text()
    assert len(text) < 4000
    assert base64.b64encode(image[:600]).decode() not in text
    assert f"<media sha256:{__import__('hashlib').sha256(image).hexdigest()} {len(image)}>" in text
    async with use_cassette(path) as cassette:  # the same image matches by digest
        image_part = ImagePart(data=image, media_type="image/png")
        run = await agent_at(DEAD).run(["what is this?", image_part])
    assert run.output == "a picture" and cassette.all_played


async def test_strict_mismatch_names_the_first_difference_and_is_never_retried(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.yaml"
    await record(path)
    inner = OpenAIClient("m", api_key=KEY, base_url=DEAD)
    agent = Agent(RetryingClient(inner, max_retries=3), tools=[add])
    async with use_cassette(path):
        with pytest.raises(CassetteMismatch) as caught:
            await agent.run("add 2 and 2")
    error = caught.value
    assert str(error) == (
        "request 1 differs from the recording at $.body.messages[0].content: "
        "recorded 'add 1 and 2', got 'add 2 and 2'"
    )
    assert (error.path, error.index, error.difference) == (
        str(path),
        0,
        "$.body.messages[0].content",
    )
    assert error.recoverability == "config" and not error.is_recoverable()
    run = agent.runs[-1]  # the run finalized with it
    assert isinstance(run.stop_reason, CassetteMismatch) and run.ended_at is not None


async def test_no_recorded_request_left(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    await record(path)
    agent = agent_at(DEAD)
    async with use_cassette(path):
        await agent.run("add 1 and 2")
        with pytest.raises(CassetteMismatch, match=r"^request 3: no recorded request left$"):
            await agent.run("add 1 and 2")


async def test_ordered_matches_method_and_path_only(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    await record(path)
    async with use_cassette(path, match="ordered") as cassette:
        run = await agent_at(DEAD).run("add 40 and 2")  # another prompt: same exchanges
    assert run.output == "three" and cassette.all_played
    async with use_cassette(path, match="ordered"):
        responses = agent_at(DEAD.replace("/v1", "/v2"))
        with pytest.raises(CassetteMismatch, match=r"at \$\.path: recorded '/v1/chat"):
            await responses.run("x")


async def test_mode_none_without_the_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(ConfigurationError) as caught:
        with use_cassette(path):
            pass
    assert str(caught.value) == f'cassette {path} does not exist; record it with mode="once"'
    with pytest.raises(ConfigurationError, match="mode must be one of"):
        use_cassette(path, mode="new_episodes")  # type: ignore[arg-type]


async def test_mode_all_records_afresh_and_a_hard_error_still_saves(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    await record(path)
    async with FakeProviderServer([FakeReply("only")]) as server:
        agent = agent_at(server.base_url)
        with pytest.raises(RuntimeError):
            async with use_cassette(path, mode="all"):
                await agent.run("hello")
                raise RuntimeError("the block failed")
        await agent.aclose()
    interactions = json.loads(json.dumps(__import__("yaml").safe_load(path.read_text())))
    assert len(interactions["interactions"]) == 1


async def test_sessions_and_continue_run_go_through_the_cassette(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @tool(requires_approval=True)
    def wipe(target: str) -> str:
        """Wipe a target."""
        return f"wiped {target}"

    steps = [
        FakeReply("hello"),
        FakeReply(tool_calls=[FakeToolCall("wipe", {"target": "cache"})]),
        FakeReply("wiped"),
    ]

    async def scenario(url: str) -> list[Any]:
        agent = Agent(OpenAIClient("m", api_key=KEY, base_url=url), tools=[wipe])
        session = agent.session("s1")
        first = await session.run("hi")
        paused = await agent.run("wipe the cache")
        assert paused.paused
        call_id = paused.pending[0].call.id
        done = await agent.continue_run(decisions={call_id: Approve()})
        await agent.aclose()
        return [first.output, done.output]

    path = tmp_path / "flow.yaml"
    async with FakeProviderServer(steps) as server:
        async with use_cassette(path, mode="once"):
            live = await scenario(server.base_url)
    forbid_sockets(monkeypatch)
    async with use_cassette(path) as cassette:
        assert await scenario(DEAD) == live == ["hello", "wiped"]
    assert cassette.all_played


def test_the_decorator_and_a_sync_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sync.yaml"
    with serving(script()) as server:
        with agent_at(server.base_url) as agent:
            recorded = use_cassette(path, mode="once")(agent.run_sync)("add 1 and 2")
    forbid_sockets(monkeypatch)

    @use_cassette(path)
    def replay() -> Any:
        return agent_at(DEAD).run_sync("add 1 and 2")

    assert replay().output == recorded.output == "three"
    assert replay().output == "three"  # each call plays the file afresh


def test_no_cassette_costs_nothing() -> None:
    import subprocess
    import sys

    code = (
        "import sys, asyncio\n"
        "from agentloop import Agent\n"
        "from agentloop.testing import FunctionModel\n"
        "import agentloop.providers.openai\n"
        "Agent(FunctionModel(lambda r: 'ok')).run_sync('hi')\n"
        "print('agentloop.cassettes' in sys.modules, 'yaml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


REPLAY = """
import asyncio, json, socket, sys

def refuse(*args, **kwargs):
    raise OSError("no network in this process")

socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse

from agentloop import Agent, tool
from agentloop.cassettes import use_cassette
from agentloop.events import TextDelta
from agentloop.providers.openai import OpenAIClient


@tool
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


async def main():
    client = OpenAIClient("m", api_key="sk-other", base_url="http://127.0.0.1:9/v1")
    agent = Agent(client, tools=[add])
    with use_cassette(sys.argv[1]) as cassette:
        async with agent.stream("add 1 and 2") as events:
            pieces = [e.text async for e in events if isinstance(e, TextDelta)]
            run = events.run
    print(json.dumps({"messages": [m.to_dict() for m in run.messages], "pieces": pieces,
                      "all_played": cassette.all_played}, sort_keys=True))

asyncio.run(main())
"""


async def test_a_recording_replays_byte_identically_in_a_process_with_no_network(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    path = tmp_path / "streamed.yaml"
    async with FakeProviderServer(
        [FakeReply(tool_calls=[FakeToolCall("add", {"a": 1, "b": 2})]), FakeReply("it is three")]
    ) as server:
        agent = agent_at(server.base_url)
        async with use_cassette(path, mode="once"):
            async with agent.stream("add 1 and 2") as events:
                pieces = [e.text async for e in events if isinstance(e, TextDelta)]
                run = events.run
        await agent.aclose()
    live = json.dumps(
        {"messages": [m.to_dict() for m in run.messages], "pieces": pieces, "all_played": True},
        sort_keys=True,
    )
    script = tmp_path / "replay.py"
    script.write_text(REPLAY)
    done = subprocess.run(  # noqa: ASYNC221  (the recording needed this test's loop)
        [sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == live


def test_run_sync_sees_each_new_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_sync`` keeps one event loop per agent; each call still sees the caller's context."""
    path = tmp_path / "sync.yaml"
    with serving(script() + script()) as server, agent_at(server.base_url) as agent:
        with use_cassette(path, mode="once"):
            agent.run_sync("add 1 and 2", history=[])
        with use_cassette(tmp_path / "second.yaml", mode="once") as second:
            agent.run_sync("add 1 and 2", history=[])
    assert second.play_count == 2 and len(second.interactions) == 2
    forbid_sockets(monkeypatch)
    with agent_at(DEAD) as agent:
        for _ in range(2):
            with use_cassette(path) as cassette:
                assert agent.run_sync("add 1 and 2", history=[]).output == "three"
            assert cassette.all_played


def test_bodies_are_stored_as_json_text_or_lines() -> None:
    from agentloop.cassettes._format import request_record

    def body(payload: bytes) -> Any:
        return request_record("POST", "https://h/x", payload, ())["body"]

    assert body(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert body(b"plain text") == "plain text"
    assert body(b'{"a": 1}\n{"b": 2}\n') == [{"a": 1}, {"b": 2}]
    assert request_record("POST", "https://h/x", {"prompt_cache_key": "abc"}, ())["body"] == {
        "prompt_cache_key": "<run-id>"
    }


async def test_redact_strings_are_scrubbed_from_responses_too(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    await record(path, steps=[FakeReply("the code is BANANA-42")], redact=("BANANA-42",))
    text = path.read_text()
    assert "BANANA-42" not in text and "the code is <redacted>" in text


async def test_strict_takes_the_first_equal_exchange_in_any_order(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    async with FakeProviderServer([FakeReply("one"), FakeReply("two")]) as server:
        agent = agent_at(server.base_url)
        async with use_cassette(path, mode="once"):
            await agent.run("first", history=[])
            await agent.run("second", history=[])
        await agent.aclose()
    replay = agent_at(DEAD)
    async with use_cassette(path, mode="once") as cassette:  # the file exists: a replay
        assert (await replay.run("second", history=[])).output == "two"
        assert (await replay.run("first", history=[])).output == "one"
    assert not cassette.recording and cassette.all_played


async def test_an_async_function_decorated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.yaml"
    await record(path)
    forbid_sockets(monkeypatch)

    @use_cassette(path)
    async def replay() -> Any:
        return await agent_at(DEAD).run("add 1 and 2")

    assert (await replay()).output == "three"
    assert (await replay()).output == "three"


@pytest.mark.parametrize("kind", ["anthropic", "responses"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_every_adapter_records_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, streamed: bool
) -> None:
    from agentloop.providers import OpenAIResponsesClient
    from agentloop.providers.anthropic import AnthropicClient

    def client(server: FakeProviderServer | None) -> Any:
        if kind == "anthropic":
            url = server.root_url if server else "http://127.0.0.1:9"
            return AnthropicClient("claude-x", api_key=KEY, base_url=url)
        return OpenAIResponsesClient("m", api_key=KEY, base_url=server.base_url if server else DEAD)

    async def go(agent: Agent[Any]) -> Any:
        if not streamed:
            return (await agent.run("add 1 and 2")).output
        async with agent.stream("add 1 and 2") as events:
            pieces = [e.text async for e in events if isinstance(e, TextDelta)]
        return pieces, events.run.output

    path = tmp_path / f"{kind}.yaml"
    async with FakeProviderServer(script()) as server:
        live_agent = Agent(client(server), tools=[add])
        async with use_cassette(path, mode="once"):
            live = await go(live_agent)
        await live_agent.aclose()
    assert KEY not in path.read_text()
    forbid_sockets(monkeypatch)
    async with use_cassette(path) as cassette:
        assert await go(Agent(client(None), tools=[add])) == live
    assert cassette.all_played


def test_run_ids_are_stored_and_matched_as_a_mark() -> None:
    from agentloop.cassettes._format import request_record
    from agentloop.clock import Clock

    run_id = Clock().new_id()
    body = {"metadata": {"run": run_id}, "user": f"run-{run_id}", "digest": "0" * 32}
    stored = request_record("POST", f"https://h/v1/batches/{run_id}", body, ())
    assert stored["body"] == {
        "metadata": {"run": "<run-id>"}, "user": "run-<run-id>", "digest": "0" * 32
    }  # fmt: skip
    assert stored["path"] == "/v1/batches/<run-id>"
