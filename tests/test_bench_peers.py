"""The peers' comparison (``bench/peers/``): its pure parts, its pins, and the published table.

No peer runs here (they live in ``bench/peers/.venv``, not in the project's venv): this checks
that the table renders from a results file as documented (ratios against raw aiohttp, "no CLI",
failures named), that ``docs/benchmarks.md`` holds exactly what the committed results render to,
and that the bench-only requirements pin exact versions and stay out of agentloop's own.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "bench" / "peers"


def _report() -> Any:
    """``bench/peers/report.py`` (a script's module, not part of the package)."""
    sys.path.insert(0, str(PEERS))
    try:
        return importlib.import_module("report")
    finally:
        sys.path.remove(str(PEERS))


def _cell(turns: int, wall: float, cpu: float, server: float, n: int) -> dict[str, Any]:
    found = {"runs": n, "concurrency": n, "turns": turns, "wall_s": wall, "cpu_s": cpu}
    return {**found, "server_cpu_s": server}


def _results() -> dict[str, Any]:
    raw = {"n1": _cell(110, 0.11, 0.033, 0.044, 1), "mid": _cell(1100, 0.55, 0.33, 0.22, 100)}
    memory = {"rss_before_kib": 1000.0, "rss_peak_kib": 21000.0}
    raw["many"] = {**_cell(11000, 5.0, 3.3, 2.2, 1000), **memory}
    ours = {"n1": _cell(110, 0.154, 0.066, 0.044, 1), "mid": _cell(1100, 0.99, 0.66, 0.22, 100)}
    samples = [
        {"framework": "raw aiohttp", "mode": "json", "samples": raw, "round": 0},
        {"framework": "agentloop", "mode": "json", "samples": ours, "round": 0},
        {"framework": "agentloop", "mode": "sse", "error": "ValueError: no SSE", "round": 0},
    ]
    return {
        "meta": {"turns": 10},
        "frameworks": ["raw aiohttp", "agentloop"],
        "samples": samples,
        "imports": {"bare": {"wall_ms": [20.0, 19.0]}, "raw aiohttp": {"wall_ms": [120.0, 99.0]}},
        "clis": {
            "raw aiohttp": {"none": "no CLI"},
            "agentloop": {"command": "agentloop --help", "ms": [250.0, 240.0]},
        },
    }


def test_the_table_renders_per_turn_figures_against_raw_aiohttp() -> None:
    table = _report().render(_results())
    # (0.11 - 0.044) s / 110 calls = 0.60 ms; (0.154 - 0.044) / 110 = 1.00 ms: 1.7x
    assert "| raw aiohttp | 0.60 / 0.30 (1.0x) | 0.30 / 0.30 (1.0x) | not measured |" in table
    assert "| agentloop | 1.00 / 0.60 (1.7x) | 0.70 / 0.60 (2.3x) | failed | failed |" in table


def test_the_table_says_what_a_framework_could_not_do() -> None:
    table = _report().render(_results())
    assert "| raw aiohttp | 9.1 | 182 | 200 (100%) | 20 | 80 | no CLI |" in table
    assert "| agentloop | 6.5 | 101 | not measured | not measured | not measured | 240 " in table
    assert "- agentloop: sse: ValueError: no SSE" in table


def test_a_driver_whose_conversation_differs_is_named() -> None:
    report = _report()
    json_ = {"calls": 4, "requests": 4, "stream": [False], "tools": [1], "roles": ["user"]}
    sse = {**json_, "stream": [True]}
    wire = {"raw aiohttp": {"json": json_, "sse": sse}, "agentloop": {"json": json_, "sse": sse}}
    assert report.wire_differences(wire) == {}
    wire["agentloop"] = {"json": json_, "sse": json_}  # asked for no stream in SSE mode
    assert list(report.wire_differences(wire)) == ["agentloop"]
    assert report.wire_differences(wire)["agentloop"].startswith("sse: sent")


def test_splice_replaces_only_the_marked_part() -> None:
    report = _report()
    text = f"before\n{report.BEGIN}\nold\n{report.END}\nafter\n"
    assert report.splice(text, "new\n") == f"before\n{report.BEGIN}\nnew\n{report.END}\nafter\n"


def test_the_published_table_is_what_the_committed_results_render() -> None:
    report = _report()
    results = json.loads((PEERS / "results.json").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert report.splice(page, report.block(results, "img/peers.png")) == page
    assert (ROOT / "docs" / "img" / "peers.png").stat().st_size > 10_000


def test_the_requirements_pin_exact_versions_and_stay_out_of_the_package() -> None:
    lines = (PEERS / "requirements.txt").read_text(encoding="utf-8").splitlines()
    pins = [line for line in lines if line.strip() and not line.startswith("#")]
    exact = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==\d[0-9A-Za-z.+-]*$")
    assert [pin for pin in pins if not exact.match(pin)] == []
    names = {re.split(r"[\[=]", pin)[0].lower() for pin in pins}
    assert {"openai", "pydantic-ai-slim", "openai-agents", "langgraph", "langchain-openai"} <= names
    assert "matplotlib" in names and "agentloop" not in names
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"].values()
    declared = [*project["dependencies"], *(d for extra in extras for d in extra)]
    peers = {"openai", "pydantic-ai-slim", "pydantic-ai", "openai-agents", "langgraph"}
    assert [d for d in declared if re.split(r"[\[<>=~! ]", d)[0].lower() in peers] == []
