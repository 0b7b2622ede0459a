"""The terminal boundary under a real pseudo-terminal: hostile bytes are shown, never obeyed.

A model reply, a tool's arguments and result, and a stored run carry a window title, clear
screen, an OSC 8 hyperlink, an OSC 52 clipboard write, colours and an 8-bit CSI. What reaches the
terminal may hold rich's own styling and cursor movement, and nothing else that a terminal acts on.
"""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentloop.cli.terminal import visible
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")

HOSTILE = (
    "start \x1b]52;c;SGVsbG8=\x07 clip \x1b[2J\x1b[H wiped \x1b]0;pwned-title\x07 titled "
    "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\ linked \x1b[31mred\x1b[0m \x9b2J end"
)
# rich's own output in a terminal: SGR colours, cursor up, erase line, cursor shown/hidden, CR
_RICH_OWN = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\d*[AK]|\x1b\[\?25[lh]|\r")


def obeyable(screen: str) -> list[str]:
    """Every control character on ``screen`` a terminal would act on, beyond rich's own."""
    rest = _RICH_OWN.sub("", screen)
    return [c for c in rest if c not in "\n\t" and (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F)]


def test_visible_shows_every_control_character_but_newline_and_tab() -> None:
    assert visible("a\x1b[2Jb\tc\nd\x9be\x7f\x00\r\nf\rg") == (
        "a\\x1b[2Jb\tc\nd\\x9be\\x7f\\x00\nf\\x0dg"
    )
    assert not obeyable(visible(HOSTILE)) and visible("plain [text]") == "plain [text]"


@contextmanager
def serving(steps: list[FakeReply | Fault]) -> Iterator[FakeProviderServer]:
    loop = asyncio.new_event_loop()
    server = FakeProviderServer(steps, default=FakeReply("The script is over."))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def in_a_terminal(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as stdin, stdout and stderr; what it drew."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("COLUMNS", None)
    child = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env | {"PYTHONDONTWRITEBYTECODE": "1", "TERM": "xterm-256color"},
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([leader], [], [], 0.1)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif child.poll() is not None:
            break
    child.wait(10)
    os.close(leader)
    return child.returncode, out.decode("utf-8", errors="replace")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.rs").write_text("fn main() {}\n" + HOSTILE + "\n")
    return tmp_path


def run_argv(base_url: str, *args: str) -> list[str]:
    return [
        *(sys.executable, "-m", "agentloop", "run", "summarise " + HOSTILE),
        *("--provider", "openai", "--model", "fake-model", "--base-url", base_url, *args),
    ]


STEPS: list[FakeReply | Fault] = [
    FakeReply(
        "Reading. " + HOSTILE,
        thinking="thought " + HOSTILE,
        tool_calls=[
            FakeToolCall("read_file", {"path": "src/" + HOSTILE}),
            FakeToolCall("read_file", {"path": "src/main.rs"}),
        ],
    ),
    FakeReply("Done " + HOSTILE + "\n\n[a link](http://evil.example/)"),
]


@pytest.mark.parametrize("mode", [(), ("--plain",)], ids=["live", "plain"])
def test_run_in_a_terminal_shows_hostile_bytes_and_never_sends_them(
    project: Path, mode: tuple[str, ...]
) -> None:
    with serving(list(STEPS)) as server:
        code, screen = in_a_terminal(run_argv(server.base_url, *mode), project)
    assert code == 0, screen
    assert obeyable(screen) == [], screen
    assert "\\x1b]52;c;SGVsbG8=" in screen and "\\x1b]0;pwned-title" in screen
    assert "\\x9b2J end" in screen and "titled" in screen and "Done" in screen
    assert "]8;" not in screen.replace("\\x1b]8;", "")  # no hyperlink but the shown text


def test_runs_show_of_a_hostile_stored_run_in_a_terminal(project: Path) -> None:
    db = project / "runs.db"
    with serving(list(STEPS)) as server:
        code, screen = in_a_terminal(run_argv(server.base_url, "--store", str(db)), project)
    assert code == 0, screen
    from agentloop.store import SQLiteStore

    store = SQLiteStore(db)
    try:
        [stored] = store.load_runs()
    finally:
        store.close()
    base = [sys.executable, "-m", "agentloop", "runs", "--store", str(db)]
    for argv in (base, [*base, "show", stored.run.id[:8]], [*base, "show", stored.session_id]):
        code, screen = in_a_terminal(argv, project)
        assert code == 0, screen
        assert obeyable(screen) == [], screen
        assert "\\x1b]52;c;" in screen  # shown (the listings cut it to a column's width)
