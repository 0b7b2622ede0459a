"""A batch test's process: submit a batch run, or poll the store; ``KILL``: where it dies.

``argv``: the store's path, the fake server's base URL, ``submit`` or ``poll``. The tool writes
each call to ``EFFECTS``; with ``HOLD`` it waits for that file to exist (another process polls
meanwhile); ``KILL=Bergen`` SIGKILLs the process when the tool is called for Bergen (after the
call for Oslo finished and was journaled).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

from agentloop import Agent, RunConfig, tool
from agentloop.batch import poll
from agentloop.providers.openai import OpenAIClient
from agentloop.store import SQLiteStore


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    if os.environ.get("KILL") == city:
        os.kill(os.getpid(), signal.SIGKILL)
    with open(os.environ["EFFECTS"], "a") as f:
        f.write(f"{city}\n")
    hold = os.environ.get("HOLD")
    while hold and not os.path.exists(hold):
        time.sleep(0.01)
    return f"{city}: sunny"


async def main(db: str, base_url: str, mode: str) -> None:
    client = OpenAIClient("gpt-test", api_key="sk-test", base_url=base_url)
    agent = Agent(client, tools=[lookup], store=SQLiteStore(db), config=RunConfig(batch=True))
    if mode == "submit":
        run = await agent.run("weather?")
        print(json.dumps(run.id))
        return
    report = await poll(agent)
    failed = {k: type(v).__name__ for k, v in report.failed.items()}
    print(json.dumps({"continued": report.continued, "waiting": report.waiting,
                      "failed": failed}))  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
