"""What an A2A or MCP client reads when the app's own code failed inside a compactor or a
memory namespace function (SPEC 26 x 7 x 27): the error's class and the user-safe words.

The same runs as ``tests/ui/test_seams3_app_failures.py`` (a compactor that raises with the
app's database host, a memory namespace function that does) served by ``A2AApp`` (official
a2a-sdk client) and ``MCPApp`` (official mcp client), over uvicorn on 127.0.0.1. Before, the
A2A task's status and the MCP result showed the host; the store keeps it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.ui.test_seams3_app_failures import CASES, HIDDEN, IDS, INTERNAL, stored_error

from agentloop.store import SQLiteStore

from .test_seams2_served_internals import _said

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize("face", ["a2a", "mcp"])
@pytest.mark.parametrize(("build", "error"), CASES, ids=IDS)
async def test_the_client_reads_no_internal_text(
    face: str, build: Any, error: type, tmp_path: Path
) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        said = await _said(face, build(store))
        assert HIDDEN in stored_error(store)
    assert said == f"{error.__name__}: {INTERNAL}"
