"""A rate governor that cannot be reached, as the end user's chat shows it (SPEC 25 x SPEC 18).

``GovernorUnavailable`` fails closed (nothing sent): the run ends with it, typed. Its message
names the backend (a SQLite path, a PostgreSQL user, host and database) and the driver's error
(which names the server again): the app's internals, for the log, the store and the viewer. The
real ``@ag-ui/client`` and ``ai`` chat read the error's class and a user-safe message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
from tests.ui._serve import serving
from tests.ui.test_seams_events import node

from agentloop import Agent
from agentloop.errors import GovernorUnavailable
from agentloop.fleet import RateGovernor, RateLimit
from agentloop.providers import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply
from agentloop.ui._client_view import GOVERNOR_MESSAGE
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

HIDDEN = "srv-ops-governor"


@pytest.mark.parametrize("face", ["ag_ui", "vercel"])
async def test_an_unreachable_governor_shows_no_backend(face: str, tmp_path: Path) -> None:
    backend = f"sqlite:///{tmp_path / HIDDEN / 'no' / 'such' / 'governor.db'}"
    governor = RateGovernor([RateLimit("openai", rpm=60)], backend=backend)
    async with FakeProviderServer(default=FakeReply("never")) as fake:
        client = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url, provider="openai")
        async with client:
            agent = Agent(client, store=SQLiteStore(tmp_path / "runs.db"), governor=governor)
            pick: Callable[[Any, str], Any] = lambda request, thread: agent.session(thread)  # noqa: E731
            if face == "ag_ui":
                async with serving(AGUIApp(agent, session=pick)) as url:
                    seen = await node("agui_seams.mjs", url, "hello")
                assert seen["error"]["code"] == "GovernorUnavailable"
                assert seen["error"]["message"] == GOVERNOR_MESSAGE
            else:
                async with serving(VercelAIApp(agent, session=pick)) as url:
                    seen = await node("vercel_seams.mjs", json.dumps({"url": url, "send": "hello"}))
                assert seen["errors"] == [f"GovernorUnavailable: {GOVERNOR_MESSAGE}"]
        assert fake.received == []  # fail closed: nothing sent
    visible = json.dumps(seen)
    for internal in (HIDDEN, "sqlite", "OperationalError", "Traceback"):
        assert internal not in visible
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        [record] = store.load_runs("seams")
    finally:
        store.close()
    assert isinstance(record.run.stop_reason, GovernorUnavailable)
    assert HIDDEN in str(record.run.stop_reason)  # the store keeps the whole story
