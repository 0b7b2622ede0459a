"""Reading the store for the viewer: each run, or the words saying why it cannot be read.

The viewer opens the store read-only (a SQLite file that must exist, or a ``postgresql://`` URL)
and never writes to it. As ``agentloop runs`` does, a damaged record does not hide the readable
runs: ``scan`` gives an ``Unreadable(run_id, message)`` in its place, and the page names it. A
store that cannot be read at all (locked past the timeout, gone, not ours) raises
``MemoryBackendError`` and the page says so instead of the runs; the next request opens the
store again, so the page recovers when the store does.

The rest is pure: what a person filters by (a run's status, its models, its error class) and
the link a sub-agent's run keeps to the parent's tool call (``Run.to_dict()["parent"]``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from agentloop._util.slots import record
from agentloop._util.statuses import STATUSES, RunStatus
from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.messages import Usage
from agentloop.pricing import estimate_cost, sum_costs

if TYPE_CHECKING:
    from agentloop.run import Run, Turn
    from agentloop.store import PostgresStore, SQLiteStore, StoredRun

__all__ = [
    "PAGE",
    "SCAN",
    "STATUSES",
    "Cost",
    "Page",
    "Parent",
    "RunFilter",
    "Scanned",
    "Status",
    "StoreReader",
    "Unreadable",
    "children_by_call",
    "cost_of",
    "error_class",
    "models_of",
    "parent_of",
    "paused_turn_of",
    "status_of",
    "tool_calls_of",
    "turn_cost",
    "turns_of",
]

Status: TypeAlias = RunStatus
"""A stored run's status (SPEC 9): the store's ``status`` column, which the filter queries."""

PAGE = 100
"""Runs on one page of the runs table (the newest first; the page links to older ones)."""

SCAN = 1000
"""Records a filtered page reads at most (a rare match: the page links on to older runs)."""


@record
class Unreadable:
    """A stored run whose record could not be read: its id and what is damaged."""

    run_id: str
    message: str


Scanned: TypeAlias = "StoredRun | Unreadable"


def _open(location: str, timeout: float) -> SQLiteStore | PostgresStore:
    from agentloop.store import PostgresStore, SQLiteStore

    if location.startswith(("postgres://", "postgresql://")):
        return PostgresStore(location, read_only=True, connect_timeout=timeout)
    if not Path(location).is_file():
        raise InvalidInput(f"no store at {location!r} (pass --store PATH)")
    return SQLiteStore(location, read_only=True, timeout=timeout)


class StoreReader:
    """The viewer's one read-only connection, shared by the server's threads under a lock.

    Args:
        location: A SQLite file or a ``postgresql://`` URL.
        timeout: Seconds to wait for a locked SQLite file (or a PostgreSQL connection).
    """

    def __init__(self, location: str, *, timeout: float = 2.0) -> None:
        self.location = location
        self.timeout = timeout
        self._lock = threading.Lock()
        self._store: SQLiteStore | PostgresStore | None = None

    def check(self) -> None:
        """Open the store now: ``InvalidInput`` or ``MemoryBackendError`` when it cannot be."""
        with self._lock:
            self._connected()

    def _connected(self) -> SQLiteStore | PostgresStore:
        if self._store is None:
            self._store = _open(self.location, self.timeout)
        return self._store

    def _drop(self) -> None:
        """Forget a connection that failed, so the next read opens the store afresh."""
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except MemoryBackendError:
                pass

    def scan(self) -> list[Scanned]:
        """Every stored run in the order they started (damaged ones as ``Unreadable``)."""
        with self._lock:
            try:
                scanned = self._connected().scan_runs()
            except MemoryBackendError:
                self._drop()
                raise
        return [
            Unreadable(run_id, _said(found)) if isinstance(found, MemoryBackendError) else found
            for run_id, found in scanned
        ]

    def page(self, chosen: RunFilter, before: int | None = None) -> Page:
        """The newest ``PAGE`` runs ``chosen`` keeps, older than cursor ``before``.

        One page of the store (``page_runs``), however many runs it holds. The status is
        chosen in SQL (the indexed ``status`` column): no record of another status is read; a
        model or an error class is checked on the records read (at most ``SCAN`` a page).
        """

        def keep(found: StoredRun | MemoryBackendError) -> bool:
            return chosen.keeps(_scanned("", found))  # a damaged one passes no filter

        with self._lock:
            try:
                page = self._connected().page_runs(
                    limit=PAGE,
                    before=before,
                    keep=keep if chosen.model or chosen.error else None,
                    scan=SCAN,
                    status=chosen.status or None,
                )
            except MemoryBackendError:
                self._drop()
                raise
        runs = [_scanned(run_id, found) for run_id, found in page.runs]
        return Page(runs, page.total, page.next, before)

    def during(self, run_id: str) -> list[Scanned]:
        """The runs that started while ``run_id`` ran: where its nested runs are."""
        with self._lock:
            try:
                found = self._connected().runs_during(run_id)
            except MemoryBackendError:
                self._drop()
                raise
        return [_scanned(one_id, one) for one_id, one in found]

    def lease(self, session_id: str) -> tuple[str, float] | None:
        """Who runs the session now and until when (a process continuing it); None when free."""
        from agentloop.store._freshness import lease

        with self._lock:
            try:
                return lease(self._connected(), session_id)
            except MemoryBackendError:
                self._drop()
                raise

    def load(self, run_id: str) -> Scanned | None:
        """One run by its exact id; None when there is no such run."""
        with self._lock:
            try:
                return self._connected().load_run(run_id)
            except MemoryBackendError as error:
                if isinstance(error.__cause__, InvalidInput):  # the record is bad, not the store
                    return Unreadable(run_id, _said(error))
                self._drop()
                raise

    def close(self) -> None:
        """Close the connection (a later read opens it again)."""
        with self._lock:
            self._drop()


def _said(error: MemoryBackendError) -> str:
    return error.message


def _scanned(run_id: str, found: StoredRun | MemoryBackendError) -> Scanned:
    return Unreadable(run_id, _said(found)) if isinstance(found, MemoryBackendError) else found


@record
class Page:
    """One page of the runs table: ``runs`` newest first, of ``total`` stored.

    ``next`` is the cursor of the older page (None on the last), ``before`` this page's own.
    """

    runs: list[Scanned]
    total: int
    next: int | None
    before: int | None = None


def status_of(stored: StoredRun) -> Status:
    """``running`` until the run's end is recorded; then waiting, paused, failed or completed."""
    return stored.status


def paused_turn_of(run: Run) -> Turn | None:
    """A paused run's uncommitted turn (the reply that asked for the pending calls), if readable."""
    from agentloop.run import Turn

    data = (run.paused_turn or {}).get("turn")
    if not run.paused or not isinstance(data, Mapping):
        return None
    try:
        return Turn.from_dict(data)
    except InvalidInput:  # shown without it: the pending calls are listed on their own
        return None


def models_of(run: Run) -> list[str]:
    """The models the run's turns used (a paused turn's too), in the order they answered."""
    return list(dict.fromkeys(turn.model for turn in turns_of(run)))


def error_class(run: Run) -> str | None:
    """The class name of the run's hard error, or None."""
    return None if run.stop_reason is None else type(run.stop_reason).__name__


def turns_of(run: Run) -> list[Turn]:
    """The run's turns, a paused run's waiting turn last (its reply and calls happened)."""
    paused = paused_turn_of(run)
    return [*run.turns, *([paused] if paused is not None else [])]


def tool_calls_of(run: Run) -> int:
    """How many tool calls the model asked for, a paused turn's calls included."""
    return sum(len(turn.tool_calls) for turn in turns_of(run))


@record
class Cost:
    """What the viewer says a run cost: US dollars, or None when nobody knows.

    ``at_least``: the turns' cost is known but the run failed on a model call no turn records
    (a provider may bill a request that failed), so the total is a lower bound.
    """

    dollars: float | None
    at_least: bool = False


_COSTS: dict[tuple[str, int, Usage, bool], Cost] = {}
"""A run's ``Cost`` by run id, turn count, usage and whether it failed: pricing a turn costs
~0.3 ms (genai-prices), and a live page asks for every run's cost each second; a run whose
turns have not changed costs what it cost before."""


def cost_of(run: Run) -> Cost:
    """A run's cost, remembered while its turns and usage stay the same.

    Unknown (never ``$0``) when a turn's model has no price, when ``usage`` holds tokens no
    turn accounts for, or when the run failed before any turn was recorded; a run that failed
    after some turns costs at least what they cost. A paused run's waiting turn counts.
    """
    turns = turns_of(run)
    failed = run.stop_reason is not None
    key = (run.id, len(turns), run.usage, failed)
    if key not in _COSTS:
        if len(_COSTS) >= 20_000:
            _COSTS.clear()
        _COSTS[key] = _priced(turns, run.usage, failed)
    return _COSTS[key]


def _priced(turns: Sequence[Turn], usage: Usage, failed: bool) -> Cost:
    covered = sum((turn.usage for turn in turns), Usage())
    if covered != usage or (failed and not turns):
        return Cost(None)
    total = sum_costs(turn_cost(turn.usage, turn.model) for turn in turns)
    return Cost(total, at_least=failed and total is not None)


@lru_cache(maxsize=8192)
def turn_cost(usage: Usage, model: str) -> float | None:
    """One model call's estimated cost (``agentloop.pricing``), remembered."""
    return estimate_cost(usage, model)


@record
class Parent:
    """Where a sub-agent's run was started: the parent run and its tool call."""

    session_id: str
    run_id: str
    call_id: str
    tool: str


def parent_of(run: Run) -> Parent | None:
    """The parent link a child agent's run records (``to_dict()["parent"]``), when it has one."""
    data: Any = getattr(run, "parent", None)  # a dict, as ``to_dict`` writes it
    if not isinstance(data, Mapping):
        return None
    fields = [data.get(name) for name in ("session_id", "run_id", "call_id", "tool")]
    strings = [value for value in fields if isinstance(value, str)]
    return Parent(*strings) if len(strings) == len(fields) else None


def children_by_call(runs: Sequence[Scanned], parent_run_id: str) -> dict[str, list[StoredRun]]:
    """The child runs of ``parent_run_id``, by the id of the tool call that started each."""
    children: dict[str, list[StoredRun]] = {}
    for found in runs:
        if isinstance(found, Unreadable):
            continue
        parent = parent_of(found.run)
        if parent is not None and parent.run_id == parent_run_id:
            children.setdefault(parent.call_id, []).append(found)
    return children


@record
class RunFilter:
    """The list page's filters; an empty field lets every run through."""

    status: str = ""
    model: str = ""
    error: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> RunFilter:
        """The filters of a query string (``?status=failed&model=gpt-5&error=AuthError``)."""
        status = query.get("status", "")
        return cls(
            status=status if status in STATUSES else "",
            model=query.get("model", "").strip(),
            error=query.get("error", "").strip(),
        )

    @property
    def active(self) -> bool:
        """Whether any filter is set."""
        return bool(self.status or self.model or self.error)

    def keeps(self, found: Scanned) -> bool:
        """Whether a run passes; an unreadable run passes only when no filter is set."""
        if isinstance(found, Unreadable):
            return not self.active
        run = found.run
        if self.status and status_of(found) != self.status:
            return False
        if self.model and self.model not in models_of(run):
            return False
        return not self.error or error_class(run) == self.error

    def query(self) -> str:
        """The filters as a query string (``""`` when none is set)."""
        from urllib.parse import urlencode

        pairs = {k: v for k, v in (("status", self.status), ("model", self.model),
                                   ("error", self.error)) if v}  # fmt: skip
        return urlencode(pairs)
