"""A terminal UI that renders ``agent.stream()`` live with rich: text as it streams, tool calls
as their arguments arrive, soft errors in red, a spinner while the model thinks.

Offline by default (agentloop's fake OpenAI-compatible server streams a scripted answer over
real SSE); set ``AGENTLOOP_BASE_URL`` (and ``AGENTLOOP_MODEL``) for a real server.
Run: ``.venv/bin/python examples/stream_ui.py``.
"""

from __future__ import annotations

import asyncio
import os

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

from agentloop import Agent, RunConfig, Settings, ToolError, build_client, tool
from agentloop import events as ev
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall


@tool
def read_file(path: str) -> str:
    """Read a text file of the project."""
    if path != "README.md":
        raise ToolError(f"file {path} not found; try README.md")
    return "# agentloop\nAgent loops that do not fall over."


SCRIPT = [
    FakeReply(tool_calls=[FakeToolCall("read_file", {"path": "READ.md"})], chunk_delay=0.01),
    FakeReply(tool_calls=[FakeToolCall("read_file", {"path": "README.md"})], chunk_delay=0.01),
    FakeReply("The project builds **agent loops that do not fall over**.", chunk_delay=0.01),
]


class View:
    """What the screen shows: finished lines, the current line, and a status spinner."""

    def __init__(self) -> None:
        self.lines: list[RenderableType] = []
        self.text = ""
        self.calls: dict[int, list[str]] = {}
        self.status = "thinking"

    def apply(self, event: ev.Event) -> None:
        if isinstance(event, ev.TurnStarted):
            self.status, self.text, self.calls = "thinking", "", {}
        elif isinstance(event, ev.TextDelta):
            self.status, self.text = "", self.text + event.text
        elif isinstance(event, ev.AttemptReset):
            self.text, self.calls = "", {}
        elif isinstance(event, ev.ToolCallDelta):
            name, args = self.calls.get(event.index, ["", ""])
            self.calls[event.index] = [event.name or name, args + event.arguments_delta]
            self.status = ""
        elif isinstance(event, ev.ToolCallStarted):
            self.calls = {}
            self.status = f"running {event.call.name}"
        elif isinstance(event, ev.ToolCallFinished):
            call, result = event.call, event.result
            line = Text(f"  {call.name}({call.arguments}) ", style="cyan")
            line.append(result.content, style="red" if result.is_error else "green")
            self.lines.append(line)
            self.status = "thinking"
        elif isinstance(event, ev.RunFinished):
            if self.text:
                self.lines.append(Markdown(self.text))
            self.text, self.status = "", ""

    def render(self) -> Group:
        parts: list[RenderableType] = list(self.lines)
        for name, args in self.calls.values():
            parts.append(Text(f"  {name}({args}", style="dim cyan"))
        if self.text:
            parts.append(Text(self.text))
        if self.status:
            parts.append(Spinner("dots", text=Text(self.status, style="yellow")))
        return Group(*parts)


async def show(base_url: str, model: str, console: Console) -> None:
    client = build_client(Settings(provider="openai", model=model, base_url=base_url))
    view = View()
    async with Agent(client, tools=[read_file], config=RunConfig(stream=True)) as agent:
        with Live(view.render(), console=console, refresh_per_second=20) as live:
            async with agent.stream("What does this project do? Read its README.") as events:
                async for event in events:
                    view.apply(event)
                    live.update(view.render())
        run = events.run
    console.line()
    console.print(Text(f"{len(run.turns)} turns, {run.usage.output_tokens} output tokens"))


async def main() -> None:
    console = Console()
    base_url = os.environ.get("AGENTLOOP_BASE_URL")
    if base_url:
        await show(base_url, os.environ.get("AGENTLOOP_MODEL", "local"), console)
    else:
        async with FakeProviderServer(SCRIPT) as server:
            await show(server.base_url, "fake-model", console)


if __name__ == "__main__":
    asyncio.run(main())
