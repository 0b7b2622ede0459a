"""Every ```python block of the user docs runs, so the docs cannot rot.

Blocks run in order, each page in one fresh namespace (a later block may use an earlier one's
names). A block with top-level ``await`` runs inside ``asyncio.run``. Blocks that are not meant
to run are fenced as ``text`` instead.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "README.md",
    "docs/soft-and-hard-errors.md",
    "docs/errors.md",
    "docs/tools.md",
    "docs/engine.md",
    "docs/persistence.md",
]
FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY")


def python_blocks(page: str) -> list[tuple[int, str]]:
    """(line number, source) of every ```python block of ``page``."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in FENCE.finditer(text)]


def run_block(source: str, filename: str, namespace: dict[str, Any]) -> None:
    """Execute one block; top-level ``await`` makes it a coroutine run by ``asyncio.run``."""
    code = compile(
        source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, namespace))
    else:
        exec(code, namespace)


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run(
    page: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # scratch dirs land in tmp_path
    blocks = python_blocks(page)
    assert blocks, f"{page} has no python blocks"
    module = types.ModuleType(f"docs_{Path(page).stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look it up
    namespace = module.__dict__
    for line, source in blocks:
        run_block(source, f"{page}:{line}", namespace)
    capsys.readouterr()


def test_printed_output_matches_the_page(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The seed-002 example prints exactly what errors.md says it prints."""
    for key in PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    text = (ROOT / "docs/errors.md").read_text(encoding="utf-8")
    source = next(s for _, s in python_blocks("docs/errors.md") if "build_client" in s)
    expected = re.search(re.escape(source) + r"```\n\n```text\n(.*?)```", text, re.DOTALL)
    assert expected is not None
    run_block(source, "errors.md", {"__name__": "docs_errors"})
    assert capsys.readouterr().out == expected.group(1)


def test_every_fence_is_python_or_text() -> None:
    """An untagged fence would silently skip a block: tag it ``python`` or ``text``."""
    for page in PAGES[1:]:
        text = (ROOT / page).read_text(encoding="utf-8")
        openers = re.findall(r"^```(\S*)$", text, re.MULTILINE)[::2]
        assert set(openers) <= {"python", "text"}, (page, openers)
