"""An append-only conversation (SPEC 28) meets retries, a fallback and a cancelled run.

On the fake server's append-only Claude (its prefix check, ``fake_binding``) and the Anthropic
twin: a request retried after a 500, a reset connection or a cut stream sends the very bytes it
sent the first time; a fallback from the append-only model to another and back keeps one
conversation (the same ``system`` and ``tools``, every request extending the one before); a run
cancelled mid-tool leaves the session's next run extending what was sent.

``extends(a, b)`` is the prefix property itself: ``b`` has ``a``'s ``system`` and ``tools``
and begins with ``a``'s messages (breakpoints left out: the API ignores them).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from aiohttp import web

from agentloop import Agent, FallbackClient, RunConfig, tool
from agentloop.model import ModelSettings
from agentloop.providers.retrying import RetryingClient
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

KEY = "sk-ant-twin-0123456789"
MODEL = "claude-fable-5-1"
CONFIG = RunConfig(model_settings=ModelSettings(reasoning_effort="low"))


def bare(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: bare(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [bare(v) for v in value]
    return value


def extends(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether ``after`` is ``before``'s conversation carried on (SPEC 28's prefix).

    ``before``'s last message may have grown in ``after`` when it is a user message (the next
    run's input joins the tool results it follows: the API reads consecutive user turns as one).
    """
    head, tail = bare(list(before["messages"])), bare(list(after["messages"]))
    last = len(head) - 1
    grown = (
        len(tail) > last
        and head[last]["role"] == tail[last]["role"] == "user"
        and tail[last]["content"][: len(head[last]["content"])] == head[last]["content"]
    )
    return (
        bare(before.get("system")) == bare(after.get("system"))
        and bare(before.get("tools")) == bare(after.get("tools"))
        and tail[:last] == head[:last]
        and (tail[last : last + 1] == head[last:] or grown)
    )


def one_conversation(bodies: Sequence[Mapping[str, Any]]) -> None:
    for n, (a, b) in enumerate(itertools.pairwise(bodies)):
        assert extends(a, b), f"request {n + 1} does not extend request {n}"


async def _no_sleep(_: float) -> None:
    return None


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class Versions:
    """Instructions that change on every run (a callable, SPEC 21)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, ctx: Any) -> str:
        self.n += 1
        return f"You look things up. Version {self.n}."


def thought(n: int, *, call: str | None = None, text: str = "") -> FakeReply:
    calls = [FakeToolCall("look", {"q": call}, id=f"toolu_{n}")] if call else []
    return FakeReply(text, tool_calls=calls, thinking=f"thought {n}")


def fake_client(server: FakeProviderServer) -> Any:
    settings = Settings(
        provider="anthropic", model=MODEL, api_key=KEY, base_url=server.root_url, max_retries=0
    )
    return RetryingClient(build_client(settings), sleep=_no_sleep, random=lambda a, b: 0.0)


async def test_a_retried_request_sends_the_same_bytes_after_each_fault() -> None:
    script: list[FakeReply | Fault] = [
        thought(1, call="a"),
        Fault.server_error(),
        thought(2, call="b"),
        Fault.reset(),
        thought(3, text="one"),
        Fault.truncate(thought(4, call="c")),
        thought(4, call="c"),
        Fault.server_error(529),
        thought(5, text="two"),
    ]
    async with FakeProviderServer(script, model=MODEL) as server:
        agent = Agent(fake_client(server), instructions=Versions(), tools=[look], config=CONFIG)
        first = await agent.run("one")
        second = await agent.run("two")
        bodies = list(server.requests)
    assert (first.output, second.output) == ("one", "two")
    assert len(bodies) == 9
    for failed in (1, 3, 5, 7):  # each fault's request and its retry: the same body
        assert bodies[failed] == bodies[failed + 1], f"retry of request {failed} changed"
    one_conversation([b for n, b in enumerate(bodies) if n not in (1, 3, 5, 7)])


def twin_client(server: AnthropicTwin, model: str = MODEL) -> Any:
    settings = Settings(
        provider="anthropic", model=model, api_key=KEY, base_url=server.url, max_retries=0
    )
    return build_client(settings)


def step(n: int, q: str) -> TwinReply:
    return TwinReply([twin.thinking(f"s{n}"), twin.tool_use("look", {"q": q})], "tool_use")


def answer(text: str) -> TwinReply:
    return TwinReply([twin.thinking(f"answer {text}"), twin.text(text)])


class FailingTwin(AnthropicTwin):
    """The twin, but a 500 for ``down``'s model while it is set (the request is not kept)."""

    down: str | None = None

    async def serve(
        self, request: Any, body: Any, beta: str, number: int, sent: Any = None
    ) -> web.StreamResponse:
        if body.get("model") == self.down:
            error = {"type": "error", "error": {"type": "api_error", "message": "down"}}
            return web.json_response(error, status=500)
        return await super().serve(request, body, beta, number, sent)


async def down_for_run_two(fallback: FallbackClient, server: Any) -> list[Any]:
    """Three runs of one agent on ``fallback``, the twin's first model down for the second."""
    agent = Agent(fallback, instructions=Versions(), tools=[look], config=CONFIG)
    outputs = [(await agent.run("one")).output]
    server.down = MODEL
    outputs.append((await agent.run("two")).output)
    server.down = None
    outputs.append((await agent.run("three")).output)
    return outputs


async def test_a_fallback_to_another_model_and_back_keeps_one_conversation() -> None:
    """The append-only model fails (500s), the other serves a run, then the first again."""
    script = [step(1, "a"), answer("one"), step(2, "b"), answer("two"), step(3, "c"),
              answer("three")]  # fmt: skip
    async with FailingTwin(script) as server:
        fallback = FallbackClient(
            [twin_client(server), twin_client(server, "claude-opus-5-5")],
            trip_threshold=1,
            cooldown=0.0,
        )
        outputs = await down_for_run_two(fallback, server)
    assert outputs == ["one", "two", "three"]
    assert server.rejected == []
    models = [b["model"] for b in server.requests]
    assert models == [MODEL, MODEL, "claude-opus-5-5", "claude-opus-5-5", MODEL, MODEL]
    one_conversation(server.requests)


CANCELLED = asyncio.Event()


@tool
async def slow(q: str) -> str:
    """Wait for a long time."""
    CANCELLED.set()
    await asyncio.Event().wait()
    return "never"


async def test_a_run_cancelled_mid_tool_leaves_the_next_run_extending_what_was_sent() -> None:
    CANCELLED.clear()
    script = [
        TwinReply([twin.thinking("t1"), twin.tool_use("look", {"q": "a"})], "tool_use"),
        TwinReply([twin.thinking("t2"), twin.tool_use("slow", {"q": "b"})], "tool_use"),
        step(3, "c"),
        answer("two"),
    ]
    async with AnthropicTwin(script) as server:
        agent = Agent(twin_client(server), instructions=Versions(), tools=[look, slow],
                      config=CONFIG)  # fmt: skip
        task = asyncio.create_task(agent.run("one"))
        await CANCELLED.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        second = await agent.run("two")
    assert second.output == "two" and server.rejected == []
    one_conversation(server.requests)


async def test_a_fallback_to_openai_and_back_keeps_the_anthropic_conversation() -> None:
    """Run 2 on OpenAI (the Claude model down), run 3 on Claude: its requests extend run 1's."""
    script = [step(1, "a"), answer("one"), step(3, "c"), answer("three")]
    other: list[FakeReply | Fault] = [
        FakeReply(tool_calls=[FakeToolCall("look", {"q": "b"}, id="call_b")], thinking="o1"),
        FakeReply("two", thinking="o2"),
    ]
    async with FailingTwin(script) as server, FakeProviderServer(other, model="gpt-5") as openai:
        backup = build_client(
            Settings(provider="openai", model="gpt-5", api_key="sk-test", base_url=openai.base_url)
        )
        fallback = FallbackClient([twin_client(server), backup], trip_threshold=1, cooldown=0.0)
        outputs = await down_for_run_two(fallback, server)
    assert outputs == ["one", "two", "three"]
    assert server.rejected == [] and len(server.requests) == 4
    one_conversation(server.requests)
    sent = [m["content"] for m in openai.requests[0]["messages"]]
    assert "You look things up. Version 2." in str(sent)  # OpenAI reads the run's prompt too


async def test_a_stream_cut_mid_answer_is_replayed_with_the_same_bytes() -> None:
    """``replay_streams=True``: a stream cut after its thinking began is asked again as sent."""
    script: list[FakeReply | Fault] = [
        thought(1, call="a"),
        Fault.truncate(thought(2, call="b")),
        thought(2, call="b"),
        thought(3, text="one"),
    ]
    async with FakeProviderServer(script, model=MODEL) as server:
        settings = Settings(
            provider="anthropic", model=MODEL, api_key=KEY, base_url=server.root_url, max_retries=0
        )
        client = RetryingClient(build_client(settings), replay_streams=True, sleep=_no_sleep)
        config = RunConfig(model_settings=ModelSettings(reasoning_effort="low"), stream=True)
        agent = Agent(client, instructions=Versions(), tools=[look], config=config)
        run = await agent.run("one")
        bodies = list(server.requests)
    assert run.output == "one" and len(bodies) == 4
    assert bodies[1] == bodies[2]
    one_conversation([bodies[0], *bodies[2:]])
    kinds = [b["type"] for m in bodies[3]["messages"] for b in m["content"]]
    assert kinds.count("thinking") == 2  # the cut attempt's thinking never reached the history


@pytest.mark.parametrize("stream", [False, True])
async def test_a_run_cancelled_mid_request_leaves_the_next_run_extending_what_was_sent(
    stream: bool,
) -> None:
    asked = asyncio.Event()

    def hang(body: Mapping[str, Any]) -> Fault:
        asked.set()
        return Fault.hang()

    script: list[Any] = [thought(1, call="a"), hang, thought(2, call="b"), thought(3, text="two")]
    config = RunConfig(model_settings=ModelSettings(reasoning_effort="low"), stream=stream)
    async with FakeProviderServer(script, model=MODEL) as server:
        agent = Agent(fake_client(server), instructions=Versions(), tools=[look], config=config)
        task = asyncio.create_task(agent.run("one"))
        await asked.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        second = await agent.run("two")
        bodies = list(server.requests)
    assert second.output == "two" and len(bodies) == 4
    one_conversation(bodies)


class FailingOnce(FailingTwin):
    """``down``'s model fails one request, then serves again (a fallback inside one run)."""

    async def serve(
        self, request: Any, body: Any, beta: str, number: int, sent: Any = None
    ) -> web.StreamResponse:
        answered = await super().serve(request, body, beta, number, sent)
        if body.get("model") == self.down:
            self.down = None
        return answered


async def test_one_turn_on_openai_inside_a_run_then_back_to_claude() -> None:
    script = [step(1, "a"), answer("one"), step(3, "c"), answer("two")]
    other: list[FakeReply | Fault] = [
        FakeReply(tool_calls=[FakeToolCall("look", {"q": "b"}, id="call_b")], thinking="o1")
    ]
    async with FailingOnce(script) as server, FakeProviderServer(other, model="gpt-5") as openai:
        backup = build_client(
            Settings(provider="openai", model="gpt-5", api_key="sk-test", base_url=openai.base_url)
        )
        fallback = FallbackClient([twin_client(server), backup], trip_threshold=1, cooldown=0.0)
        agent = Agent(fallback, instructions=Versions(), tools=[look], config=CONFIG)
        await agent.run("one")
        server.down = MODEL
        two = await agent.run("two")
    assert two.output == "two" and server.rejected == [] and len(openai.requests) == 1
    one_conversation(server.requests)
    kinds = [[b["type"] for b in m["content"]] for m in server.requests[-1]["messages"]]
    assert ["tool_use"] in kinds  # OpenAI's turn: its reasoning is not Claude's to read
