"""The viewer's status filter is the store's ``status`` column (SPEC 9), ``waiting`` among them.

A real batch run (the fake server's batch API) waits under 1,200 newer completed runs: the
``?status=waiting`` page finds it on its first page, which a filter over parsed records (at most
``SCAN`` a page) could not; its page names the batch it waits on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agentloop import Agent, RunConfig
from agentloop.providers import OpenAIClient
from agentloop.run import Run
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply
from agentloop.ui.viewer import ViewerApp
from agentloop.ui.viewer._records import SCAN

pytestmark = pytest.mark.usefixtures("no_real_sleep")

LOCAL = "http://127.0.0.1"
NEWER = 1200


async def _waiting_run(path: Path) -> Run:
    async with FakeProviderServer([FakeReply("later")]) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        agent = Agent(client, store=SQLiteStore(path), config=RunConfig(batch=True))
        try:
            return await agent.run("summarise the report")
        finally:
            await agent.aclose()


def test_the_status_filter_is_one_query_on_the_status_column(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    waiting = asyncio.run(_waiting_run(path))
    assert waiting.waiting is not None
    store = SQLiteStore(path)
    done: list[Run[Any]] = [Run(id=f"done{i:04d}", input="x", output="ok") for i in range(NEWER)]
    store.finish_runs("many", done, keep=0, append=[])  # newer than the waiting run
    store.close()
    assert NEWER > SCAN
    app = ViewerApp(str(path), poll_seconds=0.01)
    with TestClient(app, base_url=LOCAL) as client:
        page = client.get("/?status=waiting").text
        assert f'data-run="{waiting.id}"' in page and "done0000" not in page
        assert "1 of 1 waiting run" in page
        assert '<option value="waiting" selected>' in page
        shown = client.get(f"/runs/{waiting.id}").text
        assert 'id="run-status">waiting</span>' in shown
        assert f"batch {waiting.waiting.batch_id}" in shown
        assert f'data-run="{waiting.id}"' not in client.get("/?status=completed").text
    app.close()
