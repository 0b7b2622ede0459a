"""A crash tests' child: run (or continue) the plan's agent; ``KILL`` says where it dies."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _plan


async def main(db: str, mode: str) -> None:
    agent = _plan.build(db, resume=mode != "run")
    if mode == "run":
        await agent.run("go")
    else:
        run = await agent.continue_run()
        print(run.output)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
