"""Reading a store never writes to it (issue 25, item 14): ``agentloop runs --store OTHER.db``.

``SQLiteStore(path, read_only=True)`` (what ``agentloop runs`` opens) creates no table and
switches no journal mode: a database that is not ours is refused and left byte for byte as it
was, and our own store is listed without a write.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from agentloop.cli import main
from agentloop.errors import MemoryBackendError
from agentloop.run import Run
from agentloop.store import SQLiteStore


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tables_and_mode(path: Path) -> tuple[list[str], str]:
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    return names, mode


@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.close()
    return path


def test_runs_on_a_database_that_is_not_ours_changes_nothing(
    foreign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = digest(foreign)
    assert main(["runs", "--store", str(foreign)]) != 0
    assert "not an agentloop store" in capsys.readouterr().err
    assert main(["runs", "show", "abc", "--store", str(foreign)]) != 0
    assert digest(foreign) == before
    assert tables_and_mode(foreign) == (["notes"], "delete")
    assert sorted(p.name for p in foreign.parent.iterdir()) == ["other.db"]


def test_a_read_only_store_refuses_writes(foreign: Path, tmp_path: Path) -> None:
    with pytest.raises(MemoryBackendError, match="not an agentloop store"):
        SQLiteStore(foreign, read_only=True)
    ours = tmp_path / "ours.db"
    SQLiteStore(ours).close()
    store = SQLiteStore(ours, read_only=True)
    try:
        assert store.load_runs() == []
        with pytest.raises(MemoryBackendError, match="readonly"):
            store.begin_run("s", Run(id="r1", input="x"))
    finally:
        store.close()


def test_runs_lists_our_store_without_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = tmp_path / "ours.db"
    with SQLiteStore(ours) as store:
        store.begin_run("s", Run(id="r1", input="listed"))
    before = digest(ours)
    assert main(["runs", "--store", str(ours)]) == 0
    assert "r1" in capsys.readouterr().out
    assert digest(ours) == before
