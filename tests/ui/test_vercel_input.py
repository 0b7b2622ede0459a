"""``VercelAIApp`` refuses bad input before anything runs, and its chunk writer, event by event.

Requests go over real HTTP (uvicorn on 127.0.0.1, aiohttp as the client) to an agent on a
``ScriptedModel``: a refused request is a 4xx with a JSON error naming the problem, never a
traceback, never a model request and never a tool run.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
import aiohttp

from agentloop import Agent, Deny, Session, tool
from agentloop.events import (
    AttemptReset,
    LoopWarning,
    PartialOutput,
    RunFinished,
    TextDelta,
    ToolCallDelta,
)
from agentloop.testing import ScriptedModel, call, reply
from agentloop.ui._vercel_chunks import Chunks
from agentloop.ui.vercel import VercelAIApp, encode

from ._serve import serving as _serving

ran: list[str] = []


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (asks a person first)."""
    ran.append(path)
    return f"deleted {path}"


def serving(app: Any) -> contextlib.AbstractAsyncContextManager[str]:
    """``app`` on a real uvicorn server on 127.0.0.1; yields its ``/api/chat`` URL."""
    return _serving(app, "/api/chat")


def user(text: str, id: str = "u1") -> dict[str, Any]:
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}


def approval(call_id: str, approved: Any = True) -> dict[str, Any]:
    part = {
        "type": "tool-delete_file",
        "toolCallId": call_id,
        "state": "approval-responded",
        "input": {"path": "a.txt"},
        "approval": {"id": call_id, "approved": approved},
    }
    return {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, part]}


class Served:
    """An app over a scripted model, its sessions by chat id, and an HTTP client."""

    def __init__(self, model: ScriptedModel, **options: Any) -> None:
        self.model = model
        self.agent = Agent(model, tools=[delete_file])
        self.sessions: dict[str, Session[Any]] = {}
        options.setdefault("session", self.pick)
        self.app = VercelAIApp(self.agent, **options)
        self.url = ""
        self.http: aiohttp.ClientSession

    def pick(self, request: Any, thread_id: str) -> Session[Any]:
        return self.sessions.setdefault(thread_id, self.agent.session())

    async def post(self, body: Any, **kwargs: Any) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.http.post(self.url, data=data, **kwargs) as response:
            text = await response.text()
            is_json = response.content_type == "application/json"
            return response.status, json.loads(text) if is_json else text


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    ran.clear()
    app = Served(ScriptedModel([call("delete_file", {"path": "a.txt"}, id="c1"), reply("ok")]))
    async with serving(app.app) as url, aiohttp.ClientSession() as http:
        app.url, app.http = url, http
        yield app


def refused(status: int, answer: Any, *words: str) -> None:
    assert isinstance(answer, dict), answer
    assert set(answer["error"]) == {"type", "message"}
    assert all(w in answer["error"]["message"] for w in words), answer
    assert "Traceback" not in json.dumps(answer)
    assert status // 100 == 4


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", ("not JSON",)),
        ([], ("JSON object",)),
        ({"messages": [user("hi")]}, ("'id'",)),
        ({"id": "t", "messages": []}, ("'messages'",)),
        ({"id": "t", "messages": "hi"}, ("'messages'",)),
        ({"id": "t", "messages": [7]}, ("messages[0] must be an object",)),
        ({"id": "t", "messages": [{"role": "user", "parts": "x"}]}, ("messages[0].parts",)),
        ({"id": "t", "messages": [{"role": "user", "parts": [{}]}]}, ("parts[0]", "'type'")),
        ({"id": "t", "messages": [{"role": "robot", "parts": []}]}, ("'robot'",)),
        ({"id": "t", "messages": [{"role": "tool", "parts": []}]}, ("'tool'",)),
        (
            {"id": "t", "messages": [{"role": "system", "parts": []}, user("hi")]},
            ("'system'", "system prompt on the server"),
        ),
        ({"id": "t", "messages": [user("hi")], "trigger": "nope"}, ("'trigger'",)),
        (
            {"id": "t", "messages": [user("hi")], "trigger": "regenerate-message"},
            ("regenerate",),
        ),
        ({"id": "t", "messages": [{"role": "user", "parts": []}]}, ("no text or file part",)),
        (
            {
                "id": "t",
                "messages": [
                    {"role": "user", "parts": [{"type": "file", "url": "x", "mediaType": "x/y"}]}
                ],
            },
            ("cannot be sent to a model",),
        ),
    ],
)
async def test_a_malformed_request_is_a_400_naming_the_problem(
    served: Served, body: Any, words: tuple[str, ...]
) -> None:
    status, answer = await served.post(body)
    assert status == 400
    refused(status, answer, *words)
    assert served.model.requests == [] and ran == []


async def test_a_body_over_the_limit_is_413_with_or_without_a_length(served: Served) -> None:
    huge = json.dumps({"id": "t", "messages": [user("x" * 10_000_000)]}).encode()
    async with served.http.post(served.url, data=io.BytesIO(huge)) as response:
        assert response.status == 413
        refused(response.status, await response.json(), "over 4,194,304 bytes")

    async def chunks() -> AsyncIterator[bytes]:  # chunked: no content-length to trust
        for i in range(0, len(huge), 1 << 20):
            yield huge[i : i + (1 << 20)]

    async with served.http.post(served.url, data=chunks()) as response:
        assert response.status == 413
    assert served.model.requests == []


async def test_only_post_is_served(served: Served) -> None:
    async with served.http.get(served.url) as response:
        assert response.status == 405


async def paused(served: Served) -> Session[Any]:
    status, text = await served.post({"id": "t", "messages": [user("delete a.txt")]})
    assert status == 200 and '"type":"tool-approval-request"' in text
    session = served.sessions["t"]
    assert session.current_run is not None and session.current_run.paused
    return session


async def test_a_forged_approval_id_runs_nothing(served: Served) -> None:
    session = await paused(served)
    body = {"id": "t", "messages": [user("delete a.txt"), approval("forged")]}
    status, answer = await served.post(body)
    assert status == 409
    refused(status, answer, "'forged'", "not waiting")
    assert ran == [] and len(served.model.requests) == 1
    assert session.current_run is not None and session.current_run.paused


async def test_an_approval_for_a_chat_that_waits_on_nothing_is_refused(served: Served) -> None:
    body = {"id": "other", "messages": [user("hi"), approval("c1")]}
    status, answer = await served.post(body)
    refused(status, answer, "no run waiting")
    assert status == 409 and ran == [] and served.model.requests == []


async def test_a_malformed_approval_is_a_400(served: Served) -> None:
    await paused(served)
    status, answer = await served.post(
        {"id": "t", "messages": [user("x"), approval("c1", approved="yes")]}
    )
    assert status == 400
    refused(status, answer, "boolean 'approved'")
    assert ran == []


async def test_no_answer_for_the_pending_call_is_a_400(served: Served) -> None:
    await paused(served)
    bare = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "hm"}]}
    status, answer = await served.post({"id": "t", "messages": [user("x"), bare]})
    assert status == 400
    refused(status, answer, "no decision for pending call 'c1'")
    assert ran == []


async def test_a_new_message_while_the_run_waits_is_a_409(served: Served) -> None:
    await paused(served)
    status, answer = await served.post({"id": "t", "messages": [user("x"), user("y", "u2")]})
    assert status == 409
    refused(status, answer, "waits on decisions for c1")
    assert ran == [] and len(served.model.requests) == 1


async def test_an_unsafe_history_for_a_new_chat_is_a_400() -> None:
    # A call without an output is not unsafe: the ``ai`` client keeps one after ``chat.stop()``
    # mid-tool, and the seed closes it as interrupted (test_seams4_stopped_chat.py). A history
    # that no client of the protocol makes (one call id answered in two messages) stays a 400.
    model = ScriptedModel([reply("never")])
    app = VercelAIApp(Agent(model))
    done = {"type": "tool-x", "toolCallId": "k", "state": "output-available", "input": {}}
    twice = [
        {"id": "a1", "role": "assistant", "parts": [{**done, "output": "one"}]},
        user("b", "u2"),
        {"id": "a2", "role": "assistant", "parts": [{**done, "output": "two"}]},
    ]
    async with serving(app) as url, aiohttp.ClientSession() as http:
        body = {"id": "t", "messages": [user("a"), *twice, user("c", "u3")]}
        async with http.post(url, json=body) as response:
            assert response.status == 400
            answer = await response.json()
    assert answer["error"]["type"] == "TranscriptError" and model.requests == []
    assert "'k'" in answer["error"]["message"]


async def test_the_apps_pickers_refuse_with_403() -> None:
    def no_session(request: Any, thread_id: str) -> Session[Any]:
        raise PermissionError(f"not your chat: {thread_id}")

    def no_deps(request: Any, body: Any) -> Any:
        raise PermissionError("who are you?")

    model = ScriptedModel([reply("never")])
    agent = Agent(model)
    async with aiohttp.ClientSession() as http:
        for app, words in (
            (VercelAIApp(agent, session=no_session), "not your chat: t"),
            (VercelAIApp(agent, deps=no_deps), "who are you?"),
        ):
            async with serving(app) as url:
                body = {"id": "t", "messages": [user("hi")]}
                async with http.post(url, json=body) as response:
                    assert response.status == 403
                    assert words in (await response.json())["error"]["message"]
    assert model.requests == []


# -- the chunk writer, event by event ---------------------------------------------------------


def test_streamed_tool_call_arguments_wait_for_the_call_id() -> None:
    chunks = Chunks("m")
    assert chunks.feed(ToolCallDelta("r", 0, 0, "add", '{"a":')) == []
    assert chunks.feed(ToolCallDelta("r", 0, 0, None, " 1", call_id="k")) == [
        {"type": "tool-input-start", "toolCallId": "k", "toolName": "add"},
        {"type": "tool-input-delta", "toolCallId": "k", "inputTextDelta": '{"a": 1'},
    ]
    assert chunks.feed(ToolCallDelta("r", 0, 0, None, "}")) == [
        {"type": "tool-input-delta", "toolCallId": "k", "inputTextDelta": "}"},
    ]


def test_a_reset_attempt_is_a_reset_step_and_text_starts_again() -> None:
    chunks = Chunks("m")
    first = chunks.feed(TextDelta("r", 0, "Hel"))
    assert [c["type"] for c in first] == ["text-start", "text-delta"]
    assert chunks.feed(AttemptReset("r", 0)) == [{"type": "reset-step"}]
    again = chunks.feed(TextDelta("r", 0, "Hello"))
    assert [c["type"] for c in again] == ["text-start", "text-delta"]
    assert again[0]["id"] != first[0]["id"]


def test_events_without_a_part_are_transient_data_and_a_childs_are_not_drawn() -> None:
    chunks = Chunks("m")
    assert chunks.feed(LoopWarning("r", 2, "read_file x3", 3)) == [
        {
            "type": "data-agentloop",
            "data": {"kind": "LoopWarning", "turn": 2, "pattern": "read_file x3", "repetitions": 3},
            "transient": True,
        }
    ]
    assert chunks.feed(TextDelta("r", 0, "child talk", path=("parent", "child"))) == []
    assert chunks.feed(PartialOutput("r", 0, {"city": "Par"})) == [
        {"type": "data-output", "id": "output", "data": {"city": "Par"}}
    ]


async def test_a_whole_run_maps_to_the_protocols_order() -> None:
    model = ScriptedModel([call("add", {"a": 1, "b": 2}, id="k"), reply("3")])

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    agent = Agent(model, tools=[add])
    chunks = Chunks("m")
    out: list[dict[str, Any]] = []
    async with agent.stream("1+2") as events:
        async for event in events:
            out += chunks.feed(event)
            if isinstance(event, RunFinished):
                break
    kinds = [c["type"] for c in out if c["type"] != "data-agentloop"]
    assert kinds[0] == "start" and out[0]["messageId"] == "m"
    assert kinds[-1] == "finish" and out[-1]["finishReason"] == "stop"
    assert kinds.index("tool-input-available") < kinds.index("tool-output-available")
    assert kinds.count("start-step") == kinds.count("finish-step") == 2
    wire = encode(out).decode()
    assert wire.count("data: ") == len(out) and wire.endswith("\n\n")
    assert all(json.loads(line[6:]) for line in wire.split("\n\n") if line)


def test_chunks_written_by_hand_are_the_same_json() -> None:
    """``encode`` writes the chunks of every turn directly: they must parse to what was given."""
    given: list[dict[str, Any]] = [
        {"type": "text-delta", "id": 't"1', "delta": 'héllo "x"\n\u2028\\'},
        {"type": "reasoning-delta", "id": "r", "delta": "\x00\x1f"},
        {"type": "tool-input-delta", "toolCallId": "k", "inputTextDelta": '{"a":'},
        {"type": "start-step"},
        {"type": "finish-step"},
        {"type": "tool-input-start", "toolCallId": "k", "toolName": 'n"'},
        {"type": "tool-input-available", "toolCallId": "k", "toolName": "n", "input": {"a": ["é"]}},
        {"type": "tool-output-available", "toolCallId": "k", "output": 'x"y'},
        {"type": "tool-output-available", "toolCallId": "k", "output": {"z": 1}},
        {"type": "start", "messageId": "m"},
    ]
    wire = encode(given).decode()
    assert [json.loads(e.removeprefix("data: ")) for e in wire.split("\n\n") if e] == given


async def test_a_decided_approval_sent_again_runs_nothing_twice(served: Served) -> None:
    await paused(served)
    body = {"id": "t", "messages": [user("delete a.txt"), approval("c1")]}
    status, text = await served.post(body)
    assert status == 200 and '"output":"deleted a.txt"' in text and ran == ["a.txt"]
    status, answer = await served.post(body)  # a replay: told what the decision did
    assert status == 200 and '"output":"deleted a.txt"' in answer and "DecidedElsewhere" in answer
    assert answer.endswith("data: [DONE]\n\n") and '"finishReason":"stop"' in answer
    assert ran == ["a.txt"] and len(served.model.requests) == 2


async def test_a_second_request_while_the_chat_runs_is_a_409() -> None:
    release = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait until released."""
        await release.wait()
        return "done"

    model = ScriptedModel([call("wait"), reply("ok")])
    app = VercelAIApp(Agent(model, tools=[wait]))
    async with serving(app) as url, aiohttp.ClientSession() as http:
        body = {"id": "t", "messages": [user("go")]}
        async with http.post(url, json=body) as first:
            assert first.status == 200
            async for line in first.content:  # the tool has started once its input is out
                if b"tool-input-available" in line:
                    break
            async with http.post(url, json=body) as second:
                assert second.status == 409
                answer = await second.json()
            release.set()
            rest = await first.text()
    assert answer["error"]["type"] == "Conflict" and "data: [DONE]" in rest


def _chunks(text: str) -> list[dict[str, Any]]:
    events = [e.removeprefix("data: ") for e in text.split("\n\n") if e.startswith("data: {")]
    return [json.loads(e) for e in events]


async def test_an_approval_after_a_denial_elsewhere_reads_the_denial_and_runs_nothing(
    served: Served,
) -> None:
    session = await paused(served)
    await session.continue_run(decisions={"c1": Deny("not today")})  # an operator, elsewhere
    body = {"id": "t", "messages": [user("delete a.txt"), approval("c1")]}
    status, text = await served.post(body)
    assert status == 200 and ran == []
    chunks = _chunks(text)
    told = [c["data"] for c in chunks if c["type"] == "data-agentloop"]
    assert told == [{"type": "DecidedElsewhere", "calls": ["c1"], "decisions": {"c1": "deny"}}]
    assert {"type": "tool-output-denied", "toolCallId": "c1"} in chunks
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    assert len(served.model.requests) == 2  # the operator's continuation only


async def test_an_approval_after_a_cancel_elsewhere_reads_the_abort_and_runs_nothing(
    served: Served,
) -> None:
    session = await paused(served)
    await session.cancel_run()
    body = {"id": "t", "messages": [user("delete a.txt"), approval("c1")]}
    status, text = await served.post(body)
    assert status == 200 and ran == [] and len(served.model.requests) == 1
    chunks = _chunks(text)
    assert chunks[0]["type"] == "start" and chunks[-1]["type"] == "abort"
    [closed] = [c for c in chunks if c["type"].startswith("tool-output")]  # as the run closed it
    assert closed["type"] == "tool-output-error" and "interrupted" in closed["errorText"]
