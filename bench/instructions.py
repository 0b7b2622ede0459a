"""Issue 26's goals in machine instructions (callgrind ``Ir``), which other jobs do not move.

Timings on a shared 2-vCPU machine move 10-50 % from one run to the next; the instructions a
piece of work executes do not (within about 1 %). Each figure runs a program twice under
``valgrind --tool=callgrind`` (with and without the work) and divides the difference:

- ``turn``: goal 1, instructions per tool turn of ``provider_overhead.py``'s ``agentloop`` and
  ``raw aiohttp`` loops (K = 10) against its server in a process of its own (not counted), JSON
  and SSE, N = 1 (20 conversations) and N = 100 (100 conversations at once), and the ratio;
- ``import``: goal 3, the instructions of ``import_time.py``'s agent program above its baseline
  program, both from a bytecode cache;
- ``many``: goal 2, instructions per run of 2,000 runs 1,000 at a time (K = 1, the
  collector on), ``raw aiohttp``, ``agentloop client`` (``OpenAIClient`` in the raw loop's hand
  loop, no ``Agent``) and ``agentloop``, JSON and SSE: the ratio the runs/s of
  ``concurrency.py`` would have if time followed instructions;
- ``stream``: goal 4, instructions per turn of ``stream_overhead.py``'s engine-only ``run()``
  and ``stream()`` (K = 100, 10 runs), and the ratio;
- ``caches``: ``many``'s JSON runs again with callgrind's cache and branch simulation (L1 sized
  as this CPU's, the last level as its L2, read from ``/sys``): misses and mispredicted branches
  per run, to see whether the engine's instructions miss more than the raw loop's (slow: about
  25 minutes);
- ``client``: the provider client's own cost, instructions per model call of
  ``provider_overhead.py``'s ``agentloop client`` loop (``OpenAIClient`` in a hand loop, no
  ``Agent``) against ``raw aiohttp``, JSON and SSE, N = 1, K = 1 (100 conversations of two calls
  after 2 warm-up ones; at K = 10 the raw loop re-encodes its whole history every call while
  the client encodes each message once, which hides the client's cost per call). One program
  per tree under callgrind counting only inside ``functools.reduce`` (as ``instruction_guard.py``
  does): nothing is subtracted. ``many`` has the client alone at N = 1000.

    python bench/instructions.py                        # all but caches, this tree
    python bench/instructions.py turn --before /tmp/old/src
    python bench/instructions.py many
    python bench/instructions.py client --before /tmp/old/src
    python bench/instructions.py caches                 # misses and mispredictions, slow

Needs ``valgrind`` (``apt install valgrind``). A benchmark, not a test; only 127.0.0.1 is used.
Slow: each figure is a program run under valgrind (about 50x slower), all of them 10-20 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
TURNS = 11  # K = 10 tool turns and the answer, per provider_overhead conversation

TURN_PROGRAM = """
import asyncio, gc, os, sys
if not os.environ.get("BENCH_GC"):  # a collection falls where it falls: it would move the count
    gc.disable()                    # by more than a run (``many`` keeps it: 1,000 runs average it)
sys.path.insert(0, {bench!r})
import provider_overhead as po
who, stream, conc, runs = sys.argv[1], sys.argv[2] == "sse", int(sys.argv[3]), int(sys.argv[4])
LOOPS = {{"agentloop": po.AgentloopLoop, "client": po.ClientLoop, "raw": po.AiohttpLoop}}
async def main():
    loop = LOOPS[who](os.environ["BENCH_URL"])
    try:  # the pool's connections open first, 100 at a time: under callgrind a loop turn of
        # 1,000 runs outlasts the connect timeout
        await asyncio.gather(*(loop.run(stream) for _ in range(min(conc, 100))))
        for _ in range(1 + runs // conc):  # the first batch warms up, and is in both programs
            await asyncio.gather(*(loop.run(stream) for _ in range(conc)))
    finally:
        await loop.aclose()
asyncio.run(main())
"""

STREAM_PROGRAM = """
import asyncio, gc, sys
gc.disable()  # a collection falls where it falls: it would move the count by more than a run
sys.path.insert(0, {bench!r})
from stream_overhead import split_run
how, n = sys.argv[1], int(sys.argv[2])
async def main():
    for _ in range(2 + n):
        await split_run(how)
asyncio.run(main())
"""


CLIENT_PROGRAM = """
import asyncio, functools, gc, os, sys
gc.disable()
def counted(work):  # callgrind counts inside functools.reduce only, one dump per call
    return functools.reduce(lambda _, __: work(), [0], None)
sys.path.insert(0, {bench!r})
import provider_overhead as po
loop = asyncio.new_event_loop()
async def conversations(bench, stream, n):
    for _ in range(n):
        await bench.run(stream)
async def make(cls):  # aiohttp's session wants a running loop
    return cls(os.environ["BENCH_URL"])
for cls in (po.AiohttpLoop, po.ClientLoop):
    bench = loop.run_until_complete(make(cls))
    for stream in (False, True):
        loop.run_until_complete(conversations(bench, stream, 2))
        counted(lambda: loop.run_until_complete(conversations(bench, stream, {runs})))
    loop.run_until_complete(bench.aclose())
loop.close()
"""
CLIENT_RUNS = 100
CLIENT_TURNS = 2  # K = 1 tool turn and the answer


def instructions(argv: list[str], env: dict[str, str]) -> int:
    """The instructions ``argv`` executes under callgrind (run once before: bytecode cached)."""
    subprocess.run(argv, env=env, check=True, capture_output=True)
    found = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    match = re.search(r"Collected : (\d+)", found)
    if match is None:
        raise SystemExit(f"callgrind printed no count:\n{found[-2000:]}")
    return int(match.group(1))


def simulated(argv: list[str], env: dict[str, str], flags: list[str]) -> dict[str, int]:
    """Every event callgrind counts for ``argv`` with ``flags`` (its cache and branch models)."""
    subprocess.run(argv, env=env, check=True, capture_output=True)
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *flags]
    found = subprocess.run([*valgrind, *argv], env=env, capture_output=True, text=True, check=True)
    names = re.search(r"Events\s*:\s*(.*)", found.stderr)
    counts = re.search(r"Collected\s*:\s*(.*)", found.stderr)
    if names is None or counts is None:
        raise SystemExit(f"callgrind printed no counts:\n{found.stderr[-2000:]}")
    return dict(zip(names.group(1).split(), (int(c) for c in counts.group(1).split()), strict=True))


def cache_flags() -> list[str]:
    """callgrind's simulated I1, D1 and last level, sized as this CPU's L1i, L1d and L2."""
    sizes: dict[str, str] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        kind = {"Instruction": "I", "Data": "D"}.get((index / "type").read_text().strip(), "")
        level = (index / "level").read_text().strip()
        size = int((index / "size").read_text().strip().rstrip("K")) * 1024
        ways = (index / "ways_of_associativity").read_text().strip()
        line = (index / "coherency_line_size").read_text().strip()
        sizes[f"{kind}{level}"] = f"{size},{ways},{line}"
    if not {"I1", "D1", "2"} <= set(sizes):
        raise SystemExit(f"this CPU's caches were not found in /sys: {sizes}")
    return [
        "--cache-sim=yes",
        "--branch-sim=yes",
        f"--I1={sizes['I1']}",
        f"--D1={sizes['D1']}",
        f"--LL={sizes['2']}",
    ]


def cache_figures(trees: list[Path], cache: str) -> None:
    """``many``'s JSON runs under simulated caches and branch predictors, per run."""
    flags, conc, runs = cache_flags(), 1000, 2000
    print(f"callgrind {' '.join(flags[2:])} (the last level as this CPU's L2), N = {conc}, JSON")
    print("| client | tree | instructions | I1 misses | D1 misses | L2 misses | mispredicted |")
    print("|---|---|---:|---:|---:|---:|---:|")
    with fake_server(1) as url:
        whos = [("raw", trees[0]), ("client", trees[0]), *(("agentloop", t) for t in trees)]
        for who, tree in whos:
            env = {**environment(tree, cache), "BENCH_URL": url, "BENCH_GC": "1"}
            argv = [sys.executable, "-c", TURN_PROGRAM.format(bench=str(HERE)), who, "json"]
            some = simulated([*argv, str(conc), str(runs)], env, flags)
            none = simulated([*argv, str(conc), "0"], env, flags)
            d = {k: (some[k] - none[k]) / runs for k in some}
            row = [d["Ir"], d["I1mr"], d["D1mr"] + d["D1mw"], d["ILmr"] + d["DLmr"] + d["DLmw"]]
            row.append(d["Bcm"] + d["Bim"])
            print(f"| {who} | {tree} | " + " | ".join(f"{v:,.0f}" for v in row) + " |")


def environment(src: Path, cache: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    env["PYTHONPYCACHEPREFIX"] = cache
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@contextlib.contextmanager
def fake_server(turns: int) -> Iterator[str]:
    """``provider_overhead.py``'s server in a process of its own (K = ``turns``); its URL."""
    sys.path.insert(0, str(HERE))
    from provider_overhead import start_server

    server, url = start_server(turns)
    try:
        yield url
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)


def loop_count(who: str, mode: str, conc: int, runs: int, env: dict[str, str]) -> int:
    """Instructions of ``runs`` conversations of loop ``who``, ``conc`` at a time, less none."""
    argv = [sys.executable, "-c", TURN_PROGRAM.format(bench=str(HERE)), who, mode, str(conc)]
    return instructions([*argv, str(runs)], env) - instructions([*argv, "0"], env)


def turn_figures(trees: list[Path], cache: str) -> None:
    """Goal 1: instructions per turn, agentloop and raw aiohttp, and their ratio."""
    with fake_server(10) as url:
        print("| mode | N | client | tree | instructions/turn | vs raw aiohttp |")
        print("|---|---:|---|---|---:|---:|")
        for mode in ("json", "sse"):
            for conc, runs in ((1, 20), (100, 100)):
                rows: list[tuple[str, str, int]] = []
                for who, tree in [("raw", trees[0]), *(("agentloop", t) for t in trees)]:
                    env = {**environment(tree, cache), "BENCH_URL": url}
                    count = loop_count(who, mode, conc, runs, env) // (runs * TURNS)
                    rows.append((who, str(tree), count))
                raw = rows[0][2]
                for who, tree, count in rows:
                    print(f"| {mode} | {conc} | {who} | {tree} | {count:,} | {count / raw:.2f}x |")


def many_figures(trees: list[Path], cache: str) -> None:
    """Goal 2: instructions per run at N = 1000 (K = 1, the collector on), each client."""
    conc, runs = 1000, 2000
    with fake_server(1) as url:
        print("| mode | client | tree | instructions/run | vs raw aiohttp |")
        print("|---|---|---|---:|---:|")
        for mode in ("json", "sse"):
            rows: list[tuple[str, str, int]] = []
            whos = [("raw", trees[0]), ("client", trees[0]), *(("agentloop", t) for t in trees)]
            for who, tree in whos:
                env = {**environment(tree, cache), "BENCH_URL": url, "BENCH_GC": "1"}
                rows.append((who, str(tree), loop_count(who, mode, conc, runs, env) // runs))
            raw = rows[0][2]
            for who, tree, count in rows:
                print(f"| {mode} | {who} | {tree} | {count:,} | {count / raw:.2f}x |")


def client_figures(trees: list[Path], cache: str) -> None:
    """The provider client alone against raw aiohttp: instructions a model call, N = 1, K = 1."""
    program = CLIENT_PROGRAM.format(bench=str(HERE), runs=CLIENT_RUNS)
    with fake_server(1) as url, tempfile.TemporaryDirectory() as out:
        print("| mode | tree | raw aiohttp | agentloop client | ratio |")
        print("|---|---|---:|---:|---:|")
        for tree in trees:
            env = {**environment(tree, cache), "BENCH_URL": url}
            argv = [sys.executable, "-c", program]
            subprocess.run(argv, env=env, check=True, capture_output=True)  # bytecode cached
            base = Path(out) / "cg.out"
            valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={base}"]
            valgrind += ["--collect-atstart=no", "--toggle-collect=functools_reduce"]
            valgrind += ["--dump-after=functools_reduce"]
            subprocess.run([*valgrind, *argv], env=env, check=True, capture_output=True)
            calls = CLIENT_RUNS * CLIENT_TURNS
            counts = [_dumped(Path(f"{base}.{n}")) // calls for n in (1, 2, 3, 4)]
            for mode, raw, client in (("json", *counts[::2]), ("sse", *counts[1::2])):
                print(f"| {mode} | {tree} | {raw:,} | {client:,} | {client / raw:.2f}x |")


def _dumped(path: Path) -> int:
    match = re.search(r"^(?:totals|summary): (\d+)", path.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"callgrind wrote no count in {path}")
    path.unlink()
    return int(match.group(1))


def import_figures(trees: list[Path], cache: str) -> None:
    """Goal 3: the agent program's instructions above the baseline program's."""
    sys.path.insert(0, str(HERE))
    from import_time import AGENT, BASELINE

    print("| tree | baseline | agent | own share |")
    print("|---|---:|---:|---:|")
    for tree in trees:
        env = environment(tree, cache)
        base = instructions([sys.executable, "-c", BASELINE], env)
        agent = instructions([sys.executable, "-c", AGENT], env)
        own = (agent - base) / 1e6
        print(f"| {tree} | {base / 1e6:.1f} M | {agent / 1e6:.1f} M | {own:.1f} M |")


def stream_figures(trees: list[Path], cache: str) -> None:
    """Goal 4: engine-only instructions per turn of run() and stream(), and their ratio."""
    program = STREAM_PROGRAM.format(bench=str(HERE))
    print("| tree | run() / turn | stream() / turn | ratio |")
    print("|---|---:|---:|---:|")
    for tree in trees:
        env = environment(tree, cache)
        counts = {}
        for how in ("run", "stream"):
            none = instructions([sys.executable, "-c", program, how, "0"], env)
            some = instructions([sys.executable, "-c", program, how, "10"], env)
            counts[how] = (some - none) // (10 * 101)  # 10 runs of K = 100 turns and the answer
        ratio = counts["stream"] / counts["run"]
        print(f"| {tree} | {counts['run']:,} | {counts['stream']:,} | {ratio:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "what",
        nargs="*",
        help="turn, many, import, stream, client, caches (default: all but caches)",
    )
    parser.add_argument("--before", type=Path, help="also count another tree's src")
    args = parser.parse_args()
    figures = {
        "turn": turn_figures,
        "many": many_figures,
        "import": import_figures,
        "stream": stream_figures,
        "client": client_figures,
        "caches": cache_figures,
    }
    unknown = set(args.what) - set(figures)
    if unknown:
        parser.error(f"unknown figure(s): {', '.join(sorted(unknown))}; pick {', '.join(figures)}")
    trees = [SRC, *([args.before] if args.before else [])]
    with tempfile.TemporaryDirectory() as cache:
        for what in args.what or [f for f in figures if f != "caches"]:
            print(f"\n## {what}\n")
            figures[what](trees, cache)


if __name__ == "__main__":
    main()
