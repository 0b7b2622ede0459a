"""``bench/fleet_governor.py`` still runs: two processes on one PostgreSQL governor, briefly.

The other benchmarks' smoke runs are ``tests/test_bench_smoke.py``; this one needs the fleet
suite's throwaway PostgreSQL. The figures are not checked (a shared machine moves them).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent


def _smoke() -> Any:
    spec = importlib.util.spec_from_file_location(
        "agentloop_bench_smoke", ROOT / "tests" / "test_bench_smoke.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fleet_bench_runs(postgres_governor_url: str) -> None:
    args = ["--postgres", postgres_governor_url, "--processes", "2", "--rpm", "120"]
    out = _smoke().run_bench("fleet_governor.py", [*args, "--window", "2", "--seconds", "2"])
    assert "2 processes, rpm=120" in out
