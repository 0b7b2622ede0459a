"""The goals of SPEC 23 through ``bench/evals.py`` itself: 1,000 cases on a ``FunctionModel``
agent all evaluate (their time, under 5 s, is the bench's to report: never a timed test), and a
1 MiB image adds under 200 bytes to a cassette (bytes, which no load moves)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "evals.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_evals", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_thousand_cases_evaluate_and_pass() -> None:
    _seconds, pass_rate = bench().evaluation_seconds()
    assert pass_rate == 1.0


def test_a_mebibyte_image_adds_under_200_bytes_to_a_cassette() -> None:
    assert bench().cassette_bytes() < 200
