"""One framework, one wire mode, in a process of its own: the samples of one round.

``run.py`` starts this script once per (round, mode, framework), so a framework's imports never
weigh on another's garbage collections and each process's memory starts alike. It builds the
framework's driver (``drivers.py``) once, runs one untimed conversation (lazy imports done,
first connection open), then times:

- ``n1``: ``--conversations`` conversations one after another;
- ``many`` (when ``--many`` > 0): that many conversations at once (``asyncio.gather``), the
  memory sample too: resident set size before the batch (``/proc/self/statm``) and the process's
  peak resident set during it (``ru_maxrss``; nothing before it ran more than one conversation
  at a time, so the peak is the batch's);
- ``mid``: ``--mid`` conversations at once, after ``many`` (so the connection pool is already
  open) or after one untimed batch of ``--mid`` when ``many`` is off.

Each sample records wall seconds, this process's CPU seconds (``time.process_time``), the fake
server's CPU seconds over the same span (``/proc/PID/task/*/schedstat``: nanoseconds, every
thread of the server process) and the model calls the driver reported, which must be K + 1 a
conversation. The result is one JSON object on stdout; an error is reported in it, not raised,
so one framework's failure is a cell of the table, not a lost run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import glob
import json
import os
import resource
import sys
import time
import traceback
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from drivers import DRIVERS


def server_cpu(pid: int) -> float:
    """CPU seconds the server process has used so far (all its threads)."""
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        with open(path) as handle:
            total += int(handle.read().split()[0])
    return total / 1e9


def rss_kib() -> float:
    """This process's resident set size now, KiB."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1024


async def sample(driver: Any, stream: bool, runs: int, at_once: int, pid: int) -> dict[str, Any]:
    """Time ``runs`` conversations, ``at_once`` of them concurrently per batch."""
    gc.collect()
    turns = 0
    server0, cpu0, wall0 = server_cpu(pid), time.process_time(), time.perf_counter()
    for _ in range(max(1, runs // at_once)):
        turns += sum(await asyncio.gather(*(driver.run(stream) for _ in range(at_once))))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {
        "runs": max(1, runs // at_once) * at_once,
        "concurrency": at_once,
        "turns": turns,
        "wall_s": wall,
        "cpu_s": cpu,
        "server_cpu_s": server_cpu(pid) - server0,
    }


async def _many(driver: Any, stream: bool, args: argparse.Namespace) -> dict[str, Any]:
    """The N = ``--many`` batch with its memory: resident set before, the peak during it."""
    gc.collect()
    before = rss_kib()
    many = await sample(driver, stream, args.many, args.many, args.server_pid)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {**many, "rss_before_kib": before, "rss_peak_kib": float(peak)}


async def _cell(work: Any, expected: int) -> dict[str, Any]:
    """One sample, or the error that ended it (a framework's failure is a cell of the table)."""
    try:
        cell: dict[str, Any] = await work
    except Exception as error:
        traceback.print_exc()
        return {"error": f"{type(error).__name__}: {error}"}
    if cell["turns"] != cell["runs"] * expected:
        return {
            "error": f"{cell['turns']} model calls in {cell['runs']} runs, not {expected} a run"
        }
    return cell


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The samples of one round for one framework and mode."""
    stream, expected, pid = args.mode == "sse", args.turns + 1, args.server_pid
    driver = DRIVERS[args.framework](args.url)
    found: dict[str, Any] = {}
    try:
        await driver.run(stream)  # untimed: lazy imports, the first connection
        found["n1"] = await _cell(sample(driver, stream, args.conversations, 1, pid), expected)
        if args.many:
            found["many"] = await _cell(_many(driver, stream, args), expected)
        if "error" in found.get("many", {"error": "not run"}):
            await _cell(sample(driver, stream, args.mid, args.mid, pid), expected)  # opens the pool
        found["mid"] = await _cell(sample(driver, stream, args.mid, args.mid, pid), expected)
    finally:
        await driver.aclose()
    return found


def main() -> None:
    """Parse the cell, measure it, print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", required=True, choices=list(DRIVERS))
    parser.add_argument("--mode", required=True, choices=["json", "sse"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--turns", type=int, default=10, help="K, the server's tool turns")
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--mid", type=int, default=100)
    parser.add_argument("--many", type=int, default=0)
    args = parser.parse_args()
    result: dict[str, Any] = {"framework": args.framework, "mode": args.mode}
    try:
        result["samples"] = asyncio.run(measure(args))
    except Exception as error:  # one framework's failure is a cell of the table
        result["error"] = f"{type(error).__name__}: {error}"
        traceback.print_exc()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
