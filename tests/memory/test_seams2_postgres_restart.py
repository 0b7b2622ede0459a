"""PostgreSQL stores outlive a lost connection (SPEC 9, SPEC 27 on PostgreSQL).

A database restart, a failover or an idle-connection reaper ends the server side of a store's
connection. The request in flight then fails typed (``MemoryBackendError``); the next one must
work again. Before, ``PostgresStore`` and ``PostgresMemoryStore`` kept the dead connection:
every later run of the app ended ``MemoryBackendError: ... the connection is lost`` until the
process was restarted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("psycopg", reason="PostgreSQL stores need psycopg 3")

import psycopg

from agentloop import Agent
from agentloop.errors import MemoryBackendError
from agentloop.memory import Memory, PostgresMemoryStore
from agentloop.store import PostgresStore
from agentloop.testing import ScriptedModel, call, reply


def _reaped(dsn: str, *conns: psycopg.Connection) -> None:
    """End the server side of ``conns`` as a restart would (``pg_terminate_backend``)."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        for conn in conns:
            admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))


@pytest.fixture
def stores(memory_postgres_dsn: str) -> Iterator[tuple[PostgresStore, PostgresMemoryStore]]:
    runs, memory = PostgresStore(memory_postgres_dsn), PostgresMemoryStore(memory_postgres_dsn)
    yield runs, memory
    runs.close()
    memory._close()


async def test_a_memory_store_reconnects_after_its_connection_is_lost(
    memory_postgres_dsn: str, stores: tuple[PostgresStore, PostgresMemoryStore]
) -> None:
    memory = stores[1]
    await memory.put(("u1",), "the customer prefers email", id="pref")
    _reaped(memory_postgres_dsn, memory._conn)
    with pytest.raises(MemoryBackendError):
        await memory.search(("u1",), "email")  # the request in flight when it was lost
    assert [i.id for i in await memory.search(("u1",), "email")] == ["pref"]


async def test_an_agent_on_postgres_serves_again_after_a_restart(
    memory_postgres_dsn: str, stores: tuple[PostgresStore, PostgresMemoryStore]
) -> None:
    runs, memory = stores
    steps = [call("remember", {"text": "likes tea"}), reply("noted"), *[reply("hi")] * 3]
    agent = Agent(
        ScriptedModel(steps),
        store=runs,
        memory=Memory(memory, namespace=lambda ctx: ("u2",), auto_recall=3),
    )
    assert (await agent.run("remember I like tea")).output == "noted"
    _reaped(memory_postgres_dsn, runs._conn, memory._conn)
    failed = 0
    while True:  # each store's request in flight when it was lost fails typed, then it serves
        try:
            run = await agent.run("hello")
            break
        except MemoryBackendError:
            failed += 1
            assert failed <= 2, "a store never reconnected"
    assert run.output == "hi"
    assert runs.load_run(run.id) is not None
    assert [i.text for i in await memory.search(("u2",), "tea")] == ["likes tea"]
