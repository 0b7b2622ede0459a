"""The command line: the demo, ``run`` against a real fake server, ``runs``, fault names."""

import argparse
import asyncio
import io
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

import pytest

from agentloop.cli.commands import main
from agentloop.cli.fake import fault_list as _fault_list
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault


def demo_table(out: str, title: str) -> list[list[str]]:
    """The rows of one of the demo's closing tables (cells split on runs of 2+ spaces)."""
    lines = out.split(f" {title} ", 1)[1].splitlines()[1:]
    rows = []
    for line in lines[2:]:
        if line.startswith("─"):
            break
        if line[:1].isdigit():  # a wrapped cell's continuation line starts with blanks
            rows.append(re.split(r" {2,}", line.strip()))
    return rows


@pytest.fixture(scope="module")
def demo_output() -> str:
    """What ``agentloop demo`` prints at 80 columns (run once for the tests that read it)."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out):
        patch.setenv("COLUMNS", "80")
        assert main(["demo"]) == 0
    return out.getvalue()


def test_demo_runs_every_scenario(demo_output: str) -> None:
    out = demo_output
    assert "src/main.rs prints hello." in out
    assert "tool 'read_fille' is not available. Did you mean 'read_file'?" in out
    assert "contains '..'" in out
    assert "LoopDetected" in out
    assert "backup model answered." in out
    # a Retry-After honoured: the 429 asked for 0.3 s and RetryingClient waited exactly that
    assert "Retry-After honoured: the server sent Retry-After: 0.3; waited 0.30s" in out
    # a tool breaker opening: three sick failures, then a refusal that never runs the tool
    assert out.count("soft error: connection refused by db.internal:5432") == 3
    assert "soft error: tool temporarily unavailable: circuit breaker open" in out
    assert "query_db ran 3 times for 4 calls" in out
    # a cancel mid-run: Cancelled, and the history keeps the turn that finished
    assert "cancel: the CancelToken fires while run_tests runs" in out
    assert "cancelled: Cancelled: Agent cancelled" in out
    assert "history keeps 3 messages (user, assistant, tool)" in out
    # an unreachable server, explained as agentloop run would
    assert "It failed in the connect phase, before the request was sent, after 4 attempts." in out


def test_demo_tables_list_every_provider_error_and_every_run(demo_output: str) -> None:
    out = demo_output
    header = out.split(" provider errors ", 1)[1].splitlines()[1].split()
    assert header == ["#", "error", "status", "phase", "request_sent", "attempts", "then"]
    errors = demo_table(out, "provider errors")
    assert ["1", "ProviderUnavailable", "503", "status", "True", "1", "retry 0.01s"] in errors
    assert ["1", "RateLimited", "429", "status", "True", "2", "retry 0.30s"] in errors
    assert ["6", "ResponseInvalid", "-", "body", "True", "3", "retry 0.04s"] in errors
    assert ["6", "ProviderUnavailable", "503", "status", "True", "4", "fell back"] in errors
    assert ["7", "ProviderUnavailable", "-", "connect", "False", "4", "raised"] in errors
    assert len(errors) == 10
    runs = demo_table(out, "run records")
    assert [row[0] for row in runs] == ["1", "2", "3", "4", "5", "6", "7"]
    assert [row[-1] for row in runs] == [
        "-",
        "-",
        "LoopDetected",
        "-",
        "Cancelled",
        "-",
        "ProviderUnavailable",
    ]
    assert all(len(line) <= 80 for line in out.split(" provider errors ", 1)[1].splitlines())


def test_make_demo_finishes_in_under_a_minute_offline() -> None:
    """``python -m agentloop demo`` as ``make demo`` runs it: exit 0, nothing on stderr."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "demo"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "run records" in done.stdout
    assert elapsed < 60


def test_fault_names() -> None:
    assert _fault_list("rate-limit, reset") == ["rate_limit", "reset"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown fault"):
        _fault_list("explode")


# --- runs show: every tool call's arguments and every soft error's text, literally -----------


@pytest.fixture
def stored_run(tmp_path: Path) -> tuple[Path, str]:
    from agentloop import Agent, ToolError, tool
    from agentloop.store import SQLiteStore
    from agentloop.testing import ScriptedModel, call, reply

    @tool
    def read_file(path: str) -> str:
        """Read a UTF-8 text file."""
        if path != "src/main.rs":
            raise ToolError(f"file {path} not found; [bold]no[/bold] such file. " + "x" * 90)
        return "fn main() {}\nmore"

    db = tmp_path / "runs.db"
    store = SQLiteStore(str(db))
    model = ScriptedModel(
        [
            [
                "Looking at [red]list[int][/red].",
                call("read_file", {"path": "src/[mian].rs"}),
                call("raed_file", {"path": "a"}),
            ],
            call("read_file", {"path": "src/main.rs"}),
            reply("done: list[int] [bold]x[/]"),
        ]
    )
    agent = Agent(model, tools=[read_file], store=store, session_id="s")
    run = agent.run_sync("explain list[int] [bold]now[/]")
    store.close()
    return db, run.id


def test_runs_show_prints_arguments_and_soft_errors_literally(
    stored_run: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    db, run_id = stored_run
    assert main(["runs", "--store", str(db), "show", run_id[:8]]) == 0
    out = capsys.readouterr().out
    flat = " ".join(line.strip() for line in out.splitlines())  # undo the wrapping at 80
    assert "turn 0 (scripted): 2 tool calls, 2 soft errors" in out
    assert "says: Looking at [red]list[int][/red]." in out
    assert 'call read_file {"path": "src/[mian].rs"}' in out
    assert 'call raed_file {"path": "a"}' in out
    assert "soft error: file src/[mian].rs not found; [bold]no[/bold] such file. " in flat
    assert "x" * 90 in flat.replace(" ", "")  # the whole text, not a preview
    assert "soft error: tool 'raed_file' is not available. Did you mean 'read_file'?" in flat
    assert "ok: fn main() {} …" in out
    assert "explain list[int] [bold]now[/]" in out and "'explain" not in out  # no repr
    assert "done: list[int] [bold]x[/]" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert not [line for line in out.splitlines() if line != line.rstrip()]


def test_runs_list_fits_80_columns(
    stored_run: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    db, run_id = stored_run
    assert main(["runs", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert run_id[:12] in out and out.rstrip().endswith("1 run")
    assert max(len(line) for line in out.splitlines()) <= 80


def test_attempt_log_waits_are_rounded() -> None:
    from agentloop.cli.stopped import _attempt
    from agentloop.errors import AttemptRecord

    record = AttemptRecord(2, "RateLimited", 429, None, True, 0.123456, 1.23456)
    assert _attempt(record) == (
        "#2 RateLimited status=429 phase=- sent=True took 0.12s, then waited 1.2s"
    )
    last = AttemptRecord(3, "ServerError", 503, None, True, 12.5, 0.0)
    assert _attempt(last).endswith("took 12s")


# --- agentloop run: a real subprocess (or main()) against a real fake server --------------------


@contextmanager
def serving(steps: list[FakeReply | Fault]) -> Iterator[FakeProviderServer]:
    """A fake OpenAI-compatible server on its own thread and event loop, for the CLI to call."""
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


def agentloop_run(base_url: str, *args: str, task: str = "Summarise src/main.rs") -> list[str]:
    """The argv of ``agentloop run`` against ``base_url`` (a subprocess, no provider keys)."""
    return [
        sys.executable,
        "-m",
        "agentloop",
        "run",
        task,
        "--provider",
        "openai",
        "--model",
        "fake-model",
        "--base-url",
        base_url,
        *args,
    ]


def run_in_process(task: str, base_url: str, *args: str) -> int:
    """``agentloop run`` through ``main()`` (output captured by capsys: not a terminal)."""
    return main(["run", task, "--provider", "openai", "--base-url", base_url, *args])


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("COLUMNS", None)
    return env | {"PYTHONDONTWRITEBYTECODE": "1", "TERM": "xterm-256color"}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a file to read; the CLI runs in it."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.rs").write_text('fn main() { println!("hello"); }\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


REPLY = "# Summary\n\n`main.rs` prints **hello**.\n\n- one\n- two"
TOOL_ROUND_TRIP: list[FakeReply | Fault] = [
    FakeReply("Let me look.", tool_calls=[FakeToolCall("read_file", {"path": "src/mian.rs"})]),
    FakeReply(tool_calls=[FakeToolCall("read_file", {"path": "src/main.rs"})]),
    FakeReply(REPLY, chunk_delay=0.01),
]


def test_run_shows_the_reply_once_as_text_with_tool_calls_and_soft_errors(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(list(TOOL_ROUND_TRIP)) as server:
        code = run_in_process("Summarise src/main.rs", server.base_url)
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "task: Summarise src/main.rs"
    assert '  → read_file(path="src/mian.rs")' in lines
    assert "    soft error: file src/mian.rs not found. Files in that directory: main.rs" in lines
    assert '    ok: fn main() { println!("hello"); }' in lines
    assert REPLY in out and out.count("prints **hello**") == 1  # once, as text, not rendered
    assert out.count("Let me look.") == 1
    assert "\\n" not in out and "'" not in out  # no repr anywhere
    assert "\x1b[" not in out  # not a terminal: no colour, no cursor movement
    assert re.search(r"^3 turns, 2 tool calls, .*; run \w{12} stored in agentloop.db$", lines[-1])


def test_run_plain_streams_lines_as_they_arrive(project: Path) -> None:
    text = "\n".join(f"line {n}" for n in range(6))
    with serving([FakeReply(text, chunk_delay=0.15)]) as server:
        with subprocess.Popen(
            agentloop_run(server.base_url, "--plain", "--no-store"),
            cwd=project,
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        ) as child:
            assert child.stdout is not None
            seen = [(time.monotonic(), line.rstrip("\n")) for line in child.stdout]
            assert child.wait(30) == 0
    lines = [line for _, line in seen]
    assert lines[1:7] == [f"line {n}" for n in range(6)]
    first, last = seen[1][0], seen[6][0]
    assert last - first > 0.3  # each line was printed as it completed, not at the end
    assert lines[-1].endswith("not stored (--no-store)")


def test_run_prints_user_text_literally(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = "explain list[int] [bold]now[/] [red]"
    with serving([FakeReply("a [green]list[/green] of int")]) as server:
        assert run_in_process(task, server.base_url) == 0
    out = capsys.readouterr().out
    assert f"task: {task}\n" in out
    assert "\na [green]list[/green] of int\n" in out


def test_run_is_stored_by_default_and_listed_by_runs(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    with serving([FakeReply("stored answer")]) as server:
        assert run_in_process("remember me", server.base_url) == 0
    run_id = capsys.readouterr().out.splitlines()[-1].split("run ")[1].split()[0]
    assert (project / "agentloop.db").is_file()
    assert main(["runs"]) == 0
    listing = capsys.readouterr().out
    assert run_id in listing and listing.rstrip().endswith("1 run")


def test_run_with_a_store_path_and_with_no_store(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving([FakeReply("one"), FakeReply("two")]) as server:
        url = server.base_url
        assert run_in_process("a", url, "--no-store") == 0
        assert not (project / "agentloop.db").exists()
        db = project / "elsewhere.db"
        assert run_in_process("b", url, "--store", str(db)) == 0
    assert f"stored in {db}" in capsys.readouterr().out
    from agentloop.store import SQLiteStore

    store = SQLiteStore(db)
    try:
        [stored] = store.load_runs()
    finally:
        store.close()
    assert stored.run.input == "b" and stored.run.output == "two"


def test_a_provider_failure_is_one_paragraph_with_a_hint(project: Path) -> None:
    with serving([]) as server:
        root = server.root_url  # no /v1: the server answers 404
        done = subprocess.run(
            agentloop_run(root, "--no-store"),
            cwd=project,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        debug = subprocess.run(
            agentloop_run(root, "--no-store", "--debug"),
            cwd=project,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    [paragraph] = done.stderr.splitlines()  # one paragraph: not a terminal, so not wrapped
    assert paragraph.startswith(f"error: The request to openai model fake-model at {root} failed")
    assert "ModelNotFound" in paragraph
    assert "It failed in the status phase, after the request was sent." in paragraph
    assert f"Try --base-url {root}/v1." in paragraph and paragraph.count("under /v1") == 1
    assert "Traceback" not in done.stderr + done.stdout
    assert debug.returncode == 1
    assert debug.stderr.startswith(paragraph)
    assert "Traceback (most recent call last)" in debug.stderr
    assert "agentloop.errors.ModelNotFound" in debug.stderr


def test_an_unreachable_server_says_it_was_never_sent(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # released at once: connecting is refused
    url = f"http://127.0.0.1:{port}/v1"
    assert run_in_process("hi", url, "--no-store") == 1
    captured = capsys.readouterr()
    assert "retry after ProviderUnavailable (attempt 1)" in captured.out
    assert "in the connect phase, before the request was sent, after 4 attempts" in captured.err
    assert f"Is the server running, and is {url} right?" in captured.err


def test_configuration_mistakes_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["run", "hi", "--provider", "nope"]) == 2
    assert main(["run", "hi", "--provider", "openai"]) == 2  # no key, no local base URL
    err = capsys.readouterr().err
    assert "unknown provider 'nope'" in err and "OPENAI_API_KEY is not set" in err
    assert not (project / "agentloop.db").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_run_in_a_terminal_shows_a_spinner_and_the_reply_once(project: Path) -> None:
    import pty

    steps: list[FakeReply | Fault] = [*TOOL_ROUND_TRIP[:2], FakeReply(REPLY, delay=0.6)]
    with serving(steps) as server:
        leader, follower = pty.openpty()
        child = subprocess.Popen(
            agentloop_run(server.base_url, "--no-store"),
            cwd=project,
            env=child_env(),
            stdin=follower,
            stdout=follower,
            stderr=follower,
        )
        os.close(follower)
        output = read_all(leader, child)
    text = output.decode()
    assert child.returncode == 0, text
    assert "waiting for the model" in text and "\x1b[?25l" in text  # a spinner, cursor hidden
    assert any(frame in text for frame in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
    assert "Summary" in text and "prints" in text
    assert "\x1b[?25h" in text  # the cursor is given back


def read_all(fd: int, child: subprocess.Popen[bytes]) -> bytes:
    """Everything the child writes to the terminal ``fd`` until it exits."""
    out = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif child.poll() is not None:
            break
    child.wait(10)
    os.close(fd)
    return out


# --- the renderer and the advice, without a server --------------------------------------------


def test_a_reset_attempt_is_marked_void_in_plain_lines() -> None:
    from rich.console import Console

    from agentloop import events as ev
    from agentloop.cli.console import LineScreen, RunView
    from agentloop.messages import Message, TextPart
    from agentloop.model import ModelResponse

    buffer = io.StringIO()
    view = RunView(LineScreen(Console(file=buffer, color_system=None)))
    for event in (
        ev.TextDelta("r", 0, "first li"),
        ev.TextDelta("r", 0, "ne\nsecond"),
        ev.AttemptReset("r", 0),
        ev.TextDelta("r", 0, "again\n"),
        ev.TextDelta("r", 0, "done"),
        ev.ModelResponded("r", 0, ModelResponse(Message("assistant", (TextPart("again\ndone"),)))),
    ):
        view.apply(event)
    assert buffer.getvalue().splitlines() == [
        "first line",
        "second",
        "  (the reply above was cut off; it is retried)",
        "again",
        "done",
    ]


def test_failure_paragraphs_name_phase_sending_and_a_fix() -> None:
    from agentloop.cli.advice import Target, failure_paragraph
    from agentloop.errors import AuthError, LoopDetected, ModelNotFound, ProviderTimeout

    target = Target("openai", "gpt-x", "http://127.0.0.1:8080/v1", "OPENAI_API_KEY")
    missing = ModelNotFound("no such model", status_code=404, phase="status", request_sent=True)
    assert failure_paragraph(missing, target).endswith(
        "Check the model name given with --model (GET http://127.0.0.1:8080/v1/models lists "
        "what it serves)."
    )
    auth = AuthError("401", status_code=401, phase="status", request_sent=True)
    assert "Check the API key (OPENAI_API_KEY)" in failure_paragraph(auth, target)
    slow = ProviderTimeout("read timed out", phase="read")
    assert "in the read phase, and it is unknown whether the request was sent." in (
        failure_paragraph(slow, target)
    )
    stopped = failure_paragraph(LoopDetected("Loop detected: x repeated 10 times"), target)
    assert stopped.startswith("The run stopped: LoopDetected: Loop detected")


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGINT")
def test_an_interrupted_run_exits_130_and_is_stored_as_cancelled(project: Path) -> None:
    import signal

    with (
        serving([FakeReply("too late", delay=30)]) as server,
        subprocess.Popen(
            agentloop_run(server.base_url, task="wait"),
            cwd=project,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as child,
    ):
        assert child.stdout is not None
        assert child.stdout.readline() == "task: wait\n"
        time.sleep(0.5)  # the request is out and waiting
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    assert child.returncode == 130, out + err
    assert "Traceback" not in err
    from agentloop.store import SQLiteStore

    store = SQLiteStore(project / "agentloop.db")
    try:
        [stored] = store.load_runs()
    finally:
        store.close()
    assert type(stored.run.stop_reason).__name__ == "Cancelled"


def test_a_failed_store_write_is_never_reported_as_stored(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    from agentloop.store import SQLiteStore

    db = project / "broken.db"
    SQLiteStore(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON agentloop_history "
            "BEGIN SELECT RAISE(FAIL, 'disk says no'); END"
        )
    conn.close()
    with serving([FakeReply("an answer")]) as server:
        code = run_in_process("a", server.base_url, "--store", str(db))
    out = capsys.readouterr().out
    assert code == 1
    assert "stored in" not in out
    assert re.search(
        r"run \w{12} NOT stored: SQLiteStore: saving the end of run \w+ failed: "
        r"IntegrityError: disk says no$",
        out.splitlines()[-1],
    )
