"""mypy --strict infers ``run.output`` from ``output_type`` (SPEC 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

CASES = Path(__file__).parent / "typing" / "output_types.py"


def test_mypy_strict_infers_the_output_type(tmp_path: Path) -> None:
    stdout, stderr, status = mypy_api.run(
        ["--strict", "--cache-dir", str(tmp_path), "--no-incremental", str(CASES)]
    )
    assert status == 0, stdout + stderr


def test_a_wrong_expectation_fails_the_check(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from typing_extensions import assert_type\n"
        "from agentloop import Agent\n"
        "from agentloop.testing import ScriptedModel\n"
        "async def f() -> None:\n"
        "    run = await Agent(ScriptedModel([]), output_type=int).run('x')\n"
        "    assert_type(run.output, str | None)\n"
    )
    stdout, _, status = mypy_api.run(["--strict", "--cache-dir", str(tmp_path), str(wrong)])
    assert status == 1 and "[assert-type]" in stdout
