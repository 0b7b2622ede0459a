"""docs/toolsets.md prints what it says it prints (every block also runs in tests/test_docs.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "toolsets.md").read_text(encoding="utf-8")
PAIRS = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", PAGE, re.DOTALL)


@pytest.mark.parametrize(("source", "expected"), PAIRS, ids=[str(i) for i in range(len(PAIRS))])
def test_a_block_prints_the_text_below_it(source: str, expected: str, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected


def test_every_block_has_its_output() -> None:
    assert len(PAIRS) == PAGE.count("```python") == 5
