"""SPEC 22's goals for toolsets and tool search, measured.

- ``bytes``: 300 deferred tools with MCP-sized schemas (a GitHub-MCP-like catalogue: a paragraph
  of description, 6-9 parameters with descriptions and enums). The first request's ``tools`` and
  ``system`` bytes (canonical JSON of name, description and schema, as every adapter sends them)
  with the tools deferred, against sending all 300. Goal: <= 10 %.
- ``search``: ``search_tools``' BM25 over 10,000 tools: index build once, then the median of 200
  queries. Goal: < 50 ms per query.
- ``plain``: a run with no toolsets against the same run before (``--before /path/to/old/src``):
  engine-only turns (``ScriptedModel``, one tool), microseconds of CPU per turn, interleaved.

    python bench/toolsets.py                 # bytes and search
    python bench/toolsets.py --before /tmp/old/src   # and the plain-run comparison
    python bench/toolsets.py --before /tmp/old/src --valgrind   # in instructions (callgrind)

A benchmark, not a test; nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

AREAS = ("issue", "pull_request", "repository", "branch", "release", "workflow", "gist", "team")
VERBS = ("create", "update", "list", "get", "delete", "search", "merge", "close", "assign", "label")


def mcp_schema(i: int) -> dict[str, Any]:
    """A schema the size of a real MCP tool's (6-9 described parameters, an enum, an array)."""
    props: dict[str, Any] = {
        "owner": {"type": "string", "description": "Repository owner (user or organisation)."},
        "repo": {"type": "string", "description": "Repository name, without the owner."},
        "title": {"type": "string", "description": "Title of the item; plain text, 256 max."},
        "body": {"type": "string", "description": "Body in GitHub-flavoured Markdown."},
        "state": {
            "type": "string",
            "enum": ["open", "closed", "all"],
            "description": "Filter or set the state of the item.",
        },
        "labels": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Labels to apply; each must already exist in the repository.",
        },
    }
    for extra in range(i % 4):
        props[f"option_{extra}"] = {
            "type": "integer",
            "minimum": 1,
            "description": f"Optional tuning value number {extra} for this operation.",
        }
    return {"type": "object", "properties": props, "required": ["owner", "repo"]}


def catalogue(count: int) -> list[Any]:
    from agentloop.model import ToolSpec

    specs = []
    for i in range(count):
        verb, area = VERBS[i % len(VERBS)], AREAS[(i // len(VERBS)) % len(AREAS)]
        name = f"{verb}_{area}_{i}"
        description = (
            f"{verb.capitalize()} a {area.replace('_', ' ')} in a GitHub repository. Use this "
            f"when the user asks to {verb} {area.replace('_', ' ')}s; it needs the owner and the "
            "repository, and returns the resulting object as JSON with its URL, number, author "
            "and timestamps. Fails with a clear message when the token lacks the scope."
        )
        specs.append(ToolSpec(name, description, mcp_schema(i)))
    return specs


def wire_bytes(request: Any) -> int:
    """``tools`` + ``system`` as an adapter sends them (canonical JSON)."""
    tools = [
        {"name": s.name, "description": s.description, "input_schema": s.parameters}
        for s in request.tools
    ]
    text = json.dumps(tools, separators=(",", ":"), sort_keys=True)
    return len(text.encode()) + len((request.system or "").encode())


async def measure_bytes(count: int) -> tuple[int, int]:
    from agentloop import Agent, RunConfig
    from agentloop.testing import ScriptedModel, reply
    from agentloop.tools import Tool
    from agentloop.toolsets import FunctionToolset

    class Spec(Tool):
        def __init__(self, spec: Any) -> None:
            self.name, self.description, self.parameters = (
                spec.name,
                spec.description,
                spec.parameters,
            )

    tools = [Spec(s) for s in catalogue(count)]
    sizes = []
    for search in ("auto", "off"):
        model = ScriptedModel([reply("ok")])
        config = RunConfig(tool_search=search)
        toolset = FunctionToolset(tools, name="github").deferred()
        await Agent(model, system="You are careful.", toolsets=[toolset], config=config).run("go")
        sizes.append(wire_bytes(model.requests[0]))
    return sizes[0], sizes[1]


def measure_search(count: int, queries: int) -> tuple[float, float]:
    from agentloop.toolsets import SearchIndex

    specs = catalogue(count)
    started = time.perf_counter()
    index = SearchIndex(specs)
    build = time.perf_counter() - started
    words = ["create issue", "merge pull request", "list releases labels", "gist 4711", "team"]
    times = []
    for q in range(queries):
        started = time.perf_counter()
        index.search(words[q % len(words)], 5)
        times.append(time.perf_counter() - started)
    return build, statistics.median(times)


PLAIN = """
import asyncio, sys, time
sys.path.insert(0, sys.argv[1])
from agentloop import Agent, tool
from agentloop.testing import ScriptedModel, call, reply

@tool
def lookup(key: str) -> str:
    '''Look a key up.'''
    return key

TURNS = int(sys.argv[3]) if len(sys.argv) > 3 else 50
async def main():
    best = None
    for _ in range(int(sys.argv[2])):
        steps = [call("lookup", {"key": f"k{i}"}) for i in range(TURNS)] + [reply("done")]
        agent = Agent(ScriptedModel(steps), tools=[lookup])
        started = time.process_time()
        await agent.run("go")
        took = (time.process_time() - started) / (TURNS + 1)
        best = took if best is None else min(best, took)
    print(best * 1e6)
asyncio.run(main())
"""


def plain_turn(src: Path, rounds: int) -> float:
    done = subprocess.run(
        [sys.executable, "-c", PLAIN, str(src), str(rounds)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip())


def instructions(src: Path, turns: int) -> int:
    """Callgrind's ``Ir`` for one plain run of ``turns`` tool turns on ``src``."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             "-c", PLAIN, str(src), "1", str(turns)],
            capture_output=True, check=True,
        )  # fmt: skip
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no callgrind summary")


def per_turn_instructions(src: Path) -> float:
    """Instructions per turn: (50 turns - 0 turns) / 50, the same program otherwise."""
    return (instructions(src, 50) - instructions(src, 0)) / 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=300)
    parser.add_argument("--search-tools", type=int, default=10_000)
    parser.add_argument("--before", type=Path, help="an older tree's src/ for the plain run")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--valgrind", action="store_true", help="instructions per plain turn")
    args = parser.parse_args()
    sys.path.insert(0, str(SRC))
    deferred, everything = asyncio.run(measure_bytes(args.tools))
    share = 100 * deferred / everything
    print(f"first request, {args.tools} deferred tools: {deferred:,} bytes")
    print(f"first request, all {args.tools} sent:     {everything:,} bytes")
    print(f"share: {share:.2f} % (goal <= 10 %)")
    build, query = measure_search(args.search_tools, 200)
    print(f"search over {args.search_tools:,} tools: index {build * 1e3:.1f} ms once, ")
    print(f"  median query {query * 1e3:.3f} ms (goal < 50 ms)")
    if args.before is not None:
        for _ in range(2):  # interleaved
            now, then = plain_turn(SRC, args.rounds), plain_turn(args.before, args.rounds)
            print(f"plain run, CPU per turn: this tree {now:.1f} us, before {then:.1f} us")
        if args.valgrind:
            now_ir, then_ir = per_turn_instructions(SRC), per_turn_instructions(args.before)
            print(f"plain run, instructions per turn: this tree {now_ir:,.0f}, ")
            print(f"  before {then_ir:,.0f} ({100 * (now_ir / then_ir - 1):+.2f} %)")


if __name__ == "__main__":
    main()
