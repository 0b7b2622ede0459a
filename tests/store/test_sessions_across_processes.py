"""One stored session served by several processes (a web app's workers): nothing is lost.

A web app with two workers on one store serves a conversation's messages on whichever worker
takes the request. Each worker keeps the live ``Session`` it used last; when another worker ran
the session since, the next run must start from the store's history, not the cached one, and its
end must never cut what the other worker wrote. The "other worker" here is a real second process
on the same SQLite file (a subprocess), or a second ``SQLiteStore`` connection where a test
needs to stop in the middle of a run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Message, tool
from agentloop.errors import MemoryBackendError
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, reply

_CONTRACT = Path(__file__).with_name("test_store_contract.py")
_spec = importlib.util.spec_from_file_location("_across_store_contract", _CONTRACT)
assert _spec is not None and _spec.loader is not None
_contract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_contract)
postgres_dsn = _contract.postgres_dsn  # the same throwaway PostgreSQL server
both = _contract.open_store  # SQLite and PostgreSQL, one connection per call

WORKER = """
import asyncio, json, sys
from agentloop import Agent
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, reply

model = ScriptedModel([reply(sys.argv[3])])
agent = Agent(model, store=SQLiteStore(sys.argv[1]))
asyncio.run(agent.session("t1").run(sys.argv[2]))
print(json.dumps([m.text for m in model.requests[0].messages]))
"""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "app.db"


@pytest.fixture
def stores(db: Path) -> Iterator[Callable[[], SQLiteStore]]:
    opened: list[SQLiteStore] = []

    def opener() -> SQLiteStore:
        opened.append(SQLiteStore(db))
        return opened[-1]

    yield opener
    for store in opened:
        store.close()


def other_worker(tmp_path: Path, db: Path, prompt: str, answer: str) -> list[str]:
    """One run of session ``t1`` in another process; the texts its model was sent."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    done = subprocess.run(
        [sys.executable, str(script), str(db), prompt, answer],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    sent: list[str] = __import__("json").loads(done.stdout)
    return sent


def texts(messages: Sequence[Message]) -> list[str | None]:
    return [m.text for m in messages]


async def test_a_worker_whose_session_another_worker_ran_starts_from_the_stored_history(
    tmp_path: Path, db: Path, stores: Callable[[], SQLiteStore]
) -> None:
    model = ScriptedModel([reply("a1"), reply("a3")])
    mine = Agent(model, store=stores()).session("t1")
    await mine.run("q1")

    seen = other_worker(tmp_path, db, "q2", "b2")
    assert seen == ["q1", "a1", "q2"]

    await mine.run("q3")  # the same live Session object: it must see q2 and b2
    assert texts(model.requests[-1].messages) == ["q1", "a1", "q2", "b2", "q3"]
    assert texts(mine.history) == ["q1", "a1", "q2", "b2", "q3", "a3"]
    assert [r.output for r in mine.runs] == ["a1", "b2", "a3"]
    stored = Agent(ScriptedModel([]), store=stores()).session("t1")
    assert texts(stored.history) == ["q1", "a1", "q2", "b2", "q3", "a3"]


async def test_workers_taking_turns_lose_no_message(
    tmp_path: Path, db: Path, stores: Callable[[], SQLiteStore]
) -> None:
    model = ScriptedModel([reply(f"a{n}") for n in range(3)])
    mine = Agent(model, store=stores()).session("t1")
    expected: list[str | None] = []
    for n in range(3):
        await mine.run(f"mine{n}")
        expected += [f"mine{n}", f"a{n}"]
        seen = other_worker(tmp_path, db, f"theirs{n}", f"b{n}")
        expected += [f"theirs{n}", f"b{n}"]
        assert seen == expected[:-1]
    stored = Agent(ScriptedModel([]), store=stores()).session("t1")
    assert texts(stored.history) == expected


async def test_opening_a_session_another_process_is_running_does_not_close_its_run(
    both: Callable[[], Any],
) -> None:
    stores = both
    entered, leave = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Take a while."""
        entered.set()
        await leave.wait()
        return "slow done"

    from agentloop.testing import call

    running = Agent(
        ScriptedModel([call("slow", {}), reply("finished")]), tools=[slow], store=stores()
    ).session("t1")
    task = asyncio.create_task(running.run("go"))
    await entered.wait()

    elsewhere = Agent(ScriptedModel([reply("never")]), store=stores()).session("t1")
    assert elsewhere.runs[-1].stop_reason is None  # running there, not "crashed"
    with pytest.raises(MemoryBackendError, match="being run by another process"):
        await elsewhere.run("me too")

    leave.set()
    run = await task
    assert run.output == "finished"
    stored = Agent(ScriptedModel([]), store=stores()).session("t1")
    assert [r.output for r in stored.runs if r.stop_reason is None] == ["finished"]
    assert texts(stored.history)[:1] == ["go"] and texts(stored.history)[-1] == "finished"
    assert len(stored.history) == 4  # go, the call, its result, the answer: nothing cut


async def test_a_refused_start_writes_nothing_over_the_other_workers_history(
    both: Callable[[], Any],
) -> None:
    stores = both
    stale = Agent(ScriptedModel([reply("x")]), store=stores()).session("t1")
    await stale.run("q1")
    entered, leave = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Take a while."""
        entered.set()
        await leave.wait()
        return "slow done"

    from agentloop.testing import call

    other = Agent(
        ScriptedModel([reply("a2"), call("slow", {}), reply("a3")]), tools=[slow], store=stores()
    ).session("t1")
    await other.run("q2")
    task = asyncio.create_task(other.run("q3"))
    await entered.wait()
    with pytest.raises(MemoryBackendError, match="being run by another process"):
        await stale.run("refused")
    leave.set()
    await task
    stored = Agent(ScriptedModel([]), store=stores()).session("t1")
    assert texts(stored.history)[:4] == ["q1", "x", "q2", "a2"]
    assert texts(stored.history)[-1] == "a3"
    assert "refused" not in [r.input for r in stored.runs]


async def test_two_agents_taking_turns_on_one_session_lose_nothing_on_either_backend(
    both: Callable[[], Any],
) -> None:
    one = Agent(ScriptedModel([reply("a1"), reply("a3")]), store=both()).session("t1")
    two = Agent(ScriptedModel([reply("b2")]), store=both()).session("t1")
    await one.run("q1")
    await two.run("q2")
    await one.run("q3")
    assert texts(one.history) == ["q1", "a1", "q2", "b2", "q3", "a3"]
    stored = Agent(ScriptedModel([]), store=both()).session("t1")
    assert texts(stored.history) == texts(one.history)
