"""Hostile requests never produce a traceback or a 500 from us (SPEC 18), in both UI apps.

Over a real uvicorn server on 127.0.0.1 (aiohttp as the client): a body nested past the
parser's depth (3 MB of ``[``), one holding a lone surrogate, ``NaN`` or no JSON at all, or of
the wrong shape, is the protocol's 4xx with a JSON error, and nothing runs. The app's own
``session=`` and ``deps=`` callables failing (a message holding an ``sk-`` key), or a
``session=`` returning something that is no ``Session``, is a 500 with a redacted message,
logged once, redacted; a ``PermissionError`` the app raises stays its refusal (403).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from typing import Any

import aiohttp
import pytest

from agentloop import Agent
from agentloop.testing import ScriptedModel
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

from ._serve import serving as _serving

KEY = "sk-proj-4f9Qx2LmZ7pT1vW8yB3nR6kD"
APPS = [AGUIApp, VercelAIApp]
IDS = ["ag-ui", "vercel"]


def serving(app: Any) -> contextlib.AbstractAsyncContextManager[str]:
    """``app`` on a real uvicorn server on 127.0.0.1; yields its ``/`` URL."""
    return _serving(app, "/")


def good_body(kind: Any) -> dict[str, Any]:
    if kind is AGUIApp:
        return {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "u", "role": "user", "content": "hi"}],
        }
    return {
        "id": "t",
        "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    }


async def post(url: str, data: bytes) -> tuple[int, str, Any]:
    headers = {"content-type": "application/json"}
    payload = io.BytesIO(data)  # aiohttp warns of a large body given as bytes
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, data=payload, headers=headers) as got,
    ):
        text = await got.text()
        return got.status, got.content_type, text


def message_of(kind: Any, text: str) -> str:
    import json

    error = json.loads(text)["error"]
    return str(error if kind is AGUIApp else error["message"])


HOSTILE = [
    pytest.param(b"[" * 3_000_000, "nested deeper than 200 levels", id="3MB-of-["),
    pytest.param(b"[" * 300 + b"]" * 300, "nested deeper than 200 levels", id="deep-but-closed"),
    pytest.param(b'{"threadId": "\\ud800", "id": "\\ud800"}', "not JSON", id="lone-surrogate"),
    pytest.param(b'{"id": NaN}', "not JSON", id="nan"),
    pytest.param(b"\xff\xfe", "not JSON", id="not-utf8"),
    pytest.param(b"{nope", "not JSON", id="not-json"),
]


@pytest.mark.parametrize("kind", APPS, ids=IDS)
@pytest.mark.parametrize(("body", "words"), HOSTILE)
async def test_a_hostile_body_is_a_4xx_and_nothing_runs(kind: Any, body: bytes, words: str) -> None:
    model = ScriptedModel(["never"])
    async with serving(kind(Agent(model))) as url:
        status, content_type, text = await post(url, body)
    assert status == 400 and content_type == "application/json"
    assert words in message_of(kind, text) and "Traceback" not in text
    assert model.requests == []


@pytest.mark.parametrize("kind", APPS, ids=IDS)
@pytest.mark.parametrize("body", [b"[]", b"null", b'"x"', b'{"messages": 3}'], ids=str)
async def test_a_body_of_the_wrong_shape_is_a_4xx(kind: Any, body: bytes) -> None:
    model = ScriptedModel(["never"])
    async with serving(kind(Agent(model))) as url:
        status, content_type, _ = await post(url, body)
    assert status in (400, 422) and content_type == "application/json"
    assert model.requests == []


async def test_deeply_nested_tool_arguments_in_an_ag_ui_history_are_a_422() -> None:
    import json

    deep = "[" * 300 + "]" * 300
    call = {"id": "c", "type": "function", "function": {"name": "x", "arguments": deep}}
    messages = [
        {"id": "u0", "role": "user", "content": "x"},
        {"id": "a", "role": "assistant", "toolCalls": [call]},
        {"id": "u", "role": "user", "content": "y"},
    ]
    body = json.dumps({"threadId": "t", "runId": "r", "messages": messages}).encode()
    model = ScriptedModel(["never"])
    async with serving(AGUIApp(Agent(model))) as url:
        status, _, text = await post(url, body)
    assert status == 422 and "arguments are not JSON: nested deeper than 200" in text
    assert model.requests == []


# -- the app's own callables ---------------------------------------------------------------------


def leaky(*args: Any) -> Any:
    raise RuntimeError(f"could not reach the vault with {KEY}")


async def leaky_async(*args: Any) -> Any:
    await asyncio.sleep(0)
    raise ConnectionError(f"db down, token={KEY}")


def not_a_session(request: Any, thread_id: str) -> Any:
    return {"thread": thread_id}


@pytest.mark.parametrize("kind", APPS, ids=IDS)
@pytest.mark.parametrize(
    ("option", "hook", "error"),
    [
        ("deps", leaky, "RuntimeError"),
        ("deps", leaky_async, "ConnectionError"),
        ("session", leaky, "RuntimeError"),
        ("session", leaky_async, "ConnectionError"),
        ("session", not_a_session, "dict, not a Session"),
    ],
    ids=["deps", "async-deps", "session", "async-session", "session-gives-a-dict"],
)
async def test_the_apps_own_callable_failing_is_a_500_redacted_and_logged_once(
    kind: Any, option: str, hook: Any, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    import json

    model = ScriptedModel(["never"])
    caplog.set_level(logging.ERROR, logger="agentloop")
    async with serving(kind(Agent(model), **{option: hook})) as url:
        status, content_type, text = await post(url, json.dumps(good_body(kind)).encode())
    assert status == 500 and content_type == "application/json"
    said = message_of(kind, text)
    assert f"{option}= callable" in said and error in said
    assert KEY not in text and "Traceback" not in text
    logged = [r for r in caplog.records if r.name == "agentloop" and option in r.getMessage()]
    assert len(logged) == 1
    assert KEY not in logged[0].getMessage() and not logged[0].exc_info
    if hook is not not_a_session:
        assert "[REDACTED]" in logged[0].getMessage() and "Traceback" in logged[0].getMessage()
    assert model.requests == []


@pytest.mark.parametrize("kind", APPS, ids=IDS)
async def test_a_permission_error_from_the_os_is_a_failure_not_a_refusal(kind: Any) -> None:
    import json

    def opens_a_file(request: Any, thread_id: str) -> Any:
        raise PermissionError(13, "Permission denied", "/srv/secrets/users.db")

    async with serving(kind(Agent(ScriptedModel(["never"])), session=opens_a_file)) as url:
        status, _, text = await post(url, json.dumps(good_body(kind)).encode())
    assert status == 500 and "/srv/secrets" not in text
