"""Issue 39, goal 3: what an idle session, a paused run, a stored run and a turn's write cost.

- ``memory``: bytes an idle session holds after one run (a tool turn and the answer; tracemalloc
  over N sessions of one agent, after a GC), and its own state: what is left when its history
  and run records are let go; the same for a session whose run is paused on an approval.
- ``list``: a SQLite store (and a PostgreSQL one with ``--postgres DSN``) filled with N stored
  runs (100,000 by default: one real run's rows copied under new ids), then the first page of
  ``agentloop runs`` (in-process, and the whole command as a subprocess) and of the viewer's
  ``GET /`` (Starlette's test client), best of ``--repeats``.
- ``write``: a turn's store write against a tool turn's engine overhead: K = 10 tool turns on
  ``ScriptedModel`` (``engine_turns.py``'s engine-only turn), without a store and with a
  ``SQLiteStore`` in a temporary directory; CPU and wall per turn, median of ``--repeats``.
  With ``--instructions``: the same in instructions (valgrind's callgrind, which the machine's
  load does not move), per turn and per store call (each call's Python and SQLite work; the
  kernel's part of a write is not counted).

    python bench/store_scale.py                 # all three
    python bench/store_scale.py write --instructions
    python bench/store_scale.py list --runs 100000 --postgres postgresql://postgres@127.0.0.1:5432/postgres

A benchmark, not a test; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from agentloop import Agent, tool
from agentloop.testing import ScriptedModel, call, reply


@tool
async def lookup(key: str) -> str:
    """Look a key up (async, as ``engine_turns.py``'s: no thread hop)."""
    return key


@tool(requires_approval=True)
def deploy(key: str) -> str:
    """Deploy (asks for approval)."""
    return key


# -- memory ------------------------------------------------------------------------------------


async def idle_sessions(n: int, *, paused: bool, where: bool = False) -> tuple[float, float]:
    """KiB each of ``n`` sessions after one run: all they hold, and their data's share.

    The data (the history and the run records) is measured by letting it go: what the
    sessions still hold then is their own state. The test double's recorded requests are
    dropped first (a real client keeps none).
    """
    name = "deploy" if paused else "lookup"
    steps = [call(name, {"key": "k"}), reply("done")] * (n + 1)
    client = ScriptedModel(steps)
    agent = Agent(client, tools=[lookup, deploy])
    await agent.session().run("warm")  # the agent's own caches fill here, not below
    gc.collect()
    tracemalloc.start(1)
    start = tracemalloc.take_snapshot() if where else None
    before = tracemalloc.get_traced_memory()[0]
    sessions = [agent.session() for _ in range(n)]
    for session in sessions:
        await session.run("go")
    client.requests.clear()
    gc.collect()
    total = tracemalloc.get_traced_memory()[0] - before
    for session in sessions:  # and what else points at them: the bus, the measured history
        session._history, session._runs, session._bus.run = [], [], None
        if session._measured is not None:
            session._measured.history = []
    gc.collect()
    own = tracemalloc.get_traced_memory()[0] - before
    if start is not None:  # where the sessions' own bytes were allocated
        for stat in tracemalloc.take_snapshot().compare_to(start, "lineno")[:25]:
            print(f"    {stat.size_diff / n:7.0f} B {stat.count_diff / n:5.1f} x {stat.traceback}")
    tracemalloc.stop()
    return total / n / 1024, own / n / 1024


def memory(n: int, where: bool = False) -> None:
    """Print what an idle session and a paused one hold."""
    print(f"{'session after one run':<30}{'all KiB':>10}{'own KiB':>10}{'data KiB':>10}")
    for label, paused in (("idle (tool turn + answer)", False), ("paused (one approval)", True)):
        total, own = asyncio.run(idle_sessions(n, paused=paused, where=where))
        print(f"{label:<30}{total:>10.2f}{own:>10.2f}{total - own:>10.2f}")


# -- list --------------------------------------------------------------------------------------


def fill(store: Any, runs: int) -> None:
    """``runs`` stored runs: one real run (a tool turn and the answer) copied under new ids."""
    steps = [call("lookup", {"key": "k"}), reply("done")]
    agent = Agent(ScriptedModel(steps, model="gpt-4o-mini"), tools=[lookup])
    agent.session("seed", store=store).run_sync("go")
    with store.transaction("reading the seed") as tx:
        row = tx.rows("SELECT input, started_at, ended_at, record FROM agentloop_runs")[0]
    record = json.loads(row[3])
    batch = []
    for i in range(runs - 1):
        run_id = uuid.uuid4().hex
        record["id"] = run_id
        batch.append((run_id, f"s{i % 1000}", row[0], row[1] + i, row[2] + i, json.dumps(record)))
        if len(batch) == 5000 or i == runs - 2:
            with store.transaction("filling") as tx:
                tx.many(
                    "INSERT INTO agentloop_runs (run_id, session_id, input, started_at, "
                    "ended_at, absorbed, record) VALUES (?, ?, ?, ?, ?, 0, ?)",
                    batch,
                )
            batch = []


def best_ms(work: Any, repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``work``, in milliseconds."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        samples.append((time.perf_counter() - started) * 1000)
    return min(samples)


def listing(location: str, repeats: int) -> None:
    """Print the first page's time in ``agentloop runs`` and the viewer over ``location``."""
    from rich.console import Console
    from starlette.testclient import TestClient

    from agentloop.cli.runs import runs as list_runs
    from agentloop.ui.viewer import ViewerApp

    devnull = open(os.devnull, "w")
    console = Console(file=devnull, width=120)
    cli = best_ms(lambda: list_runs(console, location, None, None), repeats)
    command = [sys.executable, "-m", "agentloop", "runs", "--store", location]
    whole = best_ms(lambda: subprocess.run(command, capture_output=True, check=True), repeats)
    with tempfile.TemporaryDirectory() as tmp:  # the same command on an empty store: its floor
        from agentloop.store import SQLiteStore

        SQLiteStore(Path(tmp) / "empty.db").close()
        command[-1] = str(Path(tmp) / "empty.db")
        floor = best_ms(lambda: subprocess.run(command, capture_output=True, check=True), repeats)
    app = ViewerApp(location)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = best_ms(lambda: client.get("/").raise_for_status(), repeats)
        filtered = best_ms(lambda: client.get("/?status=failed").raise_for_status(), 1)
        newest, oldest = _ends(app)
        one = best_ms(lambda: client.get(f"/runs/{newest}").raise_for_status(), repeats)
        old = best_ms(lambda: client.get(f"/runs/{oldest}").raise_for_status(), repeats)
    app.close()
    show = best_ms(lambda: list_runs(console, location, oldest[:8], None), repeats)
    devnull.close()
    print(f"  agentloop runs, in-process: {cli:9.1f} ms")
    print(f"  agentloop runs, the command: {whole:8.1f} ms (start-up and imports included)")
    print(f"  the command, empty store: {floor:11.1f} ms")
    print(f"  viewer GET /: {page:23.1f} ms")
    print(f"  viewer GET /?status=failed: {filtered:9.1f} ms (none match: the page reads 1,000)")
    print(f"  agentloop runs show PREFIX: {show:9.1f} ms (the oldest run, by 8 characters)")
    print(f"  viewer GET /runs/ID, newest: {one:8.1f} ms")
    print(f"  viewer GET /runs/ID, oldest: {old:8.1f} ms")


def _ends(app: Any) -> tuple[str, str]:
    """The newest and the oldest run ids of the viewer's store."""
    store = app.reader._connected()
    with store._open("finding the ends", write=False) as tx:
        newest = tx.rows("SELECT run_id FROM agentloop_runs ORDER BY seq DESC LIMIT 1")[0][0]
        oldest = tx.rows("SELECT run_id FROM agentloop_runs ORDER BY seq LIMIT 1")[0][0]
    return str(newest), str(oldest)


def list_bench(runs: int, repeats: int, postgres: str | None) -> None:
    """Fill the stores and time their first pages."""
    from agentloop.store import PostgresStore, SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "runs.db")
        lite = SQLiteStore(path)
        fill(lite, runs)
        lite.close()
        print(f"SQLite, {runs:,} runs ({os.path.getsize(path) / 2**20:.0f} MiB)")
        listing(path, repeats)
    if postgres:
        import psycopg

        store = PostgresStore(postgres)
        with store.transaction("emptying") as tx:
            tx.run("TRUNCATE agentloop_runs, agentloop_turns, agentloop_history")
        fill(store, runs)
        store.close()
        with psycopg.connect(postgres, autocommit=True) as conn:  # what autovacuum would do
            conn.execute("VACUUM ANALYZE agentloop_runs")
        print(f"PostgreSQL, {runs:,} runs (after VACUUM ANALYZE)")
        listing(postgres, repeats)


# -- write -------------------------------------------------------------------------------------


def one_run(k: int, store_dir: str | None, index: int) -> tuple[Any, Any]:
    """A session for one run of ``k`` tool turns and the answer, and its store (or None)."""
    from agentloop.store import SQLiteStore

    steps = [call("lookup", {"key": f"k{i}"}) for i in range(k)] + [reply("done")]
    store = SQLiteStore(Path(store_dir) / f"w{index}.db") if store_dir else None
    agent = Agent(ScriptedModel(steps), tools=[lookup])
    return (agent.session(store=store) if store is not None else agent.session()), store


async def per_turn(k: int, store_dir: str | None, index: int) -> tuple[float, float]:
    """CPU and wall microseconds per turn of one run of ``k`` tool turns and the answer."""
    session, store = one_run(k, store_dir, index)
    cpu, wall = time.process_time(), time.perf_counter()
    await session.run("go")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if store is not None:
        store.close()
    return cpu / (k + 1) * 1e6, wall / (k + 1) * 1e6


def write_bench(k: int, repeats: int) -> None:
    """Print a turn's cost without a store and with a SQLite one, and the write's share."""

    async def measure(store_dir: str | None) -> tuple[float, float]:
        for i in range(3):
            await per_turn(k, store_dir, -1 - i)
        samples = []
        for i in range(repeats):
            gc.collect()
            samples.append(await per_turn(k, store_dir, i))
        return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)

    with tempfile.TemporaryDirectory() as tmp:
        bare = asyncio.run(measure(None))
        stored = asyncio.run(measure(tmp))
    print(f"{'per turn, K = ' + str(k):<28}{'CPU us':>10}{'wall us':>10}")
    print(f"{'no store':<28}{bare[0]:>10.1f}{bare[1]:>10.1f}")
    print(f"{'SQLiteStore (durable)':<28}{stored[0]:>10.1f}{stored[1]:>10.1f}")
    cpu, wall = stored[0] - bare[0], stored[1] - bare[1]
    print(f"{'the store, per turn':<28}{cpu:>10.1f}{wall:>10.1f}")
    print(f"the write / the engine's turn: {cpu / bare[0]:.0%} CPU, {wall / bare[1]:.0%} wall")


COUNTING = """
import asyncio, functools, gc, json, sys, tempfile
gc.disable()  # a collection falls where it falls: it would move the count
sys.path.insert(0, {bench!r})
import store_scale as ss
labels = []
def counted(label, work):  # callgrind counts inside functools.reduce only, one dump per call
    labels.append(label)
    return functools.reduce(lambda _, __: work(), [0], None)
loop = asyncio.new_event_loop()
tmp = tempfile.mkdtemp()
runs = [0]
def run(store, label=None):  # only the run is counted: not the store's opening nor closing
    runs[0] += 1
    session, opened = ss.one_run({k}, tmp if store else None, runs[0])
    work = lambda: loop.run_until_complete(session.run("go"))
    counted(label, work) if label else work()
    if opened is not None:
        opened.close()
for store in (False, True):
    run(store), run(store)
    run(store, "run, no store" if not store else "run, SQLiteStore")
from agentloop.engine.conversation import Conversation
from agentloop.store._sql import SQLStore
def wrap(owner, name, label):
    inner = getattr(owner, name)
    setattr(owner, name, lambda *a, **k: counted(label, lambda: inner(*a, **k)))
for name in ("claim", "begin_run", "save_step", "save_turn", "finish_runs"):
    wrap(SQLStore, name, name)
wrap(Conversation, "_snapshot", "the safety snapshot")
run(True)
print(json.dumps(labels))
"""


def write_instructions(k: int) -> None:
    """Print a turn's instructions without and with the store, and each store call's."""
    import re
    import shutil

    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPYCACHEPREFIX": tmp}
        argv = [sys.executable, "-c", COUNTING.format(bench=str(Path(__file__).parent), k=k)]
        subprocess.run(argv, env=env, check=True, capture_output=True)  # bytecode cached
        out = Path(tmp) / "cg.out"
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        valgrind += ["--collect-atstart=no", "--toggle-collect=functools_reduce"]
        valgrind += ["--dump-after=functools_reduce"]
        done = subprocess.run([*valgrind, *argv], env=env, check=True, capture_output=True)
        labels = json.loads(done.stdout.decode().strip().splitlines()[-1])
        counts: dict[str, list[int]] = {}
        for n, label in enumerate(labels, 1):
            text = Path(f"{out}.{n}").read_text()
            found = re.search(r"^(?:totals|summary): (\d+)", text, re.MULTILINE)
            assert found is not None, f"callgrind wrote no count in {out}.{n}"
            counts.setdefault(label, []).append(int(found.group(1)))
    bare, stored = counts.pop("run, no store")[0], counts.pop("run, SQLiteStore")[0]
    turns = k + 1
    print(f"{'instructions, K = ' + str(k):<28}{'per turn':>12}{'per call':>12}{'calls':>7}")
    print(f"{'no store':<28}{bare // turns:>12,}")
    print(f"{'SQLiteStore (durable)':<28}{stored // turns:>12,}")
    share = (stored - bare) // turns
    print(f"{'the store, per turn':<28}{share:>12,}   ({share / (bare // turns):.0%} of the turn)")
    for label, each in counts.items():
        print(f"  {label:<26}{sum(each) // turns:>12,}{sum(each) // len(each):>12,}{len(each):>7}")


def main() -> None:
    """Run the parts asked for."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("part", nargs="?", choices=("memory", "list", "write"))
    parser.add_argument("-n", type=int, default=500, help="sessions (memory)")
    parser.add_argument("--runs", type=int, default=100_000, help="stored runs (list)")
    parser.add_argument("-k", type=int, default=10, help="tool turns a run (write)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--where", action="store_true", help="memory: the top allocation sites")
    parser.add_argument(
        "--instructions", action="store_true", help="write: count instructions (valgrind)"
    )
    parser.add_argument("--postgres", help="a PostgreSQL DSN to fill too (list; truncated!)")
    args = parser.parse_args()
    if args.part in (None, "memory"):
        memory(args.n, args.where)
    if args.part in (None, "write") and args.instructions:
        write_instructions(args.k)
    elif args.part in (None, "write"):
        write_bench(args.k, max(args.repeats, 15))
    if args.part in (None, "list"):
        list_bench(args.runs, args.repeats, args.postgres)


if __name__ == "__main__":
    main()
