"""``DBOSAgent`` scale-out defaults, with worker processes on one PostgreSQL.

Without any queue set-up by the application, ``enqueue`` registers the agent's queue with a
per-worker limit (``WORKER_CONCURRENCY``): runs spread over the workers, and a SIGKILLed worker
stalls only the runs it held (until it restarts under its executor id) while the others drain
the rest; every completed tool call ran once. A process that only enqueues
(``DBOSAgent.enqueue_only()``) claims nothing, so nothing is left behind when it exits; one that
launched DBOS as usual claims runs and leaves them ``PENDING`` under its executor id.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")

from dbos import DBOS, WorkflowStatus

from agentloop import Agent
from agentloop.durable.dbos import WORKER_CONCURRENCY, DBOSAgent
from agentloop.errors import ConfigurationError
from agentloop.testing import FunctionModel

HERE = Path(__file__).parent
CHILD = HERE / "_dbos_child.py"
sys.path.insert(0, str(HERE))

import _plan  # noqa: E402

RUNS = 30


@pytest.fixture
def enqueuer() -> Iterator[Callable[[str], DBOSAgent[str | None]]]:
    """Launch DBOS in this process as an enqueue-only one on a database; its ``DBOSAgent``."""

    def launch(url: str) -> DBOSAgent[str | None]:
        durable = DBOSAgent(Agent(FunctionModel(_plan.plan_step), tools=[_plan.work]), name="plan")
        DBOS(
            config={
                "name": "agentloop-tests",
                "system_database_url": url,
                "log_level": "ERROR",
                "application_version": "tests",
                "executor_id": "enqueuer",
            }
        )
        DBOSAgent.enqueue_only()
        DBOS.launch()
        return durable

    yield launch
    DBOS.destroy(destroy_registry=True)


def _child(env: dict[str, str], *args: str, **extra: str) -> subprocess.Popen[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("KILL", "HOLD", "ENQUEUE_ONLY")}
    environ.update(env, **extra)
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _worker(tmp: Path, env: dict[str, str], executor: str, **extra: str) -> subprocess.Popen[str]:
    ready = tmp / f"ready-{executor}"
    ready.unlink(missing_ok=True)
    worker = _child(env, "worker", EXECUTOR=executor, READY=str(ready), **extra)
    _wait(lambda: ready.exists() or worker.poll() is not None, f"worker {executor} launched")
    assert worker.poll() is None, worker.communicate()
    return worker


def _wait(done: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        time.sleep(0.1)


def _statuses(ids: list[str]) -> list[WorkflowStatus]:
    return DBOS.list_workflows(workflow_ids=ids, load_input=False, load_output=False)


def _effects(path: Path) -> dict[str, list[str]]:
    runs: dict[str, list[str]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        run_id, key = line.split()
        runs.setdefault(run_id, []).append(key)
    return {run_id: sorted(keys) for run_id, keys in runs.items()}


def test_the_default_queue_spreads_runs_and_a_killed_worker_stalls_only_its_own(
    tmp_path: Path,
    postgres_url: str,
    enqueuer: Callable[[str], DBOSAgent[str | None]],
) -> None:
    url = f"{postgres_url}/dbos_spread"
    env = {"DBOS_URL": url, "EFFECTS": str(tmp_path / "effects"), "STOP": str(tmp_path / "stop")}
    env["SLOW"] = "0.2"  # a run takes about a second: no worker finishes its share at once
    durable = enqueuer(url)
    workers = [_worker(tmp_path, env, "w0", KILL="tool:d:2")]
    workers += [_worker(tmp_path, env, f"w{i}") for i in (1, 2)]
    ids = [f"spread-{i}" for i in range(RUNS)]
    try:
        for workflow_id in ids:
            durable.enqueue("go", workflow_id=workflow_id)
        workers[0].communicate(timeout=120)
        assert workers[0].returncode == -9  # killed inside its second tool call "d"

        def drained_but_the_dead_ones() -> bool:
            return all(
                s.status == "SUCCESS" or (s.status == "PENDING" and s.executor_id == "w0")
                for s in _statuses(ids)
            )

        _wait(drained_but_the_dead_ones, "the live workers drained the queue")
        held = _statuses(ids)
        dead = {s.workflow_id for s in held if s.status == "PENDING"}  # w0's, in flight
        by_worker = {w: sum(1 for s in held if s.executor_id == w) for w in ("w0", "w1", "w2")}
        assert 1 <= by_worker["w0"] <= WORKER_CONCURRENCY, by_worker  # only what w0 held waits
        assert by_worker["w1"] >= 1 and by_worker["w2"] >= 1, by_worker  # the runs spread
        workers[0] = _worker(tmp_path, env, "w0")  # back under its id: DBOS re-queues its runs
        _wait(lambda: all(s.status == "SUCCESS" for s in _statuses(ids)), "every run finished")
    finally:
        (tmp_path / "stop").touch()
        for worker in workers:
            worker.communicate(timeout=60)
    effects = _effects(tmp_path / "effects")
    assert sorted(effects) == sorted(ids)
    for run_id, keys in effects.items():
        assert sorted(set(keys)) == sorted(_plan.KEYS), (run_id, keys)  # every call ran
        if run_id not in dead:  # a live worker's calls ran once each
            assert keys == sorted(_plan.KEYS), (run_id, keys)
    # A call of a run w0 held that was in flight when it died (its effect written, its step not
    # yet recorded: more likely the busier the machine) runs again on recovery, as
    # docs/durable.md ("Exactly once, and its limits") says; every returned call ran once.
    [queue] = [q for q in DBOS.list_queues() if q.name == "agentloop.plan"]
    assert queue._worker_concurrency == WORKER_CONCURRENCY


@pytest.mark.parametrize("enqueue_only", [True, False])
def test_an_enqueue_only_process_claims_nothing(
    tmp_path: Path,
    postgres_url: str,
    enqueuer: Callable[[str], DBOSAgent[str | None]],
    enqueue_only: bool,
) -> None:
    url = f"{postgres_url}/dbos_web_{'only' if enqueue_only else 'worker'}"
    env = {"DBOS_URL": url, "EFFECTS": str(tmp_path / "effects"), "STOP": str(tmp_path / "stop")}
    enqueuer(url)
    flag = {"ENQUEUE_ONLY": "1"} if enqueue_only else {}
    web = _child(env, "enqueue", "3", EXECUTOR="web", SLOW="30", **flag)
    _, err = web.communicate(timeout=120)
    assert web.returncode == 0, err
    ids = [f"web-{i}" for i in range(3)]
    if not enqueue_only:  # the hazard: it took runs, then exited, and they wait for "web"
        assert {s.status for s in _statuses(ids)} & {"PENDING"}
        assert {s.executor_id for s in _statuses(ids) if s.status == "PENDING"} == {"web"}
        return
    assert [s.status for s in _statuses(ids)] == ["ENQUEUED"] * 3
    worker = _worker(tmp_path, env, "w1")
    try:
        _wait(lambda: all(s.status == "SUCCESS" for s in _statuses(ids)), "the worker ran them")
    finally:
        (tmp_path / "stop").touch()
        worker.communicate(timeout=60)
    assert _effects(tmp_path / "effects") == {i: sorted(_plan.KEYS) for i in ids}


def test_enqueue_only_after_launch_or_without_dbos_is_a_configuration_error(
    tmp_path: Path, enqueuer: Callable[[str], DBOSAgent[str | None]]
) -> None:
    with pytest.raises(ConfigurationError, match=r"after DBOS\(config=\.\.\.\)"):
        DBOSAgent.enqueue_only()
    enqueuer(f"sqlite:///{tmp_path / 'late.sqlite'}")
    with pytest.raises(ConfigurationError, match=r"before DBOS.launch\(\)"):
        DBOSAgent.enqueue_only()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_worker_concurrency_is_a_positive_whole_number_or_none(bad: object) -> None:
    agent = Agent(FunctionModel(_plan.plan_step))
    with pytest.raises(ConfigurationError, match="worker_concurrency"):
        DBOSAgent(agent, name="bad", worker_concurrency=bad)  # type: ignore[arg-type]
