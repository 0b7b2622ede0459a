"""The command line and pausing (SPEC 17, 11): asked on a terminal, left paused elsewhere.

Every test runs ``agentloop`` as a real subprocess against a real fake OpenAI-compatible server
on 127.0.0.1, with the project's own tools (``--tools approvals:tools``): a refund that needs
approval (it appends to ``refunds.log``, so a test can count how often it ran) and an external
question. A pipe is the non-terminal path; a pseudo-terminal (``pty``) is a person typing.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")

TOOLS = '''
from agentloop import tool


@tool(requires_approval=True)
def refund(order: str, amount: int, note: str = "") -> str:
    """Refund an order."""
    with open("refunds.log", "a") as log:
        log.write(f"{order} {amount}\\n")
    return f"refunded {amount} on {order}"


@tool(external=True)
def ask_customer(question: str) -> str:
    """Ask the customer in the app."""
    raise AssertionError("an external tool is never run by the agent")


tools = [refund, ask_customer]
'''

SECRET = "sk-proj-Zq8xK2mV9pL4tR7wY1nB5cD3"
PAUSING: list[FakeReply | Fault] = [
    FakeReply(
        "Refunding.",
        tool_calls=[
            FakeToolCall("refund", {"order": "A-1", "amount": 30, "note": SECRET}, id="call_r1"),
            FakeToolCall("ask_customer", {"question": "which day?"}, id="call_q1"),
        ],
    ),
    FakeReply("Done: refunded, and the customer answered."),
]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


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


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "approvals.py").write_text(TOOLS)
    return tmp_path


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    clean.pop("COLUMNS", None)
    return clean | {"PYTHONDONTWRITEBYTECODE": "1", "TERM": "xterm-256color", "COLUMNS": "200"}


def agent_flags(base_url: str) -> list[str]:
    return ["--provider", "openai", "--model", "fake-model", "--base-url", base_url]


def agentloop(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentloop", *args]


def run_argv(base_url: str, *args: str) -> list[str]:
    return agentloop(
        "run", "refund A-1", *agent_flags(base_url), "--tools", "approvals:tools", *args
    )


def piped(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` with stdin, stdout and stderr pipes: no person is there."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def refunds(project: Path) -> list[str]:
    log = project / "refunds.log"
    return log.read_text().splitlines() if log.exists() else []


def tool_results(request: Mapping[str, Any]) -> dict[str, str]:
    """The tool results a Chat Completions request sends back, by call id."""
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m.get("role") == "tool"}


class Terminal:
    """A child on a pseudo-terminal: wait for what it prints, type lines at it."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.leader, follower = os.openpty()
        self.child = subprocess.Popen(
            argv, cwd=cwd, env=env(), stdin=follower, stdout=follower, stderr=follower
        )
        os.close(follower)
        self.seen = ""  # everything printed, ANSI sequences removed
        self.read_to = 0  # where the next ``expect`` starts looking

    def _pump(self, timeout: float) -> bool | None:
        """Read what is there: True if something was, None if nothing yet, False at the end."""
        if not select.select([self.leader], [], [], timeout)[0]:
            return None
        try:
            chunk = os.read(self.leader, 65536)
        except OSError:  # the child closed the terminal
            return False
        self.seen += ANSI.sub("", chunk.decode("utf-8", errors="replace"))
        return bool(chunk)

    def expect(self, text: str, timeout: float = 30) -> str:
        """Wait until ``text`` is printed after the last match; what came before it."""
        deadline = time.monotonic() + timeout
        while text not in self.seen[self.read_to :]:
            if time.monotonic() > deadline or self._pump(0.1) is False:
                raise AssertionError(f"never printed {text!r}; printed:\n{self.seen}")
        at = self.seen.index(text, self.read_to)
        before, self.read_to = self.seen[self.read_to : at], at + len(text)
        return before

    def type(self, line: str) -> None:
        os.write(self.leader, line.encode() + b"\n")

    def finish(self, timeout: float = 30) -> int:
        """Everything the child prints until it exits; its exit status."""
        deadline = time.monotonic() + timeout
        while self.child.poll() is None and time.monotonic() < deadline:
            if self._pump(0.1) is False:
                break
        while self._pump(0.05):  # what is left in the terminal's buffer
            pass
        try:
            code = self.child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait(10)
            raise AssertionError(f"still running; printed:\n{self.seen}") from None
        finally:
            os.close(self.leader)
        return code


def test_on_a_pipe_the_run_stays_paused_with_its_calls_and_how_to_continue(
    project: Path,
) -> None:
    with serving(list(PAUSING)) as server:
        done = piped(run_argv(server.base_url), project)
        assert done.returncode == 4, done.stdout + done.stderr
        out = done.stdout
        assert "paused: 2 calls wait for a decision" in out
        assert '  call_r1  refund  approval  {"order": "A-1", "amount": 30' in out
        assert '  call_q1  ask_customer  external  {"question": "which day?"}' in out
        assert '"amount": 30, "note": "[REDACTED]"}' in out  # through the one redactor
        (command,) = [line.strip() for line in out.splitlines() if "agentloop continue" in line]
        run_id = command.split()[2]
        assert command == (
            f"agentloop continue {run_id} --provider openai --model fake-model --base-url "
            f"{server.base_url} --tools approvals:tools --approve call_r1 --answer call_q1=TEXT"
        )
        assert 'await agent.continue_run(decisions={"call_r1": Approve(), "call_q1":' in out
        assert "\x1b[" not in out  # not a terminal: plain lines
        assert refunds(project) == [] and len(server.requests) == 1

        # the store shows it paused, with its pending calls
        listed = piped(agentloop("runs"), project).stdout
        assert "paused" in listed and "refund call_r1" in listed and "(approval)" in listed
        shown = piped(agentloop("runs", "show", run_id), project)
        assert shown.returncode == 0, shown.stderr
        assert "call_r1  refund  approval" in shown.stdout and SECRET not in shown.stdout
        assert f"agentloop continue {run_id} --store agentloop.db" in shown.stdout

        # the command it printed, with an answer for the external call, finishes the run
        argv = command.replace("=TEXT", "=tuesday").split()[1:]
        continued = piped(agentloop(*argv), project)
        assert continued.returncode == 0, continued.stdout + continued.stderr
        assert "    ok: refunded 30 on A-1" in continued.stdout, continued.stdout
        assert "    ok: tuesday" in continued.stdout
        assert "Done: refunded, and the customer answered." in continued.stdout
        assert tool_results(server.requests[-1]) == {
            "call_r1": "refunded 30 on A-1",
            "call_q1": "tuesday",
        }

    assert refunds(project) == ["A-1 30"]
    decided = piped(agentloop("runs", "show", run_id), project).stdout
    assert "decided at" in decided and "call_r1 approve" in decided
    assert "call_q1 answer: tuesday" in decided
    assert "paused" not in piped(agentloop("runs"), project).stdout

    again = piped(agentloop(*argv), project)  # nothing waits any more: runs nothing
    assert again.returncode == 2 and "is not paused" in again.stderr
    assert refunds(project) == ["A-1 30"]


def test_bad_decision_flags_are_usage_errors_and_change_nothing(project: Path) -> None:
    with serving(list(PAUSING)) as server:
        done = piped(run_argv(server.base_url), project)
        assert done.returncode == 4
        run_id = re.findall(r"agentloop continue (\w+)", done.stdout)[0]
        flags = [*agent_flags(server.base_url), "--tools", "approvals:tools"]
        for decisions, said in [
            (["--approve", "call_r1"], "no decision for pending call 'call_q1'"),
            (["--approve", "call_r1", "--approve", "nope", "--deny", "call_q1"], "'nope'"),
            (["--answer", "call_r1=yes", "--deny", "call_q1"], "does not fit an approval call"),
            (["--edit", "call_r1={bad", "--deny", "call_q1"], "--edit call_r1: not JSON"),
            (["--edit", "call_r1=[1]", "--deny", "call_q1"], "must be a JSON object"),
            (["--approve", "call_r1", "--deny", "call_r1"], "two decisions for call 'call_r1'"),
            (["--answer", "call_q1", "--approve", "call_r1"], "--answer takes --answer ID=..."),
        ]:
            bad = piped(agentloop("continue", run_id, *flags, *decisions), project)
            assert bad.returncode == 2 and said in bad.stderr, (decisions, bad.stderr)
        assert len(server.requests) == 1  # nothing was sent
    assert refunds(project) == []
    listed = piped(agentloop("runs"), project).stdout
    assert "paused" in listed  # still paused, no decision recorded
    assert "decided" not in piped(agentloop("runs", "show", run_id), project).stdout


def test_continue_without_decisions_on_a_pipe_lists_the_calls_and_stays_paused(
    project: Path,
) -> None:
    with serving(list(PAUSING)) as server:
        done = piped(run_argv(server.base_url), project)
        run_id = re.findall(r"agentloop continue (\w+)", done.stdout)[0]
        argv = agentloop("continue", run_id, *agent_flags(server.base_url))
        waiting = piped([*argv, "--tools", "approvals:tools"], project)
        assert waiting.returncode == 4, waiting.stderr
        assert "paused: 2 calls wait for a decision" in waiting.stdout
        assert "--approve call_r1 --answer call_q1=TEXT" in waiting.stdout
        decided = ["--approve", "call_r1", "--deny", "call_q1"]
        missing = piped([*argv, "--tools", "nowhere:tools", *decided], project)
        assert missing.returncode == 2 and "--tools nowhere:tools" in missing.stderr
        assert len(server.requests) == 1
    unknown = piped(agentloop("continue", "zzz", "--provider", "openai"), project)
    assert unknown.returncode == 2 and "no stored run with an id starting 'zzz'" in unknown.stderr


def test_with_no_store_a_paused_run_says_it_cannot_be_continued(project: Path) -> None:
    with serving(list(PAUSING)) as server:
        done = piped(run_argv(server.base_url, "--no-store"), project)
    assert done.returncode == 4
    assert "the run was not stored (--no-store): it cannot be continued" in done.stdout
    assert "agentloop continue" not in done.stdout


def test_on_a_terminal_each_call_is_asked_and_the_run_goes_on(project: Path) -> None:
    with serving(list(PAUSING)) as server:
        term = Terminal(run_argv(server.base_url), project)
        before = term.expect("approve? [y/n/edit]")
        asked = before.splitlines()[-1]
        assert asked.startswith("refund needs your approval (call_r1): {") and SECRET not in asked
        term.type("maybe")
        term.expect("please answer y, n or edit")
        term.type("edit")
        term.expect("new arguments, a JSON object:")
        term.type("{bad")
        term.expect("not JSON")
        term.type("[1, 2]")
        term.expect("a JSON object, not a list")
        term.type('{"order": "A-1", "amount": 10}')
        before = term.expect("answer (Enter alone denies):")
        assert "ask_customer is yours to answer (call_q1)" in before
        term.type("tuesday")
        term.expect("Done: refunded, and the customer answered.")
        code = term.finish()
        requests = server.requests
    assert code == 0, term.seen
    assert refunds(project) == ["A-1 10"]  # the edited arguments, once
    assert tool_results(requests[-1]) == {"call_r1": "refunded 10 on A-1", "call_q1": "tuesday"}
    assert re.search(r"2 turns, 2 tool calls, .* stored in agentloop.db", term.seen)
    shown = piped(agentloop("runs", "show", "--store", "agentloop.db", _last_run(project)), project)
    assert 'call_r1 edit {"order": "A-1", "amount": 10}' in shown.stdout


def _last_run(project: Path) -> str:
    listed = piped(agentloop("runs"), project).stdout
    found: list[str] = re.findall(r"│ \w{12} │ (\w{12}) │", listed)
    return found[-1]


def test_on_a_terminal_no_and_an_empty_answer_deny(project: Path) -> None:
    with serving(list(PAUSING)) as server:
        term = Terminal(run_argv(server.base_url, "--plain"), project)
        term.expect("approve? [y/n/edit]")
        term.type("n")
        term.expect("reason for the model (Enter: none):")
        term.type("too much")
        term.expect("answer (Enter alone denies):")
        term.type("")
        code = term.finish()
        requests = server.requests
    assert code == 0, term.seen
    assert refunds(project) == []
    assert tool_results(requests[-1]) == {
        "call_r1": "User denied permission: too much",
        "call_q1": "User denied permission",
    }


def test_on_a_terminal_end_of_input_leaves_the_run_paused(project: Path) -> None:
    with serving(list(PAUSING)) as server:
        term = Terminal(run_argv(server.base_url), project)
        term.expect("approve? [y/n/edit]")
        os.write(term.leader, b"\x04")  # Ctrl-D
        term.expect("to continue")
        code = term.finish()
        assert len(server.requests) == 1
    assert code == 4, term.seen
    assert "--approve call_r1 --answer call_q1=TEXT" in term.seen
    assert refunds(project) == []


def test_continue_on_a_terminal_asks_then_goes_on(project: Path) -> None:
    with serving(list(PAUSING)) as server:
        done = piped(run_argv(server.base_url), project)
        run_id = re.findall(r"agentloop continue (\w+)", done.stdout)[0]
        flags = [*agent_flags(server.base_url), "--tools", "approvals:tools"]
        term = Terminal(agentloop("continue", run_id, *flags), project)
        term.expect("approve? [y/n/edit]")
        term.type("y")
        term.expect("answer (Enter alone denies):")
        term.type("monday")
        term.expect("Done: refunded, and the customer answered.")
        code = term.finish()
    assert code == 0, term.seen
    assert refunds(project) == ["A-1 30"]


def test_runs_show_a_hooks_message_and_control_characters_as_text(project: Path) -> None:
    """A run paused by a hook's ``Ask`` (not headless): its message in ``runs`` and ``show``."""
    from agentloop import Agent, Ask, Hook, RunConfig, ToolContext, tool
    from agentloop.messages import ToolCallPart
    from agentloop.store import SQLiteStore
    from agentloop.testing import ScriptedModel, call, reply

    class AskFirst(Hook):
        async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> Ask:
            return Ask("over the limit: \x1b]0;owned\x07 ok?")

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return order

    store = SQLiteStore(project / "agentloop.db")
    agent = Agent(
        ScriptedModel([call("lookup", {"order": "\x1b[2J"}, id="c7"), reply("done")]),
        tools=[lookup],
        hooks=[AskFirst()],
        config=RunConfig(headless=False),
        store=store,
    )
    run = agent.run_sync("look")
    store.close()
    assert run.paused
    listed = piped(agentloop("runs"), project).stdout
    assert "lookup c7 (approval: over the limit:" in " ".join(listed.split())
    shown = piped(agentloop("runs", "show", run.id[:8]), project).stdout
    assert "      message: over the limit: \\x1b]0;owned\\x07 ok?" in shown
    assert '  c7  lookup  approval  {"order": "\\u001b[2J"}' in shown
    assert "\x1b" not in listed + shown


def test_ctrl_c_at_the_prompt_exits_130_and_leaves_the_run_paused(project: Path) -> None:
    with serving(list(PAUSING)) as server:
        term = Terminal(run_argv(server.base_url, "--plain"), project)
        term.expect("approve? [y/n/edit]")
        # Ctrl-C: the signal the terminal sends its foreground process (this pty is not the
        # child's controlling terminal, so typing ^C would only echo)
        term.child.send_signal(signal.SIGINT)
        code = term.finish()
        assert len(server.requests) == 1
    assert code == 130, term.seen
    assert "agentloop: interrupted (Ctrl-C)" in term.seen
    assert "paused" in piped(agentloop("runs"), project).stdout
    assert refunds(project) == []


SHOP = '''
from agentloop import ToolContext, tool


@tool(requires_approval=True)
def charge(ctx: ToolContext, order: str) -> str:
    """Charge an order."""
    with open("charges.log", "a") as log:
        log.write(f"{order}\\n")
    return f"charged {order} through {ctx.deps['db']}"


tools = [charge]


def make(run):
    return {"db": f"orders-db/{run.session_id[:4]}"}
'''

CHARGING: list[FakeReply | Fault] = [
    FakeReply("Charging.", tool_calls=[FakeToolCall("charge", {"order": "A-7"}, id="call_c1")]),
    FakeReply("Charged A-7."),
]


def test_continue_without_the_tool_exits_2_naming_tools_and_the_run_stays_paused(
    project: Path,
) -> None:
    """SPEC 17: an approval is never spent on nothing; the deps factory reaches the tool."""
    (project / "shop.py").write_text(SHOP)
    with serving(list(CHARGING)) as server:
        argv = agentloop(
            "run", "charge A-7", *agent_flags(server.base_url), "--tools", "shop:tools"
        )
        done = piped(argv, project)
        assert done.returncode == 4, done.stdout + done.stderr
        run_id = re.findall(r"agentloop continue (\w+)", done.stdout)[0]

        flags = [*agent_flags(server.base_url), "--approve", "call_c1"]
        bare = piped(agentloop("continue", run_id, *flags), project)
        assert bare.returncode == 2, bare.stdout + bare.stderr
        assert "tool 'charge'" in bare.stderr and "--tools MODULE:NAME" in bare.stderr
        assert len(server.requests) == 1  # the model never read a missing tool's error
        listed = piped(agentloop("runs"), project).stdout
        assert "paused" in listed
        assert "decided" not in piped(agentloop("runs", "show", run_id), project).stdout

        for deps, said in [
            ("make", "--deps takes MODULE:CALLABLE"),
            ("shop:tools", "names a list, not a callable"),
            ("nowhere:make", "No module named 'nowhere'"),
        ]:
            bad = piped(agentloop("continue", run_id, *flags, "--deps", deps), project)
            assert bad.returncode == 2 and said in bad.stderr, (deps, bad.stderr)

        full = [*flags, "--tools", "shop:tools", "--deps", "shop:make"]
        continued = piped(agentloop("continue", run_id, *full), project)
        assert continued.returncode == 0, continued.stdout + continued.stderr
        (result,) = tool_results(server.requests[-1]).values()
        assert result.startswith("charged A-7 through orders-db/")
        assert "Charged A-7." in continued.stdout
    assert (project / "charges.log").read_text() == "A-7\n"


def test_a_typed_line_is_read_without_its_newline_and_ctrl_d_ends_the_input() -> None:
    """The prompt's line reader: one line per read on a terminal, EOFError at Ctrl-D."""
    from agentloop.cli.pending import _TypedLine

    leader, follower = os.openpty()
    try:
        with os.fdopen(follower, "r", encoding="utf-8", closefd=False) as stdin:
            typed = _TypedLine.on(stdin)
            assert typed is not None
            os.write(leader, "édit\n".encode())
            assert typed.readline() == "édit"
            os.write(leader, b"\x04")  # Ctrl-D at the start of a line: end of input
            with pytest.raises(EOFError):
                typed.readline()
    finally:
        os.close(leader)
        os.close(follower)
