"""Issue 39, goal 4: what each SPEC 22-28 feature costs a run that does not use it.

``instruction_guard.py`` gives the whole turn in machine instructions, before SPEC 22-28 and
now; this script splits what a plain run still executes for each feature. It runs
``provider_overhead.py``'s ``agentloop`` conversation (K = 10 tool turns and the answer, a
session of one agent, default ``RunConfig``, its fake server in a process of its own), warms
up twice, then traces one conversation JSON and one SSE with ``sys.settrace`` and
``f_trace_opcodes``: every Python bytecode executed in agentloop's modules, by line. A line
belongs to a feature when it is in the feature's own modules or names it (the patterns below);
the table gives each feature's bytecodes per turn, their share of the turn's agentloop
bytecodes, and an upper bound in instructions: bytecodes x the turn's instructions per
agentloop bytecode (``--per-bytecode``, default from the guard's baseline; a feature's checks
are attribute reads and compares, cheaper than the average bytecode, which also carries C work
such as JSON parsing). It also lists the feature modules a plain run imported at all.

    python bench/feature_cost.py                 # the table
    python bench/feature_cost.py --lines         # and each feature's lines with their counts
    PYTHONPATH=/tmp/old/src python bench/feature_cost.py --functions /tmp/old.json
    python bench/feature_cost.py --against /tmp/old.json   # the functions that changed most

A benchmark, not a test; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import linecache
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
TURNS = 11  # K = 10 tool turns and the answer

FEATURES: dict[str, tuple[tuple[str, ...], str]] = {
    # feature: (its own modules, as path fragments; a regex its lines elsewhere match)
    "toolsets (22)": (("/toolsets/", "engine/toolsets.py"), r"toolset"),
    "tool search (22)": (("engine/native_search.py",), r"search|deferred"),
    "memory (27)": (("/memory/", "engine/remembering.py"), r"memory|remember|recall"),
    "governor (25)": (("/fleet/",), r"governor"),
    "provider tools (24)": (
        ("engine/provider_tools.py", "agentloop/provider_tools.py", "builtin_tools.py"),
        r"provider_tool|server_tool|builtin",
    ),
    "handoffs (26)": (("engine/handoffs.py", "agentloop/handoffs.py"), r"handoff|\bview\b"),
    "evals, cassettes (23)": (("/evals/", "/cassettes/"), r"cassette"),
    "batch (25)": (("agentloop/batch.py", "batching.py"), r"batch|waiting"),
    "append-only (28)": (("engine/appendonly.py",), r"append_only|appendonly|AppendOnly"),
}


class Opcodes:
    """Counts the bytecodes executed in files under ``root``, by (file, line) and function.

    Records' generated ``__init__`` (file ``<string>``) count too, by function only.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.lines: Counter[tuple[str, int]] = Counter()
        self.functions: Counter[str] = Counter()

    def _local(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "opcode":
            code = frame.f_code
            where = code.co_filename.rsplit("agentloop/", 1)[-1]
            self.functions[f"{where}:{code.co_qualname}"] += 1
            if where != "<string>":
                self.lines[(code.co_filename, frame.f_lineno or 0)] += 1
        return self._local

    def _global(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        name = frame.f_code.co_filename
        if not name.startswith(self.root) and name != "<string>":
            return None
        frame.f_trace_opcodes = True
        return self._local

    def __enter__(self) -> Opcodes:
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)


def feature_of(path: str, line: int) -> str | None:
    """The feature a line belongs to, or None."""
    text = linecache.getline(path, line)
    for name, (modules, pattern) in FEATURES.items():
        if any(part in path for part in modules) or re.search(pattern, text):
            return name
    return None


async def traced(url: str, stream: bool, root: str) -> Opcodes:
    """One conversation traced, after two warm-ups."""
    from provider_overhead import AgentloopLoop

    loop = AgentloopLoop(url)
    try:
        for _ in range(2):
            await loop.run(stream)
        with Opcodes(root) as counted:
            turns = await loop.run(stream)
        assert turns == TURNS, turns
    finally:
        await loop.aclose()
    return counted


def main() -> None:
    """Print the table (and, with ``--lines``, the lines)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", action="store_true", help="each feature's lines and counts")
    parser.add_argument("--per-bytecode", type=float, default=0.0, help="instructions/bytecode")
    parser.add_argument("--functions", type=Path, help="write bytecodes/turn by function (JSON)")
    parser.add_argument("--against", type=Path, help="a --functions file: the largest changes")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from provider_overhead import start_server

    import agentloop

    root = str(Path(agentloop.__file__).parent)
    server, url = start_server(10)
    try:
        counts = {mode: asyncio.run(traced(url, mode == "SSE", root)) for mode in ("JSON", "SSE")}
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)
    per_bytecode = args.per_bytecode or _per_bytecode(counts["JSON"])
    report(counts, per_bytecode, lines=args.lines)
    functions = {name: n / TURNS for name, n in counts["JSON"].functions.items()}
    if args.functions:
        args.functions.write_text(json.dumps(functions, indent=0, sort_keys=True))
    if args.against:
        compare(json.loads(args.against.read_text()), functions)


def compare(before: dict[str, float], after: dict[str, float], top: int = 25) -> None:
    """The functions whose bytecodes per turn (JSON) changed most, and the totals."""
    print(f"\nbytecodes/turn, JSON, records' __init__ included: {sum(before.values()):,.0f} "
          f"before, {sum(after.values()):,.0f} after")  # fmt: skip
    print("\n| function | before | after | change |\n|---|---:|---:|---:|")
    changed = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in before.keys() | after.keys()}
    for name, delta in sorted(changed.items(), key=lambda kv: -abs(kv[1]))[:top]:
        print(f"| `{name}` | {before.get(name, 0.0):.1f} | {after.get(name, 0.0):.1f} | "
              f"{delta:+.1f} |")  # fmt: skip


def _per_bytecode(counted: Opcodes) -> float:
    """The guard baseline's JSON instructions per turn over this turn's agentloop bytecodes."""
    baseline = json.loads((HERE / "instruction_baseline.json").read_text())
    return float(baseline["instructions"]["turn_json"]) / (sum(counted.lines.values()) / TURNS)


def report(counts: dict[str, Opcodes], per_bytecode: float, *, lines: bool) -> None:
    """The table, the modules loaded, and the lines when asked."""
    by_feature = {
        mode: Counter[str | None]({None: 0}) for mode in counts
    }  # mode -> feature -> bytecodes
    for mode, counted in counts.items():
        for (path, line), n in counted.lines.items():
            by_feature[mode][feature_of(path, line)] += n
    totals = {mode: sum(c.lines.values()) / TURNS for mode, c in counts.items()}
    print(f"agentloop bytecodes per turn: JSON {totals['JSON']:,.0f}, SSE {totals['SSE']:,.0f};")
    print(f"upper bound: {per_bytecode:.0f} instructions per bytecode\n")
    print(
        "| feature | bytecodes/turn, JSON | SSE | share of the turn | instructions/turn, at most |"
    )
    print("|---|---:|---:|---:|---:|")
    for name in FEATURES:
        json_n = by_feature["JSON"][name] / TURNS
        sse_n = by_feature["SSE"][name] / TURNS
        share = json_n / totals["JSON"]
        print(
            f"| {name} | {json_n:.1f} | {sse_n:.1f} | {share:.2%} | {json_n * per_bytecode:,.0f} |"
        )
    loaded = sorted(m for m in sys.modules if m.startswith("agentloop.") and _feature_module(m))
    print(f"\nfeature modules a plain run imported: {', '.join(loaded) or 'none'}")
    if lines:
        for name in FEATURES:
            print(f"\n{name}:")
            mine = [
                (n, path, line)
                for (path, line), n in counts["JSON"].lines.items()
                if feature_of(path, line) == name
            ]
            for n, path, line in sorted(mine, reverse=True):
                where = path.split("agentloop/", 1)[-1]
                text = linecache.getline(path, line).strip()
                print(f"  {n / TURNS:6.1f}  {where}:{line}  {text[:90]}")


def _feature_module(module: str) -> bool:
    path = module.replace(".", "/")
    return any(
        part.strip("/").removesuffix(".py") in path
        for modules, _ in FEATURES.values()
        for part in modules
    )


if __name__ == "__main__":
    main()
