"""The CI guard on speed: instructions of the first line and of one tool turn, against a baseline.

Timings on a shared machine move 10-50 % from one run to the next; the instructions a piece of
work executes (valgrind's callgrind ``Ir``) move by about 1 %. So the suite guards speed in
instructions: ``tests/test_instruction_guard.py`` runs this script's ``measure`` and fails when a
figure is more than 10 % above ``bench/instruction_baseline.json``. The baseline is updated on
purpose only, by a person who means it (a slower turn that buys something), with:

    python bench/instruction_guard.py --update      # measure, and write the baseline
    python bench/instruction_guard.py               # measure, and compare (exit 1 on a regression)

One program runs once under callgrind, which counts only inside ``functools.reduce``
(``--toggle-collect``) and writes one count per call (``--dump-after``); the program calls it
exactly three times, around the work to count:

- ``import``: ``import agentloop``, the first line, from a bytecode cache;
- ``turn_json`` and ``turn_sse``: one conversation of ``provider_overhead.py``'s ``agentloop``
  loop (an ``Agent`` with one tool over ``OpenAIClient``, default ``RunConfig``, a session per
  run, K = 10 tool turns and the answer) against its fake server in a process of its own (not
  counted), after two warm-up conversations; divided by its 11 model calls.

So nothing is subtracted, and the start-up (the interpreter, asyncio, aiohttp, pydantic) is not
counted. The counts depend on the interpreter and the libraries: the baseline records the Python
version, and a different one skips the comparison (with the reason) instead of comparing apples
with pears. Needs ``valgrind``; a benchmark-grade measurement, about 15-30 s of CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
BASELINE = HERE / "instruction_baseline.json"
TOLERANCE = 0.10
"""A figure more than this share above its baseline is a regression."""
TURNS = 11  # K = 10 tool turns and the answer

PROGRAM = """
import asyncio, functools, gc, importlib, os, sys
gc.disable()  # a collection falls where it falls: it would move the count
def counted(work):  # callgrind counts inside functools.reduce only, one dump per call
    return functools.reduce(lambda _, __: work(), [0], None)
counted(lambda: importlib.import_module("agentloop"))
sys.path.insert(0, {bench!r})
import provider_overhead as po
loop = asyncio.new_event_loop()
bench = po.AgentloopLoop(os.environ["BENCH_URL"])
for stream in (False, True):
    for _ in range(2):
        loop.run_until_complete(bench.run(stream))
    counted(lambda: loop.run_until_complete(bench.run(stream)))
loop.run_until_complete(bench.aclose())
loop.close()
"""

FIGURES = ("import", "turn_json", "turn_sse")


def measure(src: Path = SRC) -> dict[str, int]:
    """The three figures for the tree ``src``: instructions of the import, and per turn."""
    sys.path.insert(0, str(HERE))
    from provider_overhead import start_server

    server, url = start_server(10)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
            env.update(BENCH_URL=url, PYTHONPYCACHEPREFIX=tmp)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            argv = [sys.executable, "-c", PROGRAM.format(bench=str(HERE))]
            subprocess.run(argv, env=env, check=True, capture_output=True)  # bytecode cached
            out = Path(tmp) / "cg.out"
            valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
            valgrind += ["--collect-atstart=no", "--toggle-collect=functools_reduce"]
            valgrind += ["--dump-after=functools_reduce"]
            subprocess.run([*valgrind, *argv], env=env, check=True, capture_output=True)
            counts = [_total(Path(f"{out}.{n}")) for n in (1, 2, 3)]
    finally:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.close()  # the server stops when its stdin closes
        server.wait(timeout=10)
        server.stdout.close()
    return {"import": counts[0], "turn_json": counts[1] // TURNS, "turn_sse": counts[2] // TURNS}


def _total(path: Path) -> int:
    match = re.search(r"^(?:totals|summary): (\d+)", path.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"callgrind wrote no count in {path}")
    return int(match.group(1))


def python_version() -> str:
    """The interpreter the counts belong to (major.minor)."""
    return ".".join(platform.python_version_tuple()[:2])


def regressions(found: dict[str, int], baseline: dict[str, object]) -> list[str]:
    """Each figure more than ``TOLERANCE`` above its baseline, said in one line."""
    counts = baseline["instructions"]
    assert isinstance(counts, dict)
    lines = []
    for name in FIGURES:
        limit = counts[name] * (1 + TOLERANCE)
        if found[name] > limit:
            share = found[name] / counts[name] - 1
            lines.append(
                f"{name}: {found[name]:,} instructions, {share:+.1%} over {counts[name]:,}"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write the baseline (on purpose)")
    parser.add_argument("--src", type=Path, default=SRC, help="the tree to count (default: this)")
    args = parser.parse_args()
    found = measure(args.src)
    for name in FIGURES:
        print(f"{name}: {found[name]:,}")
    if args.update:
        data = {"python": python_version(), "instructions": found}
        BASELINE.write_text(json.dumps(data, indent=2) + "\n")
        print(f"wrote {BASELINE}")
        return
    baseline = json.loads(BASELINE.read_text())
    failed = regressions(found, baseline)
    for line in failed:
        print(f"REGRESSION {line}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
