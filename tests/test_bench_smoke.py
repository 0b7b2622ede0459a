"""Every benchmark in ``bench/`` still runs: each script once, at its smallest size.

Benchmarks are scripts no test imported, so a signature change in the package broke two of
them (``ui_protocols.py``, ``ui_vercel.py``) without a red test. Each runs here in a fresh
interpreter on this tree's ``src`` with the arguments below (seconds, not minutes) and must
exit 0 having printed something; the figures are not checked (a shared machine moves them).
A new script in ``bench/`` fails ``test_every_bench_is_smoke_run_or_says_why`` until it is
listed here or in ``NOT_RUN`` with the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"

SMOKE: dict[str, list[str]] = {
    "a2a_roundtrip.py": ["3"],
    "cache_share.py": ["--turns", "2"],
    "concurrency.py": ["--runs", "20", "--rounds", "1", "--repeats", "1"],
    "durable_overhead.py": ["--runs", "2", "--turns", "1"],
    "durable_pauses.py": ["--paused", "5", "--new", "2", "--work", "2"],
    "engine_turns.py": ["--repeats", "1"],
    "evals.py": [],
    "gc_pressure.py": ["--runs", "50", "--batches", "1"],
    "import_time.py": ["--repeats", "1"],
    "mcp_overhead.py": ["--calls", "5", "--rounds", "1"],
    "memory_search.py": ["--items", "50"],
    "partial_output.py": ["--repeats", "1"],
    "provider_overhead.py": ["--turns", "2", "--conversations", "2", "--repeats", "1"],
    "safety_pipeline.py": [],
    "sessions.py": ["-n", "10", "--repeats", "1"],
    "soak.py": ["--runs", "20", "--concurrency", "5", "--no-tracemalloc"],
    "store_scale.py": ["-n", "10", "--runs", "100", "-k", "1", "--repeats", "1"],
    "stream_overhead.py": ["--engine-only"],
    "toolsets.py": ["--tools", "10", "--search-tools", "10", "--rounds", "1"],
    "ui_protocols.py": ["--quick"],
    "ui_vercel.py": ["--quick"],
}
"""Each script's smallest run."""

NOT_RUN = {  # bench/peers/ runs in its own venv: tests/test_bench_peers.py checks its report
    "engine_instructions.py": "callgrind: minutes a run",
    "instructions.py": "callgrind: minutes a run",
    "instruction_guard.py": "callgrind; tests/test_instruction_guard.py runs it",
    "feature_cost.py": "traces every bytecode of ten turns: a minute",
    "fleet_governor.py": "needs PostgreSQL: tests/fleet/test_bench_fleet_smoke.py runs it",
}
"""Scripts this file leaves out, and where they are exercised instead."""


def run_bench(script: str, args: list[str], timeout: float = 240) -> str:
    """``bench/<script> args`` in a fresh interpreter on this tree's ``src``; its stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, f"bench/{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"bench/{script} printed nothing"
    return done.stdout


def test_every_bench_is_smoke_run_or_says_why() -> None:
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    assert scripts - SMOKE.keys() - NOT_RUN.keys() == set(), "list the new bench script here"
    assert (SMOKE.keys() | NOT_RUN.keys()) - scripts == set(), "a listed script is gone"


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_bench_runs(script: str) -> None:
    run_bench(script, SMOKE[script])
