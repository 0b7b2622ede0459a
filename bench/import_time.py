"""What ``import agentloop`` costs: wall and CPU time net of the bare interpreter.

Each statement runs in a fresh interpreter (``python -c``) ``--repeats`` times, interleaved with
``python -c "pass"``; the median of each is kept and the bare interpreter's median subtracted.
CPU time is the child's user + system time (``os.wait4``), which a loaded machine disturbs less
than wall time. ``--importtime`` adds the modules with the largest cumulative ``-X importtime``
of the first statement. ``--before DIR`` also times every statement with ``DIR`` (the ``src``
of another checkout, e.g. ``git worktree add /tmp/old <commit>``) first on ``PYTHONPATH``,
interleaved with the current tree, so both columns come from the same run.

    python bench/import_time.py
    python bench/import_time.py --importtime 25 "from agentloop import Agent, tool"
    python bench/import_time.py --before /tmp/old/src
    python bench/import_time.py --own-share                 # issue 26, goal 3
    python bench/import_time.py --own-share --before /tmp/old/src

``--own-share`` times issue 26's goal 3: a program that imports ``Agent`` and ``tool``, decorates
one tool and builds an agent, against a baseline that imports asyncio and pydantic and builds one
pydantic model (what any program on agentloop pays anyway), each in fresh interpreters,
interleaved; agentloop's own share is the difference of the minima (and of the medians) of CPU
time. Both run from cached bytecode, as an installed package does: ``PYTHONDONTWRITEBYTECODE`` is
dropped and ``PYTHONPYCACHEPREFIX`` points to a directory under the temp dir (``--source`` keeps
compiling from source each time, which costs about 50 ms more). It also names any module of
the store, durable, MCP, OTel, UI or rich that the program imported (there should be none).

A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

STATEMENTS = (
    "import agentloop",
    "import agentloop.providers",
    "from agentloop import Agent, RunConfig, tool",
    "from agentloop import Agent, RunConfig, tool; from agentloop.providers import OpenAIClient",
)


BASELINE = """
import asyncio
import pydantic

class M(pydantic.BaseModel):
    key: str
"""

AGENT = """
from agentloop import Agent, tool

class Client:
    model = "m"
    provider = "p"
    async def complete(self, request): ...

@tool
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return key

agent = Agent(Client(), tools=[lookup])
"""

FORBIDDEN = ("agentloop.store", "agentloop.durable", "agentloop.mcp", "agentloop.otel")
FORBIDDEN_ANY = ("agentloop.ui", "rich", "opentelemetry", "mcp")

_ENV: dict[str, str] = {}


def once(statement: str, path: str | None = None) -> tuple[float, float]:
    """(wall ms, CPU ms) of one ``python -c statement``, with ``path`` first on PYTHONPATH."""
    env = dict(os.environ)
    env.update(_ENV)
    if "PYTHONPYCACHEPREFIX" in _ENV:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, env.get("PYTHONPATH")]))
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", statement], env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{statement!r} exited with {process.returncode}")
    return wall * 1e3, (usage.ru_utime + usage.ru_stime) * 1e3


Sample = tuple[str, str | None]  # (statement, path first on PYTHONPATH)


def measure(samples: list[Sample], repeats: int) -> dict[Sample, tuple[float, float]]:
    """Median (wall ms, CPU ms) per sample, interleaved."""
    found: dict[Sample, list[tuple[float, float]]] = {s: [] for s in samples}
    for _ in range(repeats):
        for sample in samples:
            found[sample].append(once(*sample))
    return {
        s: (statistics.median(w for w, _ in xs), statistics.median(c for _, c in xs))
        for s, xs in found.items()
    }


def importtime(statement: str, top: int) -> None:
    """The ``top`` modules by cumulative ``-X importtime`` (microseconds, one run)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own_us, cumulative_us, name = line.removeprefix("import time:").split("|")
        rows.append((int(cumulative_us), int(own_us), name.rstrip()))
    print(f"\n-X importtime of {statement!r}: top {top} by cumulative us (one run)")
    for cumulative, own, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cumulative:8d} {own:8d}  {name}")


def own_share(repeats: int, before: str | None) -> None:
    """Issue 26, goal 3: CPU of AGENT above BASELINE, min and median, fresh interpreters."""
    trees = [None, before] if before else [None]
    samples: list[Sample] = [(BASELINE, None), *((AGENT, tree) for tree in trees)]
    for sample in samples:
        once(*sample)  # writes the bytecode cache
    found: dict[Sample, list[float]] = {s: [] for s in samples}
    for _ in range(repeats):
        for sample in samples:
            found[sample].append(once(*sample)[1])
    base = found.pop((BASELINE, None))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{repeats} interleaved fresh interpreters each; CPU ms (user + system)\n")
    print("| program | tree | min | median | own share (min - min) | (median - median) |")
    print("|---|---|---:|---:|---:|---:|")
    print(f"| baseline | - | {min(base):.1f} | {statistics.median(base):.1f} | | |")
    for (_, tree), cpus in found.items():
        mine, med = min(cpus), statistics.median(cpus)
        print(
            f"| agent | {'this' if tree is None else tree} | {mine:.1f} | {med:.1f} "
            f"| {mine - min(base):.1f} | {med - statistics.median(base):.1f} |"
        )
    probe = AGENT + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    env = {**os.environ, **_ENV}
    names = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    ours = [n for n in names if n == "agentloop" or n.startswith("agentloop.")]
    bad = [
        n
        for n in names
        if n.startswith(FORBIDDEN)
        or n.split(".")[0] in FORBIDDEN_ANY
        or n.startswith("agentloop.ui")
    ]
    print(f"\n{len(ours)} agentloop modules imported; forbidden ones: {', '.join(bad) or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("statements", nargs="*", help="statements to time (default: a set)")
    parser.add_argument("--repeats", type=int, default=10, help="runs per statement (median)")
    parser.add_argument("--importtime", type=int, default=0, metavar="N", help="top N modules")
    parser.add_argument("--before", metavar="DIR", help="also time with DIR first on PYTHONPATH")
    parser.add_argument("--own-share", action="store_true", help="issue 26 goal 3 (see above)")
    parser.add_argument("--source", action="store_true", help="with --own-share: no bytecode cache")
    args = parser.parse_args()
    if args.own_share:
        if not args.source:
            _ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "agentloop-bench-pyc")
        own_share(max(args.repeats, 15), args.before)
        return
    statements = args.statements or list(STATEMENTS)
    trees = [None, args.before] if args.before else [None]
    results = measure(
        [("pass", None), *((s, tree) for s in statements for tree in trees)], args.repeats
    )
    base_wall, base_cpu = results.pop(("pass", None))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, median of {args.repeats}")
    print(f"bare interpreter: {base_wall:.1f} ms wall, {base_cpu:.1f} ms CPU\n")
    print("| statement | tree | wall ms (net) | CPU ms (net) |")
    print("|---|---|---:|---:|")
    for (statement, tree), (wall, cpu) in results.items():
        where = "this" if tree is None else tree
        print(f"| `{statement}` | {where} | {wall - base_wall:.1f} | {cpu - base_cpu:.1f} |")
    if args.importtime:
        importtime(statements[0], args.importtime)


if __name__ == "__main__":
    main()
