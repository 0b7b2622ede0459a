"""Listing stored runs a page at a time (``page_runs``), on real SQLite and PostgreSQL.

A page is the newest runs first, ``next`` the cursor of the older page; following the cursors
lists every run once, in the order the whole scan does. A filter reads at most ``scan``
records a page; a damaged record is one entry of its page, never the end of the listing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from agentloop.errors import InvalidInput, MemoryBackendError, ProviderUnavailable
from agentloop.store import PostgresStore, RunPage, SQLiteStore, StoredRun

_CONTRACT = Path(__file__).with_name("test_store_contract.py")
_spec = importlib.util.spec_from_file_location("_store_contract_listing", _CONTRACT)
assert _spec is not None and _spec.loader is not None
_contract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_contract)
postgres_dsn = _contract.postgres_dsn  # the same throwaway PostgreSQL server
open_store = _contract.open_store
store = _contract.store
make_run, tool_turn = _contract.make_run, _contract.tool_turn

Backend = SQLiteStore | PostgresStore


def fill(store: Backend, count: int, *, sessions: int = 2) -> list[str]:
    """``count`` finished runs over ``sessions`` sessions; every third one failed."""
    ids = []
    for i in range(count):
        stop = ProviderUnavailable("502 from upstream") if i % 3 == 2 else None
        run = make_run(f"run{i:03d}", stop, turns=1)
        store.begin_run(f"s{i % sessions}", run)
        store.finish_runs(f"s{i % sessions}", [run], keep=0, append=[])
        ids.append(run.id)
    return ids


def ids_of(page: RunPage) -> list[str]:
    return [run_id for run_id, _ in page.runs]


def every_page(store: Backend, **kwargs: Any) -> list[RunPage]:
    pages = [store.page_runs(**kwargs)]
    while pages[-1].next is not None:
        pages.append(store.page_runs(before=pages[-1].next, **kwargs))
    return pages


def test_pages_list_every_run_once_newest_first(store: Backend) -> None:
    ids = fill(store, 7)
    pages = every_page(store, limit=3)
    assert [ids_of(p) for p in pages] == [ids[6:3:-1], ids[3:0:-1], ids[:1]]
    assert {p.total for p in pages} == {7}
    whole = [stored for _, stored in store.scan_runs()]
    paged = [stored for p in pages for _, stored in p.runs]
    assert paged == whole[::-1]  # the same runs, read the same way


def test_a_page_that_ends_the_store_has_no_next(store: Backend) -> None:
    ids = fill(store, 3)
    page = store.page_runs(limit=3)
    assert ids_of(page) == ids[::-1] and page.next is None
    assert store.page_runs(limit=5).next is None
    empty = SQLiteStore(":memory:")
    assert empty.page_runs() == RunPage([], 0, None)
    empty.close()


def test_one_sessions_pages(store: Backend) -> None:
    ids = fill(store, 6, sessions=2)
    pages = every_page(store, session_id="s1", limit=2)
    assert [ids_of(p) for p in pages] == [[ids[5], ids[3]], [ids[1]]]
    assert pages[0].total == 3


def test_a_filter_fills_its_page_and_reads_at_most_scan_records(store: Backend) -> None:
    ids = fill(store, 9)

    def failed(found: StoredRun | MemoryBackendError) -> bool:
        return isinstance(found, StoredRun) and found.run.stop_reason is not None

    page = store.page_runs(limit=2, keep=failed)
    assert ids_of(page) == [ids[8], ids[5]] and page.next is not None
    assert ids_of(store.page_runs(limit=2, keep=failed, before=page.next)) == [ids[2]]
    bounded = store.page_runs(limit=2, keep=lambda found: False, scan=1)
    assert bounded.runs == [] and bounded.next is not None  # it goes on from where it stopped
    rest = every_page(store, limit=2, keep=lambda found: False, scan=1)
    assert all(p.runs == [] for p in rest) and rest[-1].next is None


def test_a_run_in_flight_lists_its_turns_and_resumptions(store: Backend) -> None:
    fill(store, 2)
    run = make_run("inflight", turns=0)
    store.begin_run("s0", run)
    for n in range(2):
        turn, messages = tool_turn(n)
        store.save_turn(run.id, n, turn, messages)
    assert isinstance(store, SQLiteStore | PostgresStore)
    with store.transaction("noting a resumption") as tx:
        tx.run("INSERT INTO agentloop_resumptions VALUES (?, ?, ?)", (run.id, 5.0, 1))
    (run_id, listed), *_ = store.page_runs(limit=1).runs
    assert run_id == "inflight" and listed == store.load_run("inflight")
    assert isinstance(listed, StoredRun) and not listed.finished
    assert len(listed.run.turns) == 2 and listed.resumptions == ((5.0, 1),)


def test_a_damaged_record_is_one_entry_of_its_page(store: Backend) -> None:
    ids = fill(store, 3)
    with store.transaction("damaging a record") as tx:
        tx.run("UPDATE agentloop_runs SET record = ? WHERE run_id = ?", ('{"id": 5}', ids[1]))
    page = store.page_runs(limit=3)
    assert ids_of(page) == ids[::-1]
    damaged = page.runs[1][1]
    assert isinstance(damaged, MemoryBackendError) and f"run {ids[1]}" in str(damaged)
    assert isinstance(damaged.__cause__, InvalidInput)
    assert all(isinstance(found, StoredRun) for _, found in (page.runs[0], page.runs[2]))


def test_a_page_needs_room_for_a_run(store: Backend) -> None:
    with pytest.raises(InvalidInput, match="limit must be at least 1"):
        store.page_runs(limit=0)


def test_agentloop_runs_lists_the_newest_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentloop.cli import main

    monkeypatch.setenv("COLUMNS", "120")
    path = tmp_path / "agentloop.db"
    with SQLiteStore(path) as store:
        ids = fill(store, 4)
    assert main(["runs", "--store", str(path), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert [i for i in ids if i in out] == ids[2:]  # the newest two, oldest of them first
    assert out.index(ids[2]) < out.index(ids[3])
    assert "the latest 2 runs of 4 (--limit N lists more, --limit 0 all)" in out
    for every in (["--limit", "0"], ["--limit", "4"]):
        assert main(["runs", "--store", str(path), *every]) == 0
        out = capsys.readouterr().out
        assert all(i in out for i in ids) and out.rstrip().endswith("4 runs")


def timed(run_id: str, started: float, ended: float | None) -> Any:
    run = make_run(run_id, turns=1)
    run.started_at, run.ended_at = started, ended
    return run


def test_the_runs_during_a_run_are_those_it_could_have_started(store: Backend) -> None:
    parent = timed("parent", 100.0, None)
    store.begin_run("lead", parent)
    child = timed("child", 101.0, 102.0)
    store.begin_run("child-session", child)
    store.finish_runs("child-session", [child], keep=0, append=[])
    assert [i for i, _ in store.runs_during("parent")] == ["child"]  # no end yet: every later run
    parent.ended_at = 105.0
    store.finish_runs("lead", [parent], keep=0, append=[])
    later = timed("later", 200.0, 201.0)
    store.begin_run("lead", later)
    store.finish_runs("lead", [later], keep=0, append=[])
    (found_id, found), *rest = store.runs_during("parent")
    assert found_id == "child" and rest == [] and found == store.load_run("child")
    assert [i for i, _ in store.runs_during("child")] == []  # "later" started after its end
    assert store.runs_during("no-such-run") == []


def test_runs_are_found_by_a_prefix_of_their_id(store: Backend) -> None:
    ids = fill(store, 12)  # run000 ... run011
    assert [i for i, _ in store.runs_starting("run01")] == ["run010", "run011"]
    assert [i for i, _ in store.runs_starting("run01", limit=5)] == ["run010", "run011"]
    assert [i for i, _ in store.runs_starting("run003")] == ["run003"]
    assert store.runs_starting("run003")[0][1] == store.load_run(ids[3])
    assert store.runs_starting("nope") == [] and len(store.runs_starting("")) == 2
