"""A 500-turn agent that stays inside an 8,000-token window.

Every turn the (scripted) model reads another large page; the engine's context guard compacts
the transcript whenever the estimate crosses 80 % of the window, so no request is ever larger
than the window. Run: `.venv/bin/python examples/long_run.py`.
"""

from __future__ import annotations

from typing import Any

from agentloop import Agent, ModelRequest, RunConfig, tool
from agentloop.testing import FunctionModel, RecordingObserver, call, reply
from agentloop.tokens import HeuristicTokenCounter, estimate_request

WINDOW = 8_000
TURNS = 500
counter = HeuristicTokenCounter()
sizes: list[int] = []


@tool
def read_page(page: int) -> str:
    """Read one page of a long document."""
    return f"page {page}: " + "the quick brown fox jumps over the lazy dog. " * 40


def model(request: ModelRequest) -> Any:
    sizes.append(
        estimate_request(
            request.messages, system=request.system, tools=request.tools, counter=counter
        )
    )
    if len(sizes) < TURNS:
        return call("read_page", {"page": len(sizes)})
    return reply(f"read {TURNS - 1} pages")


def main() -> None:
    observer = RecordingObserver()
    agent = Agent(
        FunctionModel(model),
        tools=[read_page],
        system="You read long documents page by page.",
        config=RunConfig(context_window=WINDOW, max_turns=TURNS + 10),
        observers=[observer],
    )
    run = agent.run_sync("Read the whole document.")
    passes = observer.of("on_compaction")
    print(f"output: {run.output}")
    print(f"requests: {len(sizes)}, largest: {max(sizes)} tokens (window {WINDOW})")
    print(f"compaction passes: {len(passes)}, history now {len(agent.history)} messages")
    assert max(sizes) <= WINDOW


if __name__ == "__main__":
    main()
