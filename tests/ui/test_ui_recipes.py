"""The recipes of ``docs/ui.md`` keep their promises: the extra they need, a route, no redirect."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from agentloop import Agent
from agentloop.testing import ScriptedModel
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

ROOT = Path(__file__).resolve().parents[2]
ASK = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]}


def test_the_ui_extra_holds_what_the_testclient_examples_need() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {re.split(r"[<>=\[ ]", spec, maxsplit=1)[0] for spec in extras["ui"]}
    assert {"starlette", "uvicorn", "ag-ui-protocol", "httpx"} <= names


@pytest.mark.parametrize("kind", [AGUIApp, VercelAIApp], ids=["ag-ui", "vercel"])
def test_a_route_answers_a_post_without_a_redirect(kind: type[AGUIApp] | type[VercelAIApp]) -> None:
    app = Starlette(routes=[Route("/agent", kind(Agent(ScriptedModel(["ok"]))), methods=["POST"])])
    body = (
        ASK
        if kind is AGUIApp
        else {
            "id": "t",
            "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        }
    )
    with TestClient(app, follow_redirects=False) as client:
        response = client.post("/agent", json=body)
    assert response.status_code == 200 and "ok" in response.text


def test_a_mount_costs_a_post_to_its_own_path_a_redirect() -> None:
    """Why the docs route instead of mounting: what the recipe used to cost each request."""
    app = Starlette(routes=[Mount("/agent", AGUIApp(Agent(ScriptedModel(["ok", "ok"]))))])
    with TestClient(app, follow_redirects=False) as client:
        redirected = client.post("/agent", json=ASK)
        direct = client.post("/agent/", json={**ASK, "threadId": "t2"})
    assert redirected.status_code == 307 and redirected.headers["location"].endswith("/agent/")
    assert direct.status_code == 200
