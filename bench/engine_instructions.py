"""The engine alone in instructions per run at N concurrent runs (callgrind ``Ir``).

Goal 2 of issue 39 is runs/s at N = 1,000 against a raw aiohttp loop; the provider client's part
is measured by ``instructions.py many``/``client``. This is the other part: the engine's own
work for one run (``agent.session().run("go")``: one tool turn and the answer) on a model that
answers in process, N runs at once, the collector on, counted by callgrind inside
``functools.reduce`` only (as ``instruction_guard.py`` does), after two warm-up batches.

    python bench/engine_instructions.py                      # N = 1000, this tree
    python bench/engine_instructions.py --runs 100 --src /tmp/old/src
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = '''
import asyncio, functools
from agentloop import Agent, tool
from agentloop.messages import Message, TextPart, ToolCallPart
from agentloop.model import ModelResponse, Usage

@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"

class Fast:
    model = "fast"; provider = "fast"
    def check_provider_tools(self, tools, functions): pass
    async def complete(self, request):
        await asyncio.sleep(0)
        if request.messages[-1].role == "user":
            call = ToolCallPart("c1", "lookup", {"key": "k"})
            return ModelResponse(Message("assistant", (call,)), Usage(10, 5), model="fast",
                                 stop_reason="tool_use")
        return ModelResponse(Message("assistant", (TextPart("done"),)), Usage(10, 5),
                             model="fast", stop_reason="end_turn")
    async def aclose(self): pass

async def batch(agent, n):
    await asyncio.gather(*(agent.session().run("go") for _ in range(n)))

loop = asyncio.new_event_loop()
agent = Agent(Fast(), tools=[lookup])
loop.run_until_complete(batch(agent, RUNS)); loop.run_until_complete(batch(agent, RUNS))
functools.reduce(lambda a, _: loop.run_until_complete(batch(agent, RUNS)), [0], 0)
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="concurrent runs (N)")
    parser.add_argument("--src", type=Path, default=Path(__file__).parents[1] / "src")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        program = Path(work, "engine.py")
        program.write_text(PROGRAM.replace("RUNS", str(args.runs)))
        env = dict(os.environ, PYTHONPATH=str(args.src.resolve()))
        subprocess.run([sys.executable, str(program)], env=env, check=True)  # bytecode cached
        out = Path(work, "callgrind.out")
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        valgrind += ["--collect-atstart=no", "--toggle-collect=functools_reduce"]
        subprocess.run(
            [*valgrind, sys.executable, str(program)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        found = re.search(r"^(?:summary|totals):\s*(\d+)", out.read_text(), re.M)
        if found is None:
            raise SystemExit(f"callgrind wrote no count in {out}")
    per_run = int(found.group(1)) / args.runs
    print(f"the engine alone, N = {args.runs}: {per_run:,.0f} instructions a run ({args.src})")


if __name__ == "__main__":
    main()
