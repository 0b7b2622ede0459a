"""MCP elicitation answered in the process (SPEC 17), against a real server (eliciting.py).

A scripted model calls a tool that asks the user (``ctx.elicit``); the ``elicitation=`` callback
answers. Accepted answers reach the tool's result; None, no callback, a raising callback and an
answer the schema refuses are declines (the failures logged); a sync callback blocks no other
task; a timed-out call cancels the question; the same over streamable HTTP.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig
from agentloop.errors import ConfigurationError
from agentloop.mcp import ElicitationAnswer, ElicitationRequest, MCPServer
from agentloop.run import Run
from agentloop.testing import ScriptedModel, call, reply

SERVER = Path(__file__).parent / "mcp_servers" / "eliciting.py"
GOOD: ElicitationAnswer = {"guests": 2, "confirm": True}
BOOKED = "booked friday for 2 (confirm=True, note='')"
DECLINED = "not booked: decline"


def eliciting(markers: Path, callback: Any = None) -> MCPServer:
    env = {"MARKER_DIR": str(markers)}
    return MCPServer.stdio(
        sys.executable, [str(SERVER)], env=env, name="eliciting", elicitation=callback
    )


async def run_tool(
    server: MCPServer, tool: str = "book", arguments: dict[str, Any] | None = None, **config: Any
) -> list[tuple[str, bool]]:
    """One run in which the model calls ``tool`` once; the tool results it read."""
    arguments = {"day": "friday"} if arguments is None else arguments
    model = ScriptedModel([call(tool, arguments), reply("done")])
    async with Agent(model, tools=[server], config=RunConfig(**config)) as agent:
        run = await agent.run("book a table")
    return results(run)


def results(run: Run[Any]) -> list[tuple[str, bool]]:
    return [(p.content, p.is_error) for m in run.messages for p in m.tool_results_parts]


async def test_an_accepted_answer_reaches_the_tool_result(tmp_path: Path) -> None:
    asked: list[ElicitationRequest] = []

    def answer(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        return GOOD

    assert await run_tool(eliciting(tmp_path, answer)) == [(BOOKED, False)]
    (request,) = asked
    assert request.server == "eliciting" and request.message == "Book a table on friday?"
    assert request.schema["required"] == ["guests", "confirm"]
    assert request.schema["properties"]["guests"]["maximum"] == 12
    with pytest.raises(AttributeError):
        request.message = "changed"  # type: ignore[misc]


async def test_an_async_callback_answers(tmp_path: Path) -> None:
    async def answer(request: ElicitationRequest) -> ElicitationAnswer:
        await asyncio.sleep(0)
        return {"guests": 3, "confirm": False, "note": "by the window"}

    expected = "booked friday for 3 (confirm=False, note='by the window')"
    assert await run_tool(eliciting(tmp_path, answer)) == [(expected, False)]


async def test_none_declines(tmp_path: Path) -> None:
    assert await run_tool(eliciting(tmp_path, lambda request: None)) == [(DECLINED, False)]


async def test_without_a_callback_the_question_is_declined_and_not_advertised(
    tmp_path: Path,
) -> None:
    assert await run_tool(eliciting(tmp_path)) == [(DECLINED, False)]
    advertised = await run_tool(eliciting(tmp_path), "capabilities", {})
    assert advertised == [("elicitation advertised: False", False)]
    advertised = await run_tool(eliciting(tmp_path, lambda request: None), "capabilities", {})
    assert advertised == [("elicitation advertised: True", False)]


def raises(request: ElicitationRequest) -> ElicitationAnswer:
    raise RuntimeError("the form broke")


FAILING: dict[str, tuple[Callable[[ElicitationRequest], Any], str]] = {
    "raises": (raises, "the elicitation callback raised"),
    "not a dict": (lambda request: ["2", "yes"], "returned a list, not a dict"),
    "a string": (lambda request: "yes", "returned a str, not a dict"),
    "out of range": (
        lambda request: {"guests": 20, "confirm": True},
        "guests: 20 is greater than the maximum of 12",
    ),
    "missing field": (lambda request: {"guests": 2}, "confirm: Field required"),
    "wrong type": (
        lambda request: {"guests": "two", "confirm": True},
        "guests: 'two' is not of type 'integer'",
    ),
}


@pytest.mark.parametrize("case", FAILING)
async def test_a_failing_callback_declines_and_logs(
    case: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    callback, why = FAILING[case]
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        assert await run_tool(eliciting(tmp_path, callback)) == [(DECLINED, False)]
    (record,) = [r for r in caplog.records if "asked for input" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "tool server 'eliciting' asked for input; declined" in record.getMessage()
    assert why in record.getMessage()


async def test_a_url_mode_question_is_declined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[ElicitationRequest] = []
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        found = await run_tool(eliciting(tmp_path, asked.append), "open_page", {})
    assert found == [("url: decline", False)] and asked == []
    assert "asked for input; declined: it asked in URL mode" in caplog.text


async def ask_raw(server: MCPServer, schema: Mapping[str, Any]) -> dict[str, Any]:
    ((text, is_error),) = await run_tool(server, "ask_raw", {"schema": json.dumps(schema)})
    assert not is_error, text
    return dict(json.loads(text))


async def test_the_servers_schema_is_data_never_fetched_and_checked_before_asking(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[ElicitationRequest] = []

    def answer(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        return {"code": "a" * 40 + "!", "city": "Oslo"}

    server = eliciting(tmp_path, answer)
    fetched = {
        "type": "object",
        "properties": {"city": {"$ref": "http://127.0.0.1:9/never.json"}},
    }
    invalid = {"type": "object", "properties": {"city": {"type": 7}}}
    slow = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a|a)*$"}}}
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        assert await ask_raw(server, fetched) == {"action": "decline", "content": None}
        assert "its schema refers to 'http://127.0.0.1:9/never.json'" in caplog.text
        assert len(asked) == 1
        assert await ask_raw(server, invalid) == {"action": "decline", "content": None}
        assert "no answer could be checked: its schema is not a valid JSON Schema" in caplog.text
        assert len(asked) == 1  # a person is not asked a question no answer could satisfy
        assert await ask_raw(server, slow) == {"action": "decline", "content": None}
        assert "arguments: the schema's pattern '^(a|a)*$' took longer than 0.25s" in caplog.text
    plain = {"type": "object", "properties": {"city": {"type": "string"}}}
    accepted = await ask_raw(eliciting(tmp_path, lambda request: {"city": "Oslo"}), plain)
    assert accepted == {"action": "accept", "content": {"city": "Oslo"}}


async def test_a_sync_callback_that_blocks_freezes_no_other_task(tmp_path: Path) -> None:
    def slow(request: ElicitationRequest) -> ElicitationAnswer:
        time.sleep(0.5)  # a person at input(): the thread waits, the event loop does not
        return GOOD

    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.02)

    ticking = asyncio.create_task(ticker())
    try:
        started = time.monotonic()
        assert await run_tool(eliciting(tmp_path, slow)) == [(BOOKED, False)]
        assert time.monotonic() - started >= 0.5
    finally:
        ticking.cancel()
    gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
    assert len(ticks) > 20 and max(gaps) < 0.2


async def test_a_timed_out_call_cancels_the_question(tmp_path: Path) -> None:
    seen: list[str] = []

    async def waits(request: ElicitationRequest) -> ElicitationAnswer:
        seen.append("asked")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return GOOD

    found = await run_tool(eliciting(tmp_path, waits), "ask_forever", {}, tool_timeout=1.0)
    assert found == [("Tool 'ask_forever' timed out after 1s", True)]
    assert seen == ["asked", "cancelled"]  # before aclose: the server withdrew its question
    assert (tmp_path / "cancelled").exists()


async def test_a_question_the_server_keeps_is_declined_when_no_call_waits(tmp_path: Path) -> None:
    seen: list[str] = []

    async def waits(request: ElicitationRequest) -> ElicitationAnswer:
        seen.append("asked")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return GOOD

    server = eliciting(tmp_path, waits)
    model = ScriptedModel([call("ask_stubbornly", {}), reply("done")])
    async with Agent(model, tools=[server], config=RunConfig(tool_timeout=1.0)) as agent:
        run = await agent.run("ask")
        assert results(run) == [("Tool 'ask_stubbornly' timed out after 1s", True)]
        # the callback is cancelled as the call ends; it runs its handler at the loop's next turn
        assert await eventually(lambda: seen == ["asked", "cancelled"])
        assert await eventually(lambda: (tmp_path / "stubborn-decline").exists())


async def eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_a_sync_callback_past_the_timeout_is_abandoned(tmp_path: Path) -> None:
    release = threading.Event()

    def waits(request: ElicitationRequest) -> ElicitationAnswer:
        release.wait(30)  # a person who never answers: the thread cannot be stopped
        return GOOD

    started = time.monotonic()
    try:
        found = await run_tool(eliciting(tmp_path, waits), "ask_forever", {}, tool_timeout=1.0)
        took = time.monotonic() - started
    finally:
        release.set()  # its late answer goes nowhere
    assert found == [("Tool 'ask_forever' timed out after 1s", True)]
    assert took < 10 and (tmp_path / "cancelled").exists()


def test_an_elicitation_that_is_not_callable_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="elicitation must be a callable, not dict"):
        MCPServer.http("http://127.0.0.1:1/mcp", elicitation=GOOD)  # type: ignore[arg-type]


# -- streamable HTTP -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        env={**os.environ, "MARKER_DIR": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the HTTP MCP server did not come up") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


async def test_over_streamable_http_answers_and_declines(http_url: str) -> None:
    async def answer(request: ElicitationRequest) -> ElicitationAnswer:
        assert request.server == "restaurant"
        return GOOD

    server = MCPServer.http(http_url, name="restaurant", elicitation=answer)
    assert await run_tool(server) == [(BOOKED, False)]
    declining = MCPServer.http(http_url, name="restaurant")
    assert await run_tool(declining) == [(DECLINED, False)]
