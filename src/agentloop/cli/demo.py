"""``agentloop demo``: real agent loops over the real HTTP adapter, against local fake servers.

Nothing leaves 127.0.0.1 and no key is needed. Each scenario gets its own
``FakeProviderServer`` playing a script request by request and an ``Agent`` over
``RetryingClient(OpenAIClient(...))`` (a ``FallbackClient`` of two in scenario 6). The screen is
the ``RunView`` that ``agentloop run`` draws with, plus lines of the demo's own: a
``Retry-After`` honoured, the cancel signal firing, what a cancelled agent's history kept. The
scenarios, in order:

1. a typo is a soft error; a 503 is retried and a 429's ``Retry-After`` is honoured
2. unknown tool names and forbidden paths are soft
3. a model that ignores its errors is stopped (``LoopDetected``)
4. a sick tool's circuit breaker opens: the 4th call is refused without running the tool
5. a cancel while a tool runs: ``Cancelled``, the history keeps the completed turns
6. a failing primary fails over to the backup model
7. an unreachable server: refused in the ``connect`` phase, nothing sent, and the advice
   paragraph ``agentloop run`` would print

Then a table of every provider error seen (``phase``, ``request_sent``, ``attempts``) and the
record of every run. Retry waits are cut to centiseconds (the ``Retry-After`` to 0.3 s), so the
whole demo takes a second or two.
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agentloop import events as ev
from agentloop._util.slots import record
from agentloop.builtin_tools import workspace_tools
from agentloop.cancel import CancelToken
from agentloop.cli.advice import Target, failure_paragraph
from agentloop.cli.console import ConsoleObserver, LineScreen, logs_shown
from agentloop.cli.terminal import TerminalConsole
from agentloop.engine.agent import Agent
from agentloop.errors import AgentLoopError, ProviderError, ToolError
from agentloop.model import ModelClient
from agentloop.run import Run
from agentloop.testing.fake_server import FakeProviderServer, FakeReply, FakeToolCall, Fault
from agentloop.tools import Tool, tool

__all__ = ["run_demo"]

_RETRY_AFTER = 0.3  # what the rate-limited server asks for; the backoff alone would be 0.02 s
_LOOPING_TURNS = 11  # the loop detector stops the 10th identical call
_COMPACT: dict[str, Any] = {
    "box": box.SIMPLE_HEAD,
    "pad_edge": False,
    "collapse_padding": True,
    "show_edge": False,
}


def run_demo() -> int:
    """``agentloop demo``: every scenario in a fresh temporary workspace; 0 when it ran."""
    with tempfile.TemporaryDirectory(prefix="agentloop-demo-") as workdir:
        return asyncio.run(_demo(Path(workdir)))


async def _demo(workdir: Path) -> int:
    (workdir / "src").mkdir()
    (workdir / "src" / "main.rs").write_text('fn main() { println!("hello"); }\n')
    console = TerminalConsole(highlight=False, soft_wrap=True)
    screen = LineScreen(console, reply_label="  reply")
    demo = _Demo(console, _DemoObserver(screen), workdir)
    with logs_shown(screen.line):
        await _typo_and_retries(demo)
        await _soft_refusals(demo)
        await _loop_stopped(demo)
        await _breaker_opens(demo)
        await _cancelled_mid_run(demo)
        await _fallback(demo)
        await _unreachable(demo)
    _errors_table(console, demo.observer.errors)
    _records_table(console, demo.runs)
    return 0


@record
class _SeenError:
    """One failed provider attempt, for the errors table."""

    scenario: str
    error: ProviderError
    attempts: int
    then: str


class _DemoObserver(ConsoleObserver):
    """Draws every event like ``agentloop run`` does, and keeps each provider error reported."""

    def __init__(self, screen: LineScreen) -> None:
        super().__init__(screen)
        self.line = screen.line
        self.scenario = ""
        self.errors: list[_SeenError] = []

    def on_event(self, event: ev.Event) -> None:
        """Draw the event; keep a retried or failed-over provider error."""
        super().on_event(event)
        if isinstance(event, ev.RetryScheduled) and isinstance(event.error, ProviderError):
            self._retried(event.error, event.attempt, event.wait_seconds)
        elif isinstance(event, ev.FellBack) and isinstance(event.error, ProviderError):
            self.seen(event.error, "fell back")

    def _retried(self, error: ProviderError, attempt: int, wait: float) -> None:
        if error.retry_after is not None:
            said = f"the server sent Retry-After: {error.retry_after:g}; waited {wait:.2f}s"
            self.line(_said("  Retry-After honoured:", "magenta", said))
        self.errors.append(_SeenError(self.scenario, error, attempt, f"retry {wait:.2f}s"))

    def seen(self, error: ProviderError, then: str) -> None:
        """Keep ``error``, the one that ended a request (its ``attempts`` are final)."""
        self.errors.append(_SeenError(self.scenario, error, error.attempts, then))


@dataclass
class _Demo:
    """What the scenarios share: the console, the observer, the workspace and every run."""

    console: Console
    observer: _DemoObserver
    workdir: Path
    runs: list[tuple[str, Run[Any]]] = field(default_factory=list)

    def title(self, title: str) -> None:
        """Start a scenario: a rule with its title; what is seen from now on is filed under it."""
        self.console.rule(Text(title, style="bold"))
        self.observer.scenario = title.split(".", 1)[0]

    def client(self, base_url: str, model: str = "fake-model") -> ModelClient:
        """The real adapter behind the real retry wrapper, its backoff cut to centiseconds."""
        from agentloop.providers.openai import OpenAIClient
        from agentloop.providers.retrying import RetryingClient

        inner = OpenAIClient(model, api_key="demo-key", base_url=base_url, timeout=2.0)
        return RetryingClient(inner, max_retries=3, base_delay=0.01, rate_limit_max_delay=1.0)

    async def play(
        self,
        client: ModelClient,
        task: str,
        tools: Sequence[Tool] = (),
        cancel: CancelToken | None = None,
    ) -> tuple[Agent, AgentLoopError | None]:
        """Run ``task`` with the workspace tools (and ``tools``), then close ``client``."""
        every = [*workspace_tools(self.workdir), *tools]
        agent = Agent(client, tools=every, observers=[self.observer], system="You are careful.")
        try:
            return agent, await self._attempt(agent, task, cancel)
        finally:
            self.runs += [(self.observer.scenario, run) for run in agent.runs]
            await client.aclose()

    async def _attempt(
        self, agent: Agent, task: str, cancel: CancelToken | None
    ) -> AgentLoopError | None:
        """The run's events are drawn as they happen; then how it ended."""
        self.console.print(_said("task:", "dim", task))
        try:
            run = await agent.run(task, cancel=cancel)
        except AgentLoopError as error:
            kind = "cancelled" if error.is_cancelled() else "hard error"
            self.console.print(_said(f"{kind}:", "bold red", f"{type(error).__name__}: {error}"))
            if isinstance(error, ProviderError):
                self.observer.seen(error, "raised")
            return error
        self.console.print(_said("completed", "bold green", f"in {_counts(run)}"))
        return None

    async def scripted(
        self, script: Sequence[FakeReply | Fault], task: str, tools: Sequence[Tool] = ()
    ) -> None:
        """Run ``task`` against a fresh fake server playing ``script``."""
        async with FakeProviderServer(list(script)) as server:
            await self.play(self.client(server.base_url), task, tools)


def _said(label: str, style: str, text: str) -> Text:
    """``  label text``: user and model text stay literal (never markup, never a repr)."""
    return Text.assemble("  ", (label, style), " ", text)


def _counts(run: Run[Any]) -> str:
    calls = f"{run.tool_calls} tool call{'s' * (run.tool_calls != 1)}"
    return f"{len(run.turns)} turn{'s' * (len(run.turns) != 1)}, {calls}"


def _calls(name: str, **arguments: Any) -> FakeReply:
    return FakeReply(tool_calls=[FakeToolCall(name, arguments)])


async def _typo_and_retries(demo: _Demo) -> None:
    demo.title("1. a typo is a soft error; a 503 is retried; a 429's Retry-After is honoured")
    script: list[FakeReply | Fault] = [
        _calls("read_file", path="src/mian.rs"),
        Fault.server_error(503),
        Fault.rate_limit(retry_after=_RETRY_AFTER),
        _calls("read_file", path="src/main.rs"),
        FakeReply("src/main.rs prints hello."),
    ]
    await demo.scripted(script, "Summarise src/main.rs")


async def _soft_refusals(demo: _Demo) -> None:
    demo.title("2. unknown tool names and forbidden paths are soft")
    script = [
        _calls("read_fille", path="src/main.rs"),
        _calls("read_file", path="../etc/passwd"),
        FakeReply("I can only read inside the project."),
    ]
    await demo.scripted(script, "Read the password file")


async def _loop_stopped(demo: _Demo) -> None:
    demo.title("3. a model that ignores its errors is stopped")
    script = [_calls("read_file", path="notes.txt") for _ in range(_LOOPING_TURNS)]
    await demo.scripted(script, "Read notes.txt")


async def _breaker_opens(demo: _Demo) -> None:
    demo.title("4. a sick tool's circuit breaker opens after 3 failures")
    ran: list[str] = []

    @tool
    def query_db(sql: str) -> str:
        """Run a read-only SQL query against the project database."""
        ran.append(sql)
        raise ToolError("connection refused by db.internal:5432", sick=True)

    queries = ["select 1", "select count(*) from users", "select now()", "select 2"]
    script = [*(_calls("query_db", sql=sql) for sql in queries)]
    script.append(FakeReply("The database is unreachable; I will stop here."))
    await demo.scripted(script, "How many users are there?", tools=[query_db])
    times = f"{len(ran)} time{'s' * (len(ran) != 1)}"
    note = f"query_db ran {times} for {len(queries)} calls; the breaker refused the rest"
    demo.console.print(_said("breaker:", "magenta", note))


async def _cancelled_mid_run(demo: _Demo) -> None:
    demo.title("5. a cancel while a tool runs: the completed turns are kept")
    started = asyncio.Event()

    @tool
    async def run_tests(suite: str) -> str:
        """Run a test suite (this one takes a long time)."""
        started.set()
        await asyncio.sleep(30)
        return "all passed"

    token = CancelToken()
    script = [
        _calls("read_file", path="src/main.rs"),
        _calls("run_tests", suite="all"),
        FakeReply("never sent: the run is cancelled first"),
    ]
    task = "Read src/main.rs, then run the tests"
    async with FakeProviderServer(script) as server, asyncio.TaskGroup() as group:
        watcher = group.create_task(_cancel_when(started, token, demo))
        agent, _ = await demo.play(demo.client(server.base_url), task, [run_tests], token)
        watcher.cancel()  # a no-op once it fired; else the run ended before the tool started
    roles = ", ".join(message.role for message in agent.history)
    count = len(agent.history)
    kept = f"{count} message{'s' * (count != 1)} ({roles}): the turn that finished"
    demo.console.print(_said("history keeps", "magenta", kept))


async def _cancel_when(started: asyncio.Event, token: CancelToken, demo: _Demo) -> None:
    """Fire ``token`` shortly after the slow tool starts (a user pressing a stop button)."""
    await started.wait()
    await asyncio.sleep(0.05)
    demo.console.print(
        _said("cancel:", "bold magenta", "the CancelToken fires while run_tests runs")
    )
    token.cancel()


async def _fallback(demo: _Demo) -> None:
    from agentloop.providers.fallback import FallbackClient

    demo.title("6. a failing primary fails over to the backup")
    broken = [Fault.reset(), Fault.server_error(500), Fault.malformed(), Fault.server_error(503)]
    async with (
        FakeProviderServer(broken) as primary,
        FakeProviderServer([FakeReply("backup model answered.")]) as backup,
    ):
        chain = [
            demo.client(primary.base_url, "fake-primary"),
            demo.client(backup.base_url, "fake-backup"),
        ]
        await demo.play(FallbackClient(chain), "Say hello")


async def _unreachable(demo: _Demo) -> None:
    demo.title("7. an unreachable server: nothing was sent")
    with socket.socket() as unused:  # bound, never listening: every connection is refused
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
        _, error = await demo.play(demo.client(url), "Say hello")
    if error is not None:
        advice = failure_paragraph(error, Target("openai", "fake-model", url))
        demo.console.print(_said("agentloop run would say:", "bold", advice))


def _errors_table(console: Console, errors: Sequence[_SeenError]) -> None:
    """Every provider error seen: where it failed, whether it was sent, and what followed."""
    console.rule(Text("provider errors", style="bold"))
    table = Table("#", "error", "status", "phase", "request_sent", "attempts", "then", **_COMPACT)
    for seen in errors:
        error = seen.error
        table.add_row(
            seen.scenario,
            type(error).__name__,
            "-" if error.status_code is None else str(error.status_code),
            "-" if error.phase is None else str(error.phase),
            str(error.request_sent),
            str(seen.attempts),
            seen.then,
        )
    console.print(table)


def _records_table(console: Console, runs: Sequence[tuple[str, Run[Any]]]) -> None:
    """Every run of the demo, whatever ended it."""
    console.rule(Text("run records", style="bold"))
    table = Table("#", "run", "turns", "tool calls", "output", "stop_reason", **_COMPACT)
    for scenario, run in runs:
        stop = "-" if run.stop_reason is None else type(run.stop_reason).__name__
        output = "-" if run.output is None else _first_line(str(run.output), 30)
        table.add_row(
            scenario, run.id[:8], str(len(run.turns)), str(run.tool_calls), Text(output), stop
        )
    console.print(table)


def _first_line(text: str, limit: int) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    cut = len(first) > limit or first != text.strip()
    return first[: limit - 1] + "…" if cut else first
