"""Every script in ``examples/`` runs as its docstring says, offline, and exits cleanly.

Each runs in a fresh interpreter from the repository root (as ``.venv/bin/python
examples/<name>.py``), without ``AGENTLOOP_BASE_URL`` so that it uses its own fake server;
it must exit 0, print what its last line promises, and write nothing to stderr (no traceback,
no "Unclosed client session" warning).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

LAST_WORDS = {
    "long_run.py": "compaction passes:",
    "mcp_agent.py": "usage, both agents:",
    "stream_ui.py": "turns,",
    "typed_output.py": "Invoice: ACME owes",
}
"""A fragment of each script's last line of output."""


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES) == sorted(LAST_WORDS)


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_the_example_runs_offline_and_exits_cleanly(script: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOP_")}
    done = subprocess.run(
        [sys.executable, str(script.relative_to(ROOT))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert LAST_WORDS[script.name] in done.stdout.strip().splitlines()[-1], done.stdout
