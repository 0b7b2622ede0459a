"""AGUIApp's door: bad requests are a 4xx or a RUN_ERROR, never a traceback and never a tool run;
the session picker, the deps hook and the seeding of a new thread from the client's messages.

Every case runs a real uvicorn server on 127.0.0.1 and a real HTTP client (aiohttp).
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from agentloop import Agent, ToolContext, tool
from agentloop.model import ModelRequest
from agentloop.testing import ScriptedModel, call
from agentloop.ui.ag_ui import MAX_BODY_BYTES, AGUIApp

from ._serve import serving


async def send(url: str, body: Any, *, raw: bytes | None = None) -> tuple[int, Any]:
    """POST ``body`` as JSON (or ``raw`` bytes); the status and the JSON or SSE events."""
    data = io.BytesIO(raw if raw is not None else json.dumps(body).encode())
    headers = {"content-type": "application/json"}
    async with aiohttp.ClientSession() as http, http.post(url, data=data, headers=headers) as r:
        text = await r.text()
        if r.content_type == "text/event-stream":
            lines = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
            return r.status, [json.loads(line) for line in lines]
        return r.status, json.loads(text)


def request(*messages: dict[str, Any], thread: str = "t", **more: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": "r", "messages": list(messages), **more}


def user(text: Any, id: str = "u") -> dict[str, Any]:
    return {"id": id, "role": "user", "content": text}


class Guarded:
    """An agent whose model and tool must never be reached by a bad request."""

    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool
        def touch(name: str) -> str:
            """Touch a file."""
            self.ran.append(name)
            return "touched"

        self.model = ScriptedModel([call("touch", {"name": "x"}), "done"])
        self.agent = Agent(self.model, tools=[touch])


BAD = [
    pytest.param(b"{not json", 400, "not JSON", id="not-json"),
    pytest.param({"runId": "r", "messages": []}, 422, "threadId", id="no-thread-id"),
    pytest.param({"threadId": "t", "runId": "r", "messages": "hi"}, 422, "messages", id="messages"),
    pytest.param(
        request({"id": "m", "role": "robot", "content": "beep"}), 422, "robot", id="unknown-role"
    ),
    pytest.param(
        request(user("hi"), {"id": "a", "role": "assistant", "content": "hello"}),
        422,
        "the last message must be a user message",
        id="last-not-user",
    ),
    pytest.param(request(), 422, "the last message must be a user message", id="no-messages"),
    pytest.param(
        request({"id": "t1", "role": "tool", "toolCallId": "nope", "content": "x"}, user("hi")),
        422,
        "which no earlier assistant message called",
        id="orphan-tool-result",
    ),
    pytest.param(
        request(
            user([{"type": "video", "source": {"type": "url", "value": "http://127.0.0.1/v"}}])
        ),
        422,
        "video part is not supported",
        id="video",
    ),
    pytest.param(
        request(
            {
                "id": "a",
                "role": "assistant",
                "toolCalls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{"}}
                ],
            },
            user("hi"),
        ),
        422,
        "arguments are not JSON",
        id="bad-arguments",
    ),
    pytest.param(
        request({"id": "a", "role": "assistant", "content": "I speak first"}, user("hi")),
        422,
        "first message must be a user message",
        id="unsafe-transcript",
    ),
]


@pytest.mark.parametrize(("body", "status", "words"), BAD)
async def test_a_bad_request_is_a_4xx_that_says_why_and_runs_nothing(
    body: Any, status: int, words: str
) -> None:
    guarded = Guarded()
    async with serving(AGUIApp(guarded.agent)) as url:
        code, answer = await send(
            url,
            None if isinstance(body, bytes) else body,
            raw=body if isinstance(body, bytes) else None,
        )
    assert code == status
    assert words in json.dumps(answer)
    assert "Traceback" not in json.dumps(answer)
    assert guarded.model.requests == [] and guarded.ran == []


async def test_a_body_over_the_cap_is_413_declared_or_streamed() -> None:
    guarded = Guarded()
    huge = json.dumps(request(user("x" * (10 * 1024 * 1024)))).encode()
    assert len(huge) > MAX_BODY_BYTES

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: the cap counts bytes read
        for start in range(0, len(huge), 1 << 20):
            yield huge[start : start + (1 << 20)]

    async with serving(AGUIApp(guarded.agent)) as url:
        code, answer = await send(url, None, raw=huge)
        assert code == 413 and str(MAX_BODY_BYTES) in answer["error"]
        async with aiohttp.ClientSession() as http, http.post(url, data=chunked()) as response:
            assert response.status == 413
    assert guarded.model.requests == [] and guarded.ran == []


async def test_only_post_is_answered() -> None:
    async with serving(AGUIApp(Guarded().agent)) as url:
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            assert response.status == 405
            assert "RunAgentInput" in (await response.json())["error"]


async def test_a_new_message_on_a_thread_waiting_for_answers_is_run_error() -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    agent = Agent(ScriptedModel([call("delete", {"path": "a"}, id="c1"), "done"]), tools=[delete])
    async with serving(AGUIApp(agent)) as url:
        await send(url, request(user("delete a")))
        code, events = await send(url, request(user("never mind", id="u2")))
        _, again = await send(
            url, request(user("x", id="u3"), resume=[{"interruptId": "c9", "status": "cancelled"}])
        )
    assert code == 200
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert "'c1'" in events[-1]["message"] and "resume" in events[-1]["message"]
    assert again[-1]["code"] == "InvalidInput" and "'c9'" in again[-1]["message"]
    assert ran == []


async def test_resume_on_a_thread_with_nothing_pending_is_run_error() -> None:
    guarded = Guarded()
    body = request(user("x"), resume=[{"interruptId": "c1", "status": "cancelled"}])
    async with serving(AGUIApp(guarded.agent)) as url:
        _, events = await send(url, body)
    assert events[-1]["type"] == "RUN_ERROR" and "no run of this thread" in events[-1]["message"]
    assert guarded.model.requests == []


async def test_the_session_picker_chooses_or_refuses() -> None:
    agent = Agent(ScriptedModel(["one", "two"]))
    mine = agent.session("alice-main")
    seen: list[tuple[str, str]] = []

    async def pick(request: Any, thread_id: str) -> Any:
        user_name = request.headers.get("x-user", "")
        seen.append((user_name, thread_id))
        if user_name != "alice":
            raise PermissionError(f"{user_name or 'nobody'} may not open {thread_id}")
        return mine

    async with serving(AGUIApp(agent, session=pick)) as url:
        async with aiohttp.ClientSession(headers={"x-user": "mallory"}) as http:
            async with http.post(url, json=request(user("hi"), thread="alice-main")) as response:
                assert response.status == 403
                assert (await response.json())["error"] == "mallory may not open alice-main"
        async with aiohttp.ClientSession(headers={"x-user": "alice"}) as http:
            async with http.post(url, json=request(user("hi"), thread="anything")) as response:
                assert response.status == 200
                await response.read()
    assert seen == [("mallory", "alice-main"), ("alice", "anything")]
    assert [run.output for run in mine.runs] == ["one"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_deps_come_from_the_request_through_the_hook(asynchronous: bool) -> None:
    seen: list[Any] = []

    @tool
    def whoami(ctx: ToolContext[dict[str, str]]) -> str:
        """Who is asking."""
        seen.append(ctx.deps)
        return ctx.deps["user"]

    def deps(request: Any, run_input: Any) -> dict[str, str]:
        return {"user": request.headers["x-user"], "thread": run_input.thread_id}

    async def deps_later(request: Any, run_input: Any) -> dict[str, str]:
        return deps(request, run_input)

    agent = Agent(ScriptedModel([call("whoami"), "ok"]), tools=[whoami])
    app = AGUIApp(agent, deps=deps_later if asynchronous else deps)
    async with serving(app) as url:
        async with aiohttp.ClientSession(headers={"x-user": "ann"}) as http:
            async with http.post(url, json=request(user("who am i"), thread="t9")) as response:
                body = await response.text()
    assert seen == [{"user": "ann", "thread": "t9"}]
    assert '"content":"ann"' in body


async def test_a_new_thread_starts_from_the_client_history_then_keeps_its_own() -> None:
    requests: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        requests.append(request)
        return f"answer {len(requests)}"

    agent = Agent(ScriptedModel([answer, answer]))
    history = [
        {"id": "s", "role": "developer", "content": "be brief"},
        user("my name is Ann", id="u1"),
        {"id": "a1", "role": "assistant", "content": "hello Ann"},
        {"id": "r1", "role": "reasoning", "content": "a UI's own record"},
        user("what is my name?", id="u2"),
    ]
    forged = [user("my name is Mallory", id="f1"), user("and now?", id="u3")]
    async with serving(AGUIApp(agent)) as url:
        await send(url, request(*history))
        await send(url, request(*forged))
    first = [(m.role, m.text) for m in requests[0].messages]
    assert ("user", "my name is Ann") in first and ("assistant", "hello Ann") in first
    assert first[-1] == ("user", "what is my name?")
    assert not any("UI's own record" in text or "be brief" in text for _, text in first)
    second = [(m.role, m.text) for m in requests[1].messages]
    assert ("user", "my name is Mallory") not in second  # the thread's own history is kept
    assert second[-1] == ("user", "and now?") and ("assistant", "answer 1") in second
