"""``DBOSAgent``: runs as DBOS workflows, on SQLite in process and in child processes.

In process (one DBOS per test, on a temp SQLite file): a run is a workflow whose model and tool
calls are steps; a replay (a fork of the finished workflow) repeats no step and rebuilds the
same run, parallel tool calls included; errors cross DBOS's serialisation with their
attributes; DBOS cancellation ends the run as ``Cancelled``. In children: a run SIGKILLed at
several points is recovered by the next process's ``DBOS.launch()`` with every completed tool
call run once; an enqueued run is drained by a worker process.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")

from dbos import DBOS

from agentloop import Agent, RunConfig, tool
from agentloop.cancel import CancelToken
from agentloop.durable.dbos import DBOSAgent, DBOSRun
from agentloop.errors import (
    Cancelled,
    ConfigurationError,
    MaxTurnsExceeded,
    RateLimited,
)
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call
from agentloop.transcript import validate_transcript

HERE = Path(__file__).parent
CHILD = HERE / "_dbos_child.py"
sys.path.insert(0, str(HERE))

import _plan  # noqa: E402

calls: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers (counted)."""
    calls.append(f"add {a} {b}")
    return a + b


def two_turns(request: ModelRequest) -> Any:
    done = sum(1 for m in request.messages if m.role == "tool")
    if done < 2:
        return [call("add", {"a": done, "b": 1}), call("add", {"a": 10, "b": done})]
    return f"sum after {done} turns"


@pytest.fixture
def dbos_url(tmp_path: Path) -> Iterator[str]:
    calls.clear()
    yield f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS.destroy(destroy_registry=True)


def _launch(url: str) -> None:
    DBOS(config={"name": "agentloop-tests", "system_database_url": url, "log_level": "ERROR"})
    DBOS.launch()


async def test_a_run_is_a_workflow_of_model_and_tool_steps(dbos_url: str) -> None:
    durable = DBOSAgent(Agent(FunctionModel(two_turns), tools=[add]), name="steps")
    _launch(dbos_url)
    run = await durable.run("go", workflow_id="wf-steps")
    assert run.output == "sum after 2 turns" and run.id == "wf-steps"
    validate_transcript(run.messages)
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async("wf-steps")]
    assert steps == ["steps.model", *["steps.tool.add"] * 2] * 2 + ["steps.model"]
    assert calls == ["add 0 1", "add 10 0", "add 1 1", "add 10 1"]


@pytest.mark.parametrize("parallel", [False, True])
async def test_a_replay_repeats_no_step_and_rebuilds_the_same_run(
    dbos_url: str, parallel: bool
) -> None:
    config = RunConfig(parallel_tool_calls=parallel, max_concurrency=1)
    asked: list[int] = []

    def counted(request: ModelRequest) -> Any:
        asked.append(1)
        return two_turns(request)

    durable = DBOSAgent(Agent(FunctionModel(counted), tools=[add], config=config), name="replay")
    _launch(dbos_url)
    first = await durable.run("go", workflow_id="wf-replay")
    before = (len(asked), list(calls))
    last_step = len(await DBOS.list_workflow_steps_async("wf-replay"))
    fork = await DBOS.fork_workflow_async("wf-replay", last_step + 1)
    again = await fork.get_result()
    assert (len(asked), calls) == before  # every model and tool call answered from DBOS
    assert again.messages == first.messages and again.output == first.output


async def test_stream_config_streams_through_the_model_step(dbos_url: str) -> None:
    config = RunConfig(stream=True)
    agent = Agent(FunctionModel(two_turns), tools=[add], config=config)
    durable = DBOSAgent(agent, name="streamed")
    _launch(dbos_url)
    run = await durable.run("go")
    assert run.output == "sum after 2 turns"
    steps = await DBOS.list_workflow_steps_async(run.id)
    assert [s["function_name"] for s in steps].count("streamed.model") == 3


async def test_errors_cross_dbos_serialisation_with_their_attributes(dbos_url: str) -> None:
    looping = Agent(
        FunctionModel(lambda r: [call("add", {"a": 1, "b": 1})]),
        tools=[add],
        config=RunConfig(max_turns=2),
    )
    failing = Agent(FunctionModel(_rate_limited))
    loops = DBOSAgent(looping, name="loops")
    limited = DBOSAgent(failing, name="limited")
    _launch(dbos_url)
    with pytest.raises(MaxTurnsExceeded) as caught:
        await loops.run("go", workflow_id="wf-loops")
    assert caught.value.max == 2 and caught.value.kind == "iterations"
    assert caught.value.summary is not None and caught.value.summary.run_id == "wf-loops"
    assert caught.value.summary.tool_calls == 2
    with pytest.raises(RateLimited) as limit:
        await limited.run("go", workflow_id="wf-limited")
    with pytest.raises(RateLimited) as again:  # read back from the database
        await DBOSRun[Any]("wf-limited").result()
    for error in (limit.value, again.value):
        assert (error.provider, error.status_code, error.retry_after) == ("p", 429, 7.5)
        assert error.request_id == "req-1" and error.attempts == 1


def _rate_limited(request: ModelRequest) -> Any:
    raise RateLimited(
        "slow down", provider="p", status_code=429, retry_after=7.5, request_id="req-1"
    )


async def test_dbos_cancellation_ends_the_run_as_cancelled(dbos_url: str) -> None:
    entered = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Block until cancelled."""
        entered.set()
        await asyncio.sleep(3600)
        return "never"

    agent = Agent(FunctionModel(lambda r: [call("wait_forever")]), tools=[wait_forever])
    durable = DBOSAgent(agent, name="cancelled")
    _launch(dbos_url)
    token = CancelToken()
    running = asyncio.ensure_future(durable.run("go", cancel=token, workflow_id="wf-cancel"))
    await asyncio.wait_for(entered.wait(), 10)
    token.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(running, 20)
    status = await DBOS.get_workflow_status_async("wf-cancel")
    assert status is not None and status.status == "CANCELLED"


async def test_dbos_not_launched_is_a_configuration_error(dbos_url: str) -> None:
    durable = DBOSAgent(Agent(FunctionModel(two_turns), tools=[add]), name="early")
    with pytest.raises(ConfigurationError, match=r"DBOS is not launched"):
        await durable.run("go")
    with pytest.raises(ConfigurationError, match=r"DBOS is not launched"):
        durable.enqueue("go")


async def test_inline_tools_are_not_steps(dbos_url: str) -> None:
    agent = Agent(FunctionModel(two_turns), tools=[add])
    durable = DBOSAgent(agent, name="inline", inline_tools=["add"])
    _launch(dbos_url)
    run = await durable.run("go")
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async(run.id)]
    assert steps == ["inline.model"] * 3 and len(calls) == 4


# -- child processes ----------------------------------------------------------------------------

KILL_POINTS = [
    *(f"model:{n}" for n in range(1, 6)),
    *(f"model-reply:{n}" for n in range(1, 6)),
    *(f"tool:{key}:1" for key in "abcdefg"),
    *(f"stream/{point}" for point in ("model:1", "model-reply:3", "tool:d:1")),
    *(f"model-commit:{n}" for n in (1, 3, 5)),
    *(f"tool-commit:{n}" for n in (1, 4, 7)),
]
"""Inside each model call (as it starts, and with its reply made but not returned), inside each
tool call (before its side effect), three of those again with streaming on (the model step
streams), and during DBOS's own commits (inside the transaction recording a model step; right
after a tool step's row is committed): 26 points."""


def _child(tmp: Path, name: str, *args: str, **env: str) -> subprocess.Popen[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("KILL", "HOLD")}
    environ.update(
        DBOS_URL=f"sqlite:///{tmp / name}.sqlite", EFFECTS=str(tmp / f"{name}.effects"), **env
    )
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _effects(path: Path) -> dict[str, list[str]]:
    """The side effects by run id (each line: run id, key)."""
    runs: dict[str, list[str]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        run_id, key = line.split()
        runs.setdefault(run_id, []).append(key)
    return {run_id: sorted(keys) for run_id, keys in runs.items()}


def test_a_killed_run_is_recovered_by_the_next_launch(tmp_path: Path) -> None:
    names = {point: point.replace(":", "_").replace("/", "_") for point in KILL_POINTS}

    def start(point: str, mode: str) -> subprocess.Popen[str]:
        streamed, _, kill = point.rpartition("/")
        env = {"STREAM": "1"} if streamed else {}
        if mode == "run":
            env["KILL"] = kill
        return _child(tmp_path, names[point], mode, names[point], **env)

    killed = {p: start(p, "run") for p in names}
    for point, child in killed.items():
        _, err = child.communicate(timeout=120)
        assert child.returncode == -9, f"{point}: exited {child.returncode}: {err[-2000:]}"
    recovering = {p: start(p, "recover") for p in names}
    for point, child in recovering.items():
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, f"{point}: {err[-2000:]}"
        output, run_id, attempts = out.split()
        assert (output, run_id) == ("done", names[point]), point
        assert int(attempts) >= 2, point  # the first execution and DBOS's recovery
        effects = _effects(tmp_path / f"{names[point]}.effects")
        assert effects == {names[point]: sorted(_plan.KEYS)}, f"{point}: {effects}"


def test_an_enqueued_run_is_drained_by_a_worker_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'queue.sqlite'}"
    durable = DBOSAgent(Agent(FunctionModel(_plan.plan_step), tools=[_plan.work]), name="plan")
    _launch_listening(url)
    try:
        enqueued = durable.enqueue("go", workflow_id="wf-queued")
        worker = _child(tmp_path, "queue", "worker", STOP=str(tmp_path / "stop"))
        try:
            run = asyncio.run(_result(enqueued))
        finally:
            (tmp_path / "stop").touch()
            worker.communicate(timeout=60)
    finally:
        DBOS.destroy(destroy_registry=True)
    assert run.output == "done" and run.id == "wf-queued"
    assert _effects(tmp_path / "queue.effects") == {"wf-queued": sorted(_plan.KEYS)}


def _launch_listening(url: str, **queue: Any) -> None:
    """This process enqueues but runs nothing: it listens to no queue."""
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": url,
            "log_level": "ERROR",
            "application_version": "tests",
            "executor_id": "enqueuer",
        }
    )
    DBOS.listen_queues([])
    DBOS.launch()
    if queue:
        DBOS.register_queue("agentloop.plan", **queue)


async def _result(enqueued: DBOSRun[Any]) -> Any:
    return await asyncio.wait_for(enqueued.result(), 60)


# -- many workers on one Postgres ---------------------------------------------------------------


RUNS = 30


def test_three_workers_on_postgres_drain_30_runs_through_a_killed_worker(
    tmp_path: Path, postgres_url: str
) -> None:
    """One worker is SIGKILLed mid-run and restarted with its executor id: all finish once."""
    url = f"{postgres_url}/dbos_scale"
    env = {"DBOS_URL": url, "EFFECTS": str(tmp_path / "effects"), "STOP": str(tmp_path / "stop")}
    durable = DBOSAgent(Agent(FunctionModel(_plan.plan_step), tools=[_plan.work]), name="plan")
    _launch_listening(url, worker_concurrency=1, polling_interval_sec=0.1)
    try:
        enqueued = [durable.enqueue("go", workflow_id=f"scale-{i}") for i in range(RUNS)]
        workers = [_worker(env, "w0", KILL="tool:d:2")]
        workers += [_worker(env, f"w{i}") for i in (1, 2)]
        workers[0].communicate(timeout=120)
        assert workers[0].returncode == -9  # killed inside its second run's tool "d"
        workers[0] = _worker(env, "w0")  # restarted with its executor id: DBOS recovers its run
        try:
            runs = asyncio.run(_results(enqueued))
        finally:
            (tmp_path / "stop").touch()
            for worker in workers:
                worker.communicate(timeout=60)
    finally:
        DBOS.destroy(destroy_registry=True)
    assert sorted(run.id for run in runs) == sorted(f"scale-{i}" for i in range(RUNS))
    assert all(run.output == "done" for run in runs)
    assert _effects(tmp_path / "effects") == {run.id: sorted(_plan.KEYS) for run in runs}


def _worker(env: dict[str, str], executor: str, **extra: str) -> subprocess.Popen[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("KILL", "HOLD")}
    environ.update(env, EXECUTOR=executor, **extra)
    return subprocess.Popen(
        [sys.executable, str(CHILD), "worker"],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _results(enqueued: list[DBOSRun[Any]]) -> list[Any]:
    waiting = [run.result(poll_seconds=0.1) for run in enqueued]
    return await asyncio.wait_for(asyncio.gather(*waiting), 120)
