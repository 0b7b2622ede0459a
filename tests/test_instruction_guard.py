"""The speed guard: instructions of the first line and of a tool turn, against the baseline.

Instructions (valgrind's callgrind ``Ir``), not time: a loaded machine does not move them, so
this fails only on a real regression of more than 10 % (``bench/instruction_guard.py``). Skipped,
with the reason, where valgrind is missing or the baseline was counted on another Python.
Updating the baseline is a decision: ``python bench/instruction_guard.py --update``.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _guard() -> Any:
    """``bench/instruction_guard.py`` (a script, not part of the package)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("instruction_guard")
    finally:
        sys.path.remove(str(BENCH))


def test_instructions_stay_within_ten_percent_of_the_baseline() -> None:
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (apt install valgrind): the speed guard needs it")
    guard = _guard()
    baseline = json.loads(guard.BASELINE.read_text())
    if baseline["python"] != guard.python_version():
        pytest.skip(
            f"the baseline was counted on Python {baseline['python']}, this is "
            f"{guard.python_version()}: python bench/instruction_guard.py --update to count here"
        )
    found = guard.measure()
    assert guard.regressions(found, baseline) == []


def test_a_regression_is_named_with_its_share() -> None:
    guard = _guard()
    baseline: dict[str, object] = {
        "python": "3.11",
        "instructions": {"import": 100, "turn_json": 1000, "turn_sse": 1000},
    }
    assert guard.regressions({"import": 110, "turn_json": 1000, "turn_sse": 900}, baseline) == []
    assert guard.regressions({"import": 100, "turn_json": 1200, "turn_sse": 1000}, baseline) == [
        "turn_json: 1,200 instructions, +20.0% over 1,000"
    ]
