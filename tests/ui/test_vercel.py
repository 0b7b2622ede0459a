"""``VercelAIApp`` against the real ``ai`` package: a uvicorn server on 127.0.0.1, node as client.

The client is ``tests/ui/node/vercel_chat.mjs``: the ``ai`` package's own ``AbstractChat`` over
its ``DefaultChatTransport``, so every chunk is checked against the package's schema and
assembled into ``UIMessage`` parts by its own reader, and decisions go back through
``addToolApprovalResponse`` and ``addToolOutput`` as a page sends them. The model is the fake
OpenAI-compatible server behind the real OpenAI adapter (streamed text, tool-call deltas,
reasoning, faults). Skipped, with the reason, only when node or the npm packages are missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")

from agentloop import Agent, Session, ToolContext, tool
from agentloop.errors import Cancelled
from agentloop.providers import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault, Step
from agentloop.ui.vercel import VercelAIApp

from ._serve import serving as _serving

NODE_DIR = Path(__file__).parent / "node"
SCRIPT = NODE_DIR / "vercel_chat.mjs"

if shutil.which("node") is None:
    pytest.skip("node is not installed (make ui-deps)", allow_module_level=True)
if not (NODE_DIR / "node_modules" / "ai" / "package.json").exists():
    pytest.skip("tests/ui/node/node_modules/ai is missing (make ui-deps)", allow_module_level=True)


def serving(app: Any) -> contextlib.AbstractAsyncContextManager[str]:
    """``app`` on a real uvicorn server on 127.0.0.1; yields its ``/api/chat`` URL."""
    return _serving(app, "/api/chat")


async def chat(url: str, steps: Sequence[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """Run the node client through ``steps``; its final messages, errors and data parts."""
    scenario = {"url": url, "chatId": extra.pop("chat_id", "chat-1"), "steps": steps, **extra}
    proc = await asyncio.create_subprocess_exec(
        "node", str(SCRIPT), json.dumps(scenario), stdout=-1, stderr=-1
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)  # type: ignore[no-any-return]


@asynccontextmanager
async def app_over(
    script: Sequence[Step], tools: Sequence[Any], **app_options: Any
) -> AsyncIterator[tuple[str, FakeProviderServer, dict[str, Session[Any]]]]:
    """An agent over the fake provider, served; yields the URL, the server and the sessions."""
    sessions: dict[str, Session[Any]] = {}
    async with FakeProviderServer(script) as fake:
        client = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
        agent = Agent(client, tools=list(tools))

        def pick(request: Any, thread_id: str) -> Session[Any]:
            return sessions.setdefault(thread_id, agent.session())

        app = VercelAIApp(agent, session=pick, **app_options)
        async with serving(app) as url:
            yield url, fake, sessions
        await client.aclose()


def assistant_parts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The last assistant message's parts, without the step boundaries."""
    [*_, last] = [m for m in result["messages"] if m["role"] == "assistant"]
    return [p for p in last["parts"] if p["type"] != "step-start"]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


ran: list[str] = []


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (asks a person first)."""
    ran.append(path)
    return f"deleted {path}"


@tool(external=True)
def pick_color(prompt: str) -> str:
    """Ask the browser's user to pick a colour."""
    raise AssertionError("an external tool never runs on the server")


async def test_a_tool_turn_with_reasoning_assembles_into_parts() -> None:
    script = [
        FakeReply(thinking="2 and 3, add them", tool_calls=[FakeToolCall("add", {"a": 2, "b": 3})]),
        FakeReply("It is 5."),
    ]
    async with app_over(script, [add]) as (url, fake, sessions):
        result = await chat(url, [{"send": "what is 2 + 3?"}])
    reasoning, call, text = assistant_parts(result)
    assert reasoning["type"] == "reasoning" and reasoning["state"] == "done"
    assert reasoning["text"] == "2 and 3, add them"
    assert call["type"] == "tool-add" and call["state"] == "output-available"
    assert call["input"] == {"a": 2, "b": 3} and call["output"] == "5"
    assert call["toolCallId"] == fake.requests[1]["messages"][-1]["tool_call_id"]
    assert text == {"type": "text", "text": "It is 5.", "state": "done"}
    steps = next(m for m in result["messages"] if m["role"] == "assistant")["parts"]
    assert [p["type"] for p in steps].count("step-start") == 2  # one per turn
    assert (result["status"], result["errors"]) == ("ready", [])
    assert sessions["chat-1"].current_run.output == "It is 5."  # type: ignore[union-attr]


async def test_a_soft_error_is_a_tool_output_error_and_the_run_goes_on() -> None:
    script = [
        FakeReply(tool_calls=[FakeToolCall("divide", {"a": 1, "b": 0})]),
        FakeReply("You cannot divide by zero."),
    ]
    async with app_over(script, [divide]) as (url, fake, _):
        result = await chat(url, [{"send": "1/0?"}])
    call, text = assistant_parts(result)
    assert call["type"] == "tool-divide" and call["state"] == "output-error"
    read_by_model = fake.requests[1]["messages"][-1]["content"]
    assert call["errorText"] == read_by_model and "ZeroDivisionError" in call["errorText"]
    assert text["text"] == "You cannot divide by zero."
    assert result["status"] == "ready" and result["errors"] == []


async def test_a_hard_error_is_the_error_chunk_with_class_phase_and_request_sent() -> None:
    async with app_over([Fault.auth()], []) as (url, _, sessions):
        result = await chat(url, [{"send": "hello"}])
    assert result["status"] == "error"
    [text] = result["errors"]
    assert text.startswith("AuthError: ") and "(phase: status, request sent: yes)" in text
    [error] = [d for d in result["data"] if d["type"] == "data-error"]
    assert error["data"]["class"] == "AuthError"
    assert (error["data"]["phase"], error["data"]["request_sent"]) == ("status", True)
    assert error["data"]["recoverable"] is False
    assert type(sessions["chat-1"].current_run.stop_reason).__name__ == "AuthError"  # type: ignore[union-attr]


async def test_an_approval_pauses_and_the_next_request_decides_it() -> None:
    ran.clear()
    script = [
        FakeReply(tool_calls=[FakeToolCall("delete_file", {"path": "a.txt"})]),
        FakeReply("Deleted a.txt."),
    ]
    async with app_over(script, [delete_file]) as (url, fake, sessions):
        result = await chat(url, [{"send": "delete a.txt"}, {"approve": True}])
        run = sessions["chat-1"].current_run
    assert ran == ["a.txt"]
    messages = [m for m in result["messages"] if m["role"] == "assistant"]
    assert len(messages) == 1  # the continued response is the same assistant message
    call, text = assistant_parts(result)
    assert call["type"] == "tool-delete_file" and call["state"] == "output-available"
    assert call["output"] == "deleted a.txt" and call["approval"]["approved"] is True
    assert call["approval"]["id"] == call["toolCallId"]
    assert text["text"] == "Deleted a.txt."
    assert run is not None and run.output == "Deleted a.txt." and not run.paused
    assert len(fake.requests) == 2 and result["statuses"] == ["ready", "ready"]


async def test_a_paused_response_shows_the_approval_request() -> None:
    script = [FakeReply(tool_calls=[FakeToolCall("delete_file", {"path": "b.txt"})])]
    async with app_over(script, [delete_file]) as (url, _, sessions):
        result = await chat(url, [{"send": "delete b.txt"}])
        run = sessions["chat-1"].current_run
    [call] = assistant_parts(result)
    assert call["state"] == "approval-requested" and call["input"] == {"path": "b.txt"}
    assert call["approval"] == {"id": call["toolCallId"]}
    assert run is not None and run.paused and [p.id for p in run.pending] == [call["toolCallId"]]


async def test_a_denied_approval_is_output_denied_and_nothing_runs() -> None:
    ran.clear()
    script = [
        FakeReply(tool_calls=[FakeToolCall("delete_file", {"path": "c.txt"})]),
        FakeReply("Fine, I left it."),
    ]
    async with app_over(script, [delete_file]) as (url, fake, _):
        steps: list[dict[str, Any]] = [
            {"send": "delete c.txt"},
            {"approve": False, "reason": "keep it"},
        ]
        result = await chat(url, steps)
    assert ran == []
    call, text = assistant_parts(result)
    assert call["state"] == "output-denied" and text["text"] == "Fine, I left it."
    assert fake.requests[1]["messages"][-1]["content"] == "User denied permission: keep it"


async def test_an_external_call_is_answered_by_the_clients_tool_output() -> None:
    script = [
        FakeReply(tool_calls=[FakeToolCall("pick_color", {"prompt": "a colour?"})]),
        FakeReply("You picked teal."),
    ]
    async with app_over(script, [pick_color]) as (url, fake, _):
        result = await chat(url, [{"send": "pick a colour"}, {"output": "teal"}])
    call, text = assistant_parts(result)
    assert call["type"] == "tool-pick_color" and call["state"] == "output-available"
    assert call["output"] == "teal" and text["text"] == "You picked teal."
    assert fake.requests[1]["messages"][-1]["content"] == "teal"


async def test_a_client_that_stops_cancels_the_run() -> None:
    slow = FakeReply(" ".join(["word"] * 200), chunk_delay=0.05)
    async with app_over([slow], []) as (url, _, sessions):
        result = await chat(url, [{"send": "talk", "stopOn": "text"}])
        session = sessions["chat-1"]
        for _ in range(500):  # the server learns of the disconnect, then finalizes the run
            run = session.current_run
            if run is not None and run.stop_reason is not None:
                break
            await asyncio.sleep(0.01)
    assert isinstance(session.current_run.stop_reason, Cancelled)  # type: ignore[union-attr]
    [text] = assistant_parts(result)
    assert text["text"].startswith("word") and len(text["text"]) < 200 * 5


async def test_deps_come_from_the_apps_hook() -> None:
    @tool
    def whoami(ctx: ToolContext[str]) -> str:
        """The caller."""
        return f"you are {ctx.deps}"

    async def deps(request: Any, body: Any) -> str:
        return f"{request.headers['x-user']} of {body['team']}"

    script = [FakeReply(tool_calls=[FakeToolCall("whoami")]), FakeReply("ok")]
    async with app_over(script, [whoami], deps=deps) as (url, _, _sessions):
        result = await chat(
            url, [{"send": "who am I"}], headers={"x-user": "ada"}, body={"team": "blue"}
        )
    call, _text = assistant_parts(result)
    assert call["output"] == "you are ada of blue"


async def test_a_new_chat_is_seeded_from_the_clients_messages() -> None:
    """The default picker: a chat id the app has not seen starts from the UIMessage history."""
    async with FakeProviderServer([FakeReply("Your name is Ada.")]) as fake:
        client = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
        history = [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "I am Ada."}]},
            {
                "id": "a1",
                "role": "assistant",
                "parts": [
                    {"type": "step-start"},
                    {
                        "type": "tool-add",
                        "toolCallId": "call_9",
                        "state": "output-available",
                        "input": {"a": 1, "b": 1},
                        "output": "2",
                    },
                    {"type": "step-start"},
                    {"type": "text", "text": "Hello Ada.", "state": "done"},
                ],
            },
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Who am I?"}]},
        ]
        async with serving(VercelAIApp(Agent(client, tools=[add]))) as url:
            import aiohttp

            async with aiohttp.ClientSession() as http:
                body = {"id": "fresh", "messages": history, "trigger": "submit-message"}
                async with http.post(url, json=body) as response:
                    assert response.status == 200
                    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
                    raw = await response.text()
        await client.aclose()
    sent = fake.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["id"] == "call_9" and sent[2]["content"] == "2"
    assert sent[3]["content"] == "Hello Ada." and sent[4]["content"] == "Who am I?"
    assert raw.endswith("data: [DONE]\n\n")


async def test_the_wire_streams_tool_arguments_before_the_call_runs() -> None:
    """The raw SSE: the protocol's header, chunk order, and ``[DONE]`` last."""
    script = [FakeReply(tool_calls=[FakeToolCall("add", {"a": 20, "b": 22})]), FakeReply("42")]
    async with app_over(script, [add]) as (url, _, _sessions):
        import aiohttp

        async with aiohttp.ClientSession() as http:
            body = {
                "id": "raw",
                "messages": [
                    {"id": "u", "role": "user", "parts": [{"type": "text", "text": "20 + 22"}]}
                ],
                "trigger": "submit-message",
            }
            async with http.post(url, json=body) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
                raw = await response.text()
    events = [e.removeprefix("data: ") for e in raw.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    kinds = [c["type"] for c in chunks if c["type"] != "data-agentloop"]
    assert kinds[:2] == ["start", "start-step"]
    first = kinds.index("tool-input-start")
    assert kinds[first + 1] == "tool-input-delta"
    deltas = "".join(c["inputTextDelta"] for c in chunks if c["type"] == "tool-input-delta")
    assert json.loads(deltas) == {"a": 20, "b": 22}
    order = ["tool-input-start", "tool-input-available", "tool-output-available", "finish-step"]
    assert [k for k in kinds if k in order] == [*order, "finish-step"]
    assert kinds[-1] == "finish" and chunks[-1]["finishReason"] == "stop"


async def test_an_external_call_the_client_refuses_is_denied() -> None:
    script = [
        FakeReply(tool_calls=[FakeToolCall("pick_color", {"prompt": "a colour?"})]),
        FakeReply("No colour, then."),
    ]
    async with app_over(script, [pick_color]) as (url, fake, _):
        result = await chat(url, [{"send": "pick a colour"}, {"errorText": "the user closed it"}])
    call, text = assistant_parts(result)
    read = fake.requests[1]["messages"][-1]["content"]
    assert read == "User denied permission: the user closed it"
    assert call["state"] == "output-error" and call["errorText"] == read  # what the model read
    assert text["text"] == "No colour, then."


async def test_a_typed_answer_streams_as_a_data_output_part() -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        population: int

    answer = FakeToolCall("final_result", {"name": "Paris", "population": 2100000})
    async with FakeProviderServer([FakeReply(tool_calls=[answer])]) as fake:
        client = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
        agent = Agent(client, output_type=City)
        async with serving(VercelAIApp(agent)) as url:
            result = await chat(url, [{"send": "the biggest city of France"}])
        await client.aclose()
    parts = assistant_parts(result)
    [output] = [p for p in parts if p["type"] == "data-output"]
    assert output["data"] == {"name": "Paris", "population": 2100000}
    assert result["status"] == "ready"


async def test_a_child_agents_approval_pauses_the_parent_and_is_decided_in_its_message() -> None:
    ran.clear()
    script = [
        FakeReply(tool_calls=[FakeToolCall("cleaner", {"input": "remove d.txt"})]),  # parent
        FakeReply(tool_calls=[FakeToolCall("delete_file", {"path": "d.txt"})]),  # child
        FakeReply("Removed d.txt."),  # child, after the approval
        FakeReply("The cleaner removed d.txt."),  # parent
    ]
    async with FakeProviderServer(script) as fake:
        client = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
        child = Agent(client, tools=[delete_file])
        parent = Agent(client, tools=[child.as_tool(name="cleaner", description="Cleans up.")])
        async with serving(VercelAIApp(parent)) as url:
            result = await chat(url, [{"send": "remove d.txt"}, {"approve": True}])
        await client.aclose()
    assert ran == ["d.txt"]
    cleaner, delete, text = assistant_parts(result)
    assert cleaner["type"] == "tool-cleaner" and cleaner["output"] == "Removed d.txt."
    assert delete["type"] == "tool-delete_file" and delete["state"] == "output-available"
    assert delete["output"] == "deleted d.txt" and delete["approval"]["approved"] is True
    assert text["text"] == "The cleaner removed d.txt."
