"""The goals of SPEC 23, measured by ``bench/evals.py`` itself: 1,000 cases on a
``FunctionModel`` agent in under 5 s, a 1 MiB image adding under 200 bytes to a cassette."""

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


def test_a_thousand_cases_in_under_five_seconds() -> None:
    seconds, pass_rate = bench().evaluation_seconds()
    assert pass_rate == 1.0 and seconds < 5.0


def test_a_mebibyte_image_adds_under_200_bytes_to_a_cassette() -> None:
    assert bench().cassette_bytes() < 200
