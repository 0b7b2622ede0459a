"""``agentloop memory search``: the items of one namespace, as ``[<id>] <text>`` lines."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentloop.cli import main
from agentloop.memory import SQLiteMemoryStore
from agentloop.store import SQLiteStore


def _fill(path: Path) -> tuple[str, str]:
    async def fill() -> tuple[str, str]:
        store = SQLiteMemoryStore(path)
        tea = await store.put(("user", "ada"), "Ada prefers green tea")
        await store.put(("user", "ada", "work"), "a child namespace's tea")
        cat = await store.put(("user", "ada"), "Ada's cat \x1b[31mPixel")
        await store.aclose()
        return tea.id, cat.id

    return asyncio.run(fill())


def test_memory_search_prints_one_line_per_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agentloop.db"
    SQLiteStore(path).close()  # the memory table lives beside the runs tables
    tea, cat = _fill(path)
    argv = ["memory", "search", "tea", "--namespace", "user/ada", "--store", str(path)]
    assert main(argv) == 0
    assert capsys.readouterr().out == f"[{tea}] Ada prefers green tea\n"
    assert main([*argv[:2], "", *argv[3:], "-k", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"[{cat}] Ada's cat ") and "\x1b" not in out  # never a raw escape
    assert main([*argv[:2], "bicycle", *argv[3:]]) == 0
    assert capsys.readouterr().out == "no memories match 'bicycle'\n"


def test_memory_search_without_a_store_or_with_a_bad_namespace_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.db"
    assert main(["memory", "search", "x", "--namespace", "a", "--store", str(missing)]) == 2
    assert "no store at" in capsys.readouterr().err and not missing.exists()
    path = tmp_path / "m.db"
    _fill(path)
    assert main(["memory", "search", "x", "--namespace", "a//b", "--store", str(path)]) == 2
    assert "namespace" in capsys.readouterr().err
