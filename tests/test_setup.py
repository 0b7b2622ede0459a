"""The README's two set-up commands do all set-up (issue 25, item 15), read from ``make -n``."""

from __future__ import annotations

import re
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


def test_make_check_is_lint_types_and_the_fast_tests_with_nothing_from_npm_or_apt() -> None:
    commands = dry_run("check")
    assert "ruff check" in commands and "ruff format --check" in commands and "mypy" in commands
    assert "pip install -q -e '.[dev]'" in commands
    assert "npm" not in commands and "apt-get" not in commands
    pytest_line = next(line for line in commands.splitlines() if "-m pytest" in line)
    assert "-rs" in pytest_line  # a skipped test says why
    ignored = re.findall(r"--ignore=(\S+)", pytest_line)
    assert "tests/durable" in ignored and "tests/ui/test_viewer_browser.py" in ignored
    assert [path for path in ignored if not (ROOT / path).exists()] == []  # no stale entry


def test_make_test_runs_the_whole_suite_and_says_why_a_test_skipped() -> None:
    pytest_line = next(line for line in dry_run("test").splitlines() if "-m pytest" in line)
    # nothing left out; one worker per core (pytest-xdist), so two cores take half the time
    assert pytest_line.endswith("-m pytest -q -rs -n auto")
