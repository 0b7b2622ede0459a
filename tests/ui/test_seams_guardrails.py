"""What an end user sees of a guardrail (SPEC 18, 19), through both UI apps and their real clients.

An agent over the fake OpenAI-compatible server (real HTTP, streamed replies) with an
``OutputGuardrail(retry=True)``: the first answer holds a card number and is rejected, the
retry's answer passes. Served by uvicorn on 127.0.0.1, read by ``@ag-ui/client``
(``node/agui_events.mjs``) and by the ``ai`` package's chat (``node/vercel_chat.mjs``), and the
raw bytes on the wire are checked too: the rejected text, the placeholder that stands for it in
the transcript, the guardrail's name and the policy's reason never reach the client, unless the
app opts in with ``expose_guardrails=True`` (name and reason then do; the answer still never).
A hard ``GuardrailTripped`` is the protocol's error event with its class and a message that
names no guardrail and no reason unless exposed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent
from agentloop.guardrails import GuardrailContext, OutputGuardrail
from agentloop.providers import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

from ._serve import serving as _serving

NODE_DIR = Path(__file__).parent / "node"
CARD = "4111 1111 1111 1111"
REJECTED = f"Your card is {CARD}."
ACCEPTED = "I cannot share card numbers here."
REASON = "the answer holds a card number (PAN policy 7)"
SECRETS = (CARD, "answer withheld", "no_card_numbers", "PAN policy", "Output rejected")


def no_card_numbers(ctx: GuardrailContext[Any], value: str) -> str | None:
    return REASON if "4111" in value else None


def node_or_skip(package: str) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (make ui-deps needs it)")
    if not (NODE_DIR / "node_modules" / package).is_dir():
        pytest.skip(f"tests/ui/node/node_modules/{package} is missing: run `make ui-deps`")


class Tap:
    """An ASGI wrapper that keeps every byte the responses sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sent = bytearray()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def tapped(message: Any) -> None:
            if message["type"] == "http.response.body":
                self.sent += message.get("body", b"")
            await send(message)

        await self.app(scope, receive, tapped)


def serving(app: Any) -> contextlib.AbstractAsyncContextManager[str]:
    """``app`` on a real uvicorn server on 127.0.0.1; yields its ``/`` URL."""
    return _serving(app, "/")


@contextlib.asynccontextmanager
async def guarded(
    kind: type[AGUIApp] | type[VercelAIApp], *, retry: bool = True, **options: Any
) -> AsyncIterator[tuple[str, Tap]]:
    """A guarded agent over the fake provider behind ``kind``, served; the URL and the tap."""
    script = [FakeReply(REJECTED, thinking="Look the card up."), FakeReply(ACCEPTED)]
    async with FakeProviderServer(script) as provider:
        client = OpenAIClient("fake-model", api_key="k", base_url=provider.base_url)
        guard = OutputGuardrail(no_card_numbers, retry=retry)
        tap = Tap(kind(Agent(client, guardrails=[guard]), **options))
        async with serving(tap) as url:
            yield url, tap
        await client.aclose()


async def node(script: str, *args: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        "node", str(NODE_DIR / script), *args, cwd=NODE_DIR, stdout=-1, stderr=-1
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    seen: dict[str, Any] = json.loads(out)
    return seen


async def agui(url: str) -> dict[str, Any]:
    return await node("agui_events.mjs", url, json.dumps({"threadId": "t1", "say": ["card?"]}))


async def vercel(url: str) -> dict[str, Any]:
    return await node(
        "vercel_chat.mjs", json.dumps({"url": url, "chatId": "c1", "steps": [{"send": "card?"}]})
    )


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


# -- AG-UI ---------------------------------------------------------------------------------------


async def test_ag_ui_client_sees_only_the_retrys_answer() -> None:
    node_or_skip("@ag-ui/client")
    async with guarded(AGUIApp) as (url, tap):
        seen = await agui(url)
    assert leaks(tap.sent.decode()) == [] and leaks(json.dumps(seen)) == []
    [run] = seen["runs"]
    assert run["error"] is None
    said = [m for m in seen["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in said] == [ACCEPTED]  # no placeholder message, no empty one
    reasoning = [m["content"] for m in seen["messages"] if m["role"] == "reasoning"]
    assert reasoning == ["Look the card up."]  # the rejected reply's reasoning is the run's work
    assert not [e for e in run["events"] if e["type"] == "CUSTOM" and "Guardrail" in e["name"]]
    assert run["events"][-1]["type"] == "RUN_FINISHED"
    assert run["events"][-1]["result"] == ACCEPTED


async def test_ag_ui_client_sees_the_guardrail_when_the_app_exposes_it() -> None:
    node_or_skip("@ag-ui/client")
    async with guarded(AGUIApp, expose_guardrails=True) as (url, tap):
        seen = await agui(url)
    assert CARD not in tap.sent.decode() and "answer withheld" not in tap.sent.decode()
    [run] = seen["runs"]
    checks = [e["value"] for e in run["events"] if e.get("name") == "agentloop:GuardrailChecked"]
    assert [(c["guardrail"], c["tripped"], c["reason"]) for c in checks] == [
        ("no_card_numbers", True, REASON),
        ("no_card_numbers", False, None),
    ]
    assert all("replayed" not in c for c in checks)  # a durable internal, said only when True
    said = [m["content"] for m in seen["messages"] if m["role"] == "assistant"]
    assert said == [ACCEPTED]


@pytest.mark.parametrize("expose", [False, True], ids=["hidden", "exposed"])
async def test_ag_ui_client_sees_a_tripped_guardrail_as_run_error(expose: bool) -> None:
    node_or_skip("@ag-ui/client")
    async with guarded(AGUIApp, retry=False, expose_guardrails=expose) as (url, tap):
        seen = await agui(url)
    [run] = seen["runs"]
    assert run["error"]["code"] == "GuardrailTripped"
    assert CARD not in tap.sent.decode() and "answer withheld" not in tap.sent.decode()
    assert not [m for m in seen["messages"] if m["role"] == "assistant"]
    if expose:
        assert run["error"]["message"] == f"Guardrail 'no_card_numbers' tripped: {REASON}"
        facts = run["error"]["metadata"]["agentloop"]
        assert facts["guardrail"] == "no_card_numbers" and facts["reason"] == REASON
    else:
        assert leaks(tap.sent.decode()) == []
        assert run["error"]["message"] == "The application's guardrails stopped this run."


# -- Vercel AI SDK -------------------------------------------------------------------------------


async def test_vercel_client_sees_only_the_retrys_answer() -> None:
    node_or_skip("ai")
    async with guarded(VercelAIApp) as (url, tap):
        seen = await vercel(url)
    assert leaks(tap.sent.decode()) == [] and leaks(json.dumps(seen)) == []
    assert seen["errors"] == [] and seen["data"] == []
    [message] = [m for m in seen["messages"] if m["role"] == "assistant"]
    texts = [p["text"] for p in message["parts"] if p["type"] == "text"]
    assert texts == [ACCEPTED]
    assert [p["text"] for p in message["parts"] if p["type"] == "reasoning"] == [
        "Look the card up."
    ]
    assert not [p for p in message["parts"] if p["type"].startswith("tool-")]


async def test_vercel_client_sees_the_guardrail_when_the_app_exposes_it() -> None:
    node_or_skip("ai")
    async with guarded(VercelAIApp, expose_guardrails=True) as (url, tap):
        seen = await vercel(url)
    assert CARD not in tap.sent.decode() and "answer withheld" not in tap.sent.decode()
    checks = [d["data"] for d in seen["data"] if d["data"]["kind"] == "GuardrailChecked"]
    assert [(c["guardrail"], c["tripped"], c["reason"], c["event_kind"]) for c in checks] == [
        ("no_card_numbers", True, REASON, "output"),
        ("no_card_numbers", False, None, "output"),
    ]
    assert all("replayed" not in c for c in checks)  # a durable internal, said only when True
    [message] = [m for m in seen["messages"] if m["role"] == "assistant"]
    assert [p["text"] for p in message["parts"] if p["type"] == "text"] == [ACCEPTED]


@pytest.mark.parametrize("expose", [False, True], ids=["hidden", "exposed"])
async def test_vercel_client_sees_a_tripped_guardrail_as_the_error_chunk(expose: bool) -> None:
    node_or_skip("ai")
    async with guarded(VercelAIApp, retry=False, expose_guardrails=expose) as (url, tap):
        seen = await vercel(url)
    [error] = seen["errors"]
    [fields] = [d["data"] for d in seen["data"] if d["type"] == "data-error"]
    assert error.startswith("GuardrailTripped: ") and fields["class"] == "GuardrailTripped"
    assert CARD not in tap.sent.decode() and "answer withheld" not in tap.sent.decode()
    if expose:
        assert error == f"GuardrailTripped: Guardrail 'no_card_numbers' tripped: {REASON}"
        assert fields["guardrail"] == "no_card_numbers" and fields["reason"] == REASON
    else:
        assert leaks(tap.sent.decode()) == []
        assert error == "GuardrailTripped: The application's guardrails stopped this run."


# -- a typed answer: the rejected final_result call is not shown either --------------------------


@pytest.mark.parametrize("kind", [AGUIApp, VercelAIApp], ids=["ag-ui", "vercel"])
def test_a_rejected_typed_answer_shows_no_final_result_call(kind: Any) -> None:
    from pydantic import BaseModel
    from starlette.testclient import TestClient

    from agentloop.testing import ScriptedModel, call

    class Reply(BaseModel):
        text: str

    def no_cards(ctx: GuardrailContext[Any], value: Reply) -> str | None:
        return REASON if "4111" in value.text else None

    model = ScriptedModel(
        [
            call("final_result", {"text": REJECTED}, id="call_rejected_answer"),
            call("final_result", {"text": ACCEPTED}, id="call_accepted_answer"),
        ]
    )
    guard = OutputGuardrail(no_cards, retry=True)
    app = kind(Agent(model, output_type=Reply, guardrails=[guard]))
    if kind is AGUIApp:
        body: dict[str, Any] = {"threadId": "t", "runId": "r"}
        body["messages"] = [{"id": "u", "role": "user", "content": "card?"}]
    else:
        body = {
            "id": "c",
            "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "card?"}]}],
        }
    with TestClient(app) as client:
        sent = client.post("/", json=body).text
    assert "call_rejected_answer" not in sent and leaks(sent) == []
    assert ACCEPTED in sent and "call_accepted_answer" in sent
