"""The tables both SQL stores share: their DDL, their version, and what each column holds.

Every payload is a JSON text column (plain text, not JSONB, so both backends keep exactly the
bytes ``json.dumps`` wrote, NaN included):

- ``agentloop_history(session_id, seq, message)``: the committed history, one row per message;
  a finalize appends rows, a compaction commit rewrites the session's rows.
- ``agentloop_runs(seq, run_id, session_id, input, started_at, ended_at, absorbed, record)``: one
  row per run, inserted at run start; ``record`` (``Run.to_dict``) is NULL until its finalize.
- ``agentloop_turns(run_id, number, turn, messages)``: append-only, one row per completed turn
  while the run has no recorded end (what a crash leaves to resume from); deleted at finalize.

Schema 2 (``SCHEMA_VERSION``) adds, without touching the tables above (a schema-1 store opens and
is upgraded in place; a store whose recorded version is newer is refused):

- ``agentloop_meta(key, value)``: ``schema_version``.
- ``agentloop_sessions(session_id, safety, lease_owner, lease_until)``: the safety state as of
  the last commit point, and the lease of the process running the session (one at a time).
- ``agentloop_steps(session_id, run_id, key, value)``: the step journal of runs in flight (each
  model reply and each tool call's output, keyed by what asked for it), so a continued run
  repeats none of them; a session's next run start deletes its older runs' steps.
- ``agentloop_resumptions(run_id, at, from_turn)``: each time ``continue_run`` picked a run up.

Schema 3 adds three columns to ``agentloop_runs`` (``_status``; a schema-2 or schema-1 store is
upgraded in place, the columns back-filled from the stored records in the same transaction):

- ``status``: ``running`` (no recorded end), ``waiting`` (a batch run's turn in a provider
  batch), ``paused`` (pending calls), ``completed`` or ``failed`` (a ``stop_reason``; a
  cancelled run is ``failed`` with ``Cancelled``), written by the statements that already write
  the run (run start, finalize, a reopen); indexed with ``seq`` so a status page is one keyset
  query and ``agentloop batch poll`` finds the waiting runs in one.
- ``batch_id``, ``request_id``: a waiting run's ``BatchWait`` ids (NULL otherwise).

Everything else SPEC 9's schema 3 names is part of the run record (``Run.to_dict``) and read
only with its run: loaded tools (``loaded_tools``), the active agent (``last_agent``, and each
turn's ``agent``: the handoffs), memory (``memory``: the namespace, staged and committed writes);
the claim of a batch result is the session's lease (``agentloop_sessions``) and the result
journaled as the turn's reply (``agentloop_steps``) before it is applied.
"""

from __future__ import annotations

__all__ = ["RUN_COLUMNS", "SCHEMA_VERSION", "schema"]

SCHEMA_VERSION = 3
"""The store layout this agentloop writes; a store recorded with a newer one is refused."""

RUN_COLUMNS = "run_id, session_id, input, started_at, ended_at, absorbed, record"
"""The columns of ``agentloop_runs`` a run is written and read with, in this order."""


def schema(*, seq: str, real: str) -> tuple[str, ...]:
    """The DDL both stores share; ``seq`` and ``real`` are the dialect's column types."""
    return (
        """CREATE TABLE IF NOT EXISTS agentloop_sessions (
        session_id TEXT PRIMARY KEY,
        safety TEXT,
        lease_owner TEXT,
        lease_until REAL
    )""".replace("REAL", real),
        """CREATE TABLE IF NOT EXISTS agentloop_steps (
        session_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (run_id, key)
    )""",
        "CREATE INDEX IF NOT EXISTS agentloop_steps_session ON agentloop_steps (session_id)",
        f"""CREATE TABLE IF NOT EXISTS agentloop_resumptions (
        run_id TEXT NOT NULL,
        at {real} NOT NULL,
        from_turn INTEGER NOT NULL
    )""",
        "CREATE INDEX IF NOT EXISTS agentloop_resumptions_run ON agentloop_resumptions (run_id)",
        f"""CREATE TABLE IF NOT EXISTS agentloop_runs (
        seq {seq},
        run_id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        input TEXT NOT NULL,
        started_at {real},
        ended_at {real},
        absorbed INTEGER NOT NULL DEFAULT 0,
        record TEXT
    )""",
        "CREATE INDEX IF NOT EXISTS agentloop_runs_session ON agentloop_runs (session_id, seq)",
        """CREATE TABLE IF NOT EXISTS agentloop_turns (
        run_id TEXT NOT NULL,
        number INTEGER NOT NULL,
        turn TEXT NOT NULL,
        messages TEXT NOT NULL,
        PRIMARY KEY (run_id, number)
    )""",
        """CREATE TABLE IF NOT EXISTS agentloop_history (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        message TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    )
