"""``agentloop continue --agent``: an application's paused run goes on with the application's agent.

Found by building a web product from the docs alone: a shop's agent (instructions, an output
guardrail, a refund tool that needs approval) pauses on a customer's refund; the operator
approves it with ``agentloop continue ID --provider ... --tools shop:tools --approve ...``, as
docs/cli.md says. That rebuilt the command line's own agent: the continued request went out
without the shop's instructions, offered the CLI's ``read_file`` and ``list_dir`` (the operator's
working directory) to the shop's model, and its answer passed no guardrail (a card number was
stored as the run's output). ``--agent MODULE:NAME`` names the application's ``Agent``, as
``agentloop ui --agent`` does.

Real parts: the CLI as a subprocess, the fake OpenAI-compatible server behind the real adapter,
one SQLite file.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

SHOP = '''
import os

from agentloop import Agent, tool
from agentloop.guardrails import OutputGuardrail
from agentloop.providers import Settings, build_client
from agentloop.store import SQLiteStore


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    with open("refunds.log", "a") as log:
        log.write(order + "\\n")
    return f"refunded {order}"


def no_card_numbers(ctx, answer):
    return "the answer quotes a card number" if sum(c.isdigit() for c in answer) >= 16 else None


settings = Settings(provider="openai", model="fake-model", base_url=os.environ["SHOP_URL"])
agent = Agent(
    build_client(settings),
    tools=[refund],
    store=SQLiteStore("shop.db"),
    system="You are the shop's support agent.",
    guardrails=[OutputGuardrail(no_card_numbers, retry=True)],
)
'''

SCRIPT = [
    FakeReply(tool_calls=[FakeToolCall("refund", {"order": "A-1"}, id="call_r1")]),
    FakeReply("Refunded to card 4111 1111 1111 1111."),  # the guardrail rejects it
    FakeReply("Refunded to your card ending in 1111."),
]


def cli(project: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"SHOP_URL": url, "PYTHONDONTWRITEBYTECODE": "1"}
    argv = [sys.executable, "-m", "agentloop", *args]
    return subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def paused_run(project: Path, url: str) -> str:
    """The shop pauses on the refund (in a process of its own, as its web app would)."""
    code = (
        "from shop import agent\n"
        "run = agent.session('thread-1').run_sync('refund A-1')\n"
        "assert run.paused\n"
        "print(run.id)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"SHOP_URL": url}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


async def test_continue_with_the_apps_agent_keeps_its_instructions_tools_and_guardrails(
    tmp_path: Path,
) -> None:
    (tmp_path / "shop.py").write_text(SHOP)
    async with FakeProviderServer(SCRIPT) as fake:
        url = fake.base_url
        run_id = await asyncio.to_thread(paused_run, tmp_path, url)
        wrong = await asyncio.to_thread(
            cli,
            tmp_path,
            url,
            "continue",
            run_id[:12],
            "--store",
            "shop.db",
            "--agent",
            "shop:refund",
            "--approve",
            "call_r1",
        )
        assert wrong.returncode == 2 and "not an Agent" in wrong.stderr
        done = await asyncio.to_thread(
            cli,
            tmp_path,
            url,
            "continue",
            run_id[:12],
            "--store",
            "shop.db",
            "--agent",
            "shop:agent",
            "--approve",
            "call_r1",
        )
        requests = list(fake.requests)
    assert done.returncode == 0, done.stderr
    assert "Unclosed" not in done.stderr, done.stderr
    assert "ending in 1111" in done.stdout and "4111 1111" not in done.stdout
    continued = requests[1]
    assert continued["messages"][0] == {
        "role": "system",
        "content": "You are the shop's support agent.",
    }
    assert [t["function"]["name"] for t in continued["tools"]] == ["refund"]
    assert (tmp_path / "refunds.log").read_text() == "A-1\n"
    store = SQLiteStore(tmp_path / "shop.db")
    try:
        [stored] = store.load_runs("thread-1")
    finally:
        store.close()
    assert stored.run.output == "Refunded to your card ending in 1111."


def test_continue_needs_an_agent_or_a_provider_not_both(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(SHOP)
    SQLiteStore(tmp_path / "shop.db").close()
    neither = cli(tmp_path, "http://127.0.0.1:9/v1", "continue", "abc", "--store", "shop.db")
    assert neither.returncode == 2
    assert "--provider" in neither.stderr and "--agent MODULE:NAME" in neither.stderr
    both = cli(
        tmp_path,
        "http://127.0.0.1:9/v1",
        "continue",
        "abc",
        "--store",
        "shop.db",
        "--agent",
        "shop:agent",
        "--provider",
        "openai",
        "--tools",
        "shop:refund",
    )
    assert both.returncode == 2
    assert "leave out --provider, --tools" in both.stderr
