"""The README's two set-up commands do all set-up (issue 25, item 15), read from ``make -n``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def dry_run(target: str) -> str:
    """What ``make TARGET`` would run from scratch (``-B``: as on a fresh clone)."""
    done = subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_make_demo_installs_only_what_the_demo_uses() -> None:
    commands = dry_run("demo")
    assert "pip install -q -e '.[cli]'" in commands
    assert ".[dev]" not in commands and "npm" not in commands


def test_make_test_installs_the_npm_server_its_tests_start() -> None:
    commands = dry_run("test")
    assert "npm install --prefix .ci/node" in commands
    assert "@modelcontextprotocol/server-filesystem@" in commands
    assert (ROOT / ".ci/run").read_text().rstrip().endswith("make test")
