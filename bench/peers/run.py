"""agentloop against its peers on one fake server: one command for the figures, table and chart.

``make bench-peers`` builds ``bench/peers/.venv`` from ``bench/peers/requirements.txt`` (exact
versions; agentloop itself from this tree) and runs this script in it. The script:

1. starts ``bench/provider_overhead.py``'s fake OpenAI Chat Completions server (JSON, or SSE
   with tool-call deltas when asked) in a process of its own on 127.0.0.1, so its CPU can be
   read and subtracted;
2. runs ``--rounds`` rounds; in each, every (mode, framework) pair is one ``worker.py`` process
   (the frameworks' order turns by one each round, so load hits all alike) doing the same
   K = 10 tool-turn conversation: N = 1, N = ``--mid`` and, in the first ``--many-rounds``
   rounds, N = ``--many`` at once with the memory sample (JSON; SSE too with ``--many-sse``);
3. times each framework's first import line and its CLI's first output in fresh interpreters,
   interleaved, bytecode cached;
4. writes the results file (``--out``), the chart (``--chart``) and the tables, with the
   machine, its load and the versions, into ``docs/benchmarks.md`` between the peers' markers.

    bench/peers/.venv/bin/python bench/peers/run.py --quick       # 3 minutes or so: development
    bench/peers/.venv/bin/python bench/peers/run.py               # the published run
    bench/peers/.venv/bin/python bench/peers/run.py --report-only # tables and chart from --out

A benchmark, not a test. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import report  # noqa: E402
from drivers import CLIS, FRAMEWORKS, IMPORTS  # noqa: E402
from provider_overhead import start_server  # noqa: E402

PACKAGES = {
    "agentloop": "agentloop",
    "aiohttp": "aiohttp",
    "openai SDK": "openai",
    "httpx": "httpx",
    "pydantic": "pydantic",
    "pydantic-ai": "pydantic-ai-slim",
    "openai-agents": "openai-agents",
    "LangGraph": "langgraph",
    "langchain-openai": "langchain-openai",
    "langchain-core": "langchain-core",
}


def machine() -> dict[str, Any]:
    """CPUs, CPU model, Python, the commit of this tree and the versions installed here."""
    cpu = "unknown"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    git = ["git", "-C", ROOT]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True, text=True)
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit.stdout.strip() or "unknown",
        "dirty": bool(dirty.stdout.strip()),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "versions": {name: importlib.metadata.version(dist) for name, dist in PACKAGES.items()},
    }


def worker(
    args: argparse.Namespace, framework: str, mode: str, url: str, pid: int, many: int
) -> dict[str, Any]:
    """One worker process's result (its error, if it failed, is in the result)."""
    command = [sys.executable, os.path.join(HERE, "worker.py"), "--framework", framework]
    command += ["--mode", mode, "--url", url, "--server-pid", str(pid), "--turns", str(args.turns)]
    command += [
        "--conversations",
        str(args.conversations),
        "--mid",
        str(args.mid),
        "--many",
        str(many),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {
            "framework": framework,
            "mode": mode,
            "error": f"exit {done.returncode}: {done.stderr[-500:]}",
        }
    return json.loads(lines[-1])


def rounds(args: argparse.Namespace, url: str, pid: int, load: list[float]) -> list[dict[str, Any]]:
    """Every round's samples; the frameworks' order turns by one each round."""
    samples = []
    for number in range(args.rounds):
        order = (
            args.frameworks[number % len(args.frameworks) :]
            + args.frameworks[: number % len(args.frameworks)]
        )
        for mode in args.modes:
            for framework in order:
                if framework in args.skip:
                    why = (
                        f"not timed: its conversation differs on the wire ({args.skip[framework]})"
                    )
                    samples.append({"framework": framework, "mode": mode, "error": why})
                    continue
                many = (
                    args.many
                    if number < args.many_rounds and (mode == "json" or args.many_sse)
                    else 0
                )
                load.append(os.getloadavg()[0])
                started = time.perf_counter()
                result = worker(args, framework, mode, url, pid, many)
                result["round"] = number
                samples.append(result)
                took = time.perf_counter() - started
                status = result.get("error", "ok")
                where = f"round {number + 1}/{args.rounds} {mode:4} {framework:14}"
                print(f"{where} {took:6.1f} s  {status}", flush=True)
    return samples


def _env() -> dict[str, str]:
    """The environment of a timed start: bytecode written and read (as an installed package)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def first_output_ms(command: list[str], env: dict[str, str]) -> float:
    """Wall ms from starting ``command`` to its first byte on stdout (then it runs to its end)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdout is not None
    first = process.stdout.read(1)
    took = (time.perf_counter() - started) * 1e3
    process.stdout.read()
    if process.wait() or not first:
        raise RuntimeError(f"{command} printed nothing or failed")
    return took


def starts(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Import lines and CLIs, each in fresh processes, interleaved, once untimed first."""
    env, python, bindir = _env(), sys.executable, os.path.dirname(sys.executable)
    imports: dict[str, Any] = {"bare": {"statement": "pass", "wall_ms": []}}
    imports.update({f: {"statement": IMPORTS[f], "wall_ms": []} for f in args.frameworks})
    clis: dict[str, Any] = {"bare": {"command": "python -c 'print(1)'", "ms": []}}
    for framework in args.frameworks:
        cli = CLIS[framework]
        clis[framework] = (
            {"none": "no CLI"}
            if cli is None
            else {"command": f"{cli[0]} {' '.join(cli[1])}", "ms": [], "package": cli[2]}
        )
    jobs: list[tuple[dict[str, Any], str, list[str]]] = []
    for entry in imports.values():
        jobs.append((entry, "wall_ms", [python, "-c", entry["statement"] + "; print(1)"]))
    for name, entry in clis.items():
        if "ms" in entry:
            argv = (
                [python, "-c", "print(1)"]
                if name == "bare"
                else [os.path.join(bindir, CLIS[name][0]), *CLIS[name][1]]
            )
            jobs.append((entry, "ms", argv))
    for _, _, argv in jobs:
        first_output_ms(argv, env)  # untimed: writes the bytecode cache
    for _ in range(args.start_repeats):
        for entry, key, argv in jobs:
            entry[key].append(first_output_ms(argv, env))
    return imports, clis


def publish(results: dict[str, Any], args: argparse.Namespace) -> None:
    """Chart and tables from ``results``; the tables go into the doc between the markers."""
    report.chart(results, args.chart)
    relative = os.path.relpath(args.chart, os.path.dirname(args.doc or args.chart))
    block = report.block(results, relative)
    print("\n" + block)
    if args.doc is None:
        print(f"wrote {args.chart} (a quick run leaves the docs alone)")
        return
    with open(args.doc, encoding="utf-8") as handle:
        text = handle.read()
    with open(args.doc, "w", encoding="utf-8") as handle:
        handle.write(report.splice(text, block))
    print(f"wrote {args.chart} and the tables into {args.doc}")


def check_wire(args: argparse.Namespace) -> dict[str, Any]:
    """``wire.py``'s report; frameworks whose conversation differs are dropped from the timing."""
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "wire.py")], capture_output=True, text=True, check=True
    )
    wire: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    args.skip = report.wire_differences(wire)
    for framework, why in args.skip.items():
        print(f"{framework}: not timed, its conversation differs on the wire: {why}")
    return wire


def wait_for_quiet(args: argparse.Namespace) -> float:
    """Wait (up to ``--wait-max`` s) for the 1-minute load to fall below ``--wait-quiet``."""
    started = time.monotonic()
    while args.wait_quiet and os.getloadavg()[0] >= args.wait_quiet:
        if time.monotonic() - started > args.wait_max:
            print(f"load still {os.getloadavg()[0]:.1f} after {args.wait_max} s: measuring anyway")
            break
        time.sleep(15)
    return time.monotonic() - started


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Check the wire, start the server, run the rounds and the start-up timings."""
    meta = machine()
    wire = check_wire(args)
    meta["waited_s"] = wait_for_quiet(args)
    meta["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load: list[float] = []
    before = list(os.getloadavg())
    process, url = start_server(args.turns)
    try:
        samples = rounds(args, url, process.pid, load)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)
    imports, clis = starts(args)
    meta["load"] = {"before": before, "during": load, "after": list(os.getloadavg())}
    settings = {
        k: getattr(args, k)
        for k in ("turns", "rounds", "conversations", "mid", "many", "many_rounds", "quick")
    }
    meta.update(settings)
    return {
        "meta": meta,
        "frameworks": args.frameworks,
        "wire": wire,
        "samples": samples,
        "imports": imports,
        "clis": clis,
    }


def main() -> None:
    """Parse, measure (or read ``--out`` with ``--report-only``), publish."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small N and one round: development")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=10, help="K, tool turns a conversation")
    parser.add_argument("--conversations", type=int, default=10, help="conversations at N = 1")
    parser.add_argument("--mid", type=int, default=100)
    parser.add_argument("--many", type=int, default=1000)
    parser.add_argument("--many-rounds", type=int, default=1, help="rounds that run N = many")
    parser.add_argument("--many-sse", action="store_true", help="N = many in SSE too")
    parser.add_argument("--start-repeats", type=int, default=7, help="fresh starts per import/CLI")
    parser.add_argument("--modes", nargs="+", default=["json", "sse"], choices=["json", "sse"])
    parser.add_argument("--frameworks", nargs="+", default=FRAMEWORKS, choices=FRAMEWORKS)
    parser.add_argument("--out", default=os.path.join(HERE, "results.json"))
    parser.add_argument("--chart", default=os.path.join(ROOT, "docs", "img", "peers.png"))
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    parser.add_argument("--wait-quiet", type=float, help="first wait for a 1-min load below this")
    parser.add_argument("--wait-max", type=float, default=900, help="seconds --wait-quiet waits")
    parser.add_argument("--report-only", action="store_true", help="tables and chart from --out")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.conversations, args.mid, args.many, args.start_repeats = 1, 3, 10, 50, 3
        # a quick run is for development: its files stay beside the script (gitignored)
        args.out = os.path.join(HERE, "results-quick.json")
        args.chart, args.doc = os.path.join(HERE, "results-quick.png"), None
    if not args.report_only:
        results = measure(args)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)
        print(f"wrote {args.out}")
    with open(args.out, encoding="utf-8") as handle:
        publish(json.load(handle), args)


if __name__ == "__main__":
    main()
