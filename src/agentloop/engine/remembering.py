"""A run's long-term memory (SPEC 27): its namespace and recall at the start, its writes at the end.

A run without memory never reaches this module's functions, nor loads ``agentloop.memory``.

**Start** (``start``, before the first request; a continued run reuses what its record holds).
The namespace function is called once with the run's context; raising, or returning a bad
namespace, ends the run with ``ConfigurationError`` before any request. With ``auto_recall=k``
the run's input is searched and the hits, most relevant first, become the recall block,
``Memories from earlier conversations:`` then ``- [<id>] <text>`` lines, the least relevant
dropped until it fits ``recall_tokens`` by the agent's ``TokenCounter``. The block joins the
run's instructions (the one per-run computation of the system prompt, so the context guard
counts it in the window estimate, and it is never a message, so never committed). On an
append-only conversation (SPEC 28) it joins them only after the conversation's base is read
(``AppendOnly.open``), so the base never holds a recall: SPEC 28's per-call step then appends
the instructions with this run's block as an entry after the run's input, committed with the
run's turns;
``MemoryRecalled(ids)`` follows ``RunStarted``. A store failure here is ``MemoryBackendError``:
the run ends before any request (fail closed).

**End** (``finish``, inside finalize, after the history is committed). The staged writes of
exactly the turns the history committed are applied in one transaction: success → all; the
cannot-fit family → none; another error or a cancel → those of completed turns; a pause → the
completed turns' now, the paused turn's kept staged on the run until ``continue_run`` completes
it. ``MemoryCommitted(written, deleted, dropped)`` precedes ``RunFinished``. A failed apply makes
``stop_reason`` a ``MemoryBackendError`` (the output and the committed history stay).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloop._util.lazy import lazy_module
from agentloop.errors import AgentLoopError, MemoryBackendError
from agentloop.run import RunContext

if TYPE_CHECKING:
    from agentloop import events as ev
    from agentloop.engine.conversation import Conversation
    from agentloop.engine.journal import Journal
    from agentloop.engine.state import RunState
    from agentloop.memory._capability import Memory
    from agentloop.memory._run import MemoryRun
    from agentloop.tokens import TokenCounter
else:  # the event classes load when somebody first listens
    ev = lazy_module("agentloop.events")

__all__ = ["RECALL_HEADER", "finish", "recall_block", "start"]

RECALL_HEADER = "Memories from earlier conversations:"
JOURNAL_KEY = "memory"
"""The journal entry holding a run's memory record (namespace, recall, staged writes)."""


async def start(session: Conversation[Any], state: RunState) -> None:
    """The run's namespace and recall block (stored on the run: continuations reuse them)."""
    from agentloop.memory._capability import call_namespace  # an agent with memory only
    from agentloop.memory._run import MemoryRun

    memory = session.agent.memory
    assert memory is not None
    run, journal = state.run, session._journal
    record = run.memory if journal is None else _journaled(journal, state)
    if record is None:
        context = RunContext(run_id=run.id, session_id=session.id, deps=state.deps)
        namespace = await call_namespace(memory, context)
        record = {"namespace": list(namespace), "staged": []}
    run.memory = record
    keep = None if journal is None else (lambda r: journal.record(JOURNAL_KEY, dict(r)))
    mem = memory.runs[run.id] = MemoryRun(memory.store, record, keep)
    if memory.auto_recall and "block" not in record:
        counter = session.agent.config.token_counter
        text = state.transcript[state.base].text if len(state.transcript) > state.base else ""
        record["recalled"], record["block"] = await recall_block(mem, memory, counter, text)
    block = record.get("block")
    if block and state.appendonly is not None:  # SPEC 27/28: an entry after the input, not the base
        state.appendonly.recall = block
    elif block:
        state.system = f"{state.system}\n\n{block}" if state.system else block
    if memory.auto_recall and session._bus.active:
        session._bus.emit(ev.MemoryRecalled(run.id, 0, ids=tuple(record.get("recalled", ()))))
    if keep is not None:
        keep(record)


def _journaled(journal: Journal, state: RunState) -> dict[str, Any] | None:
    """The run's memory record: its own, or the journal's when a crashed run is continued.

    Writes staged in the turn being re-run are dropped: that turn runs its memory calls again.
    """
    run = state.run
    if journal.run_id != run.id:
        journal.start(run.id)
    if run.memory is not None:
        return run.memory
    found = journal.entries.get(JOURNAL_KEY)
    if not isinstance(found, dict):
        return None
    record = dict(found)
    record["staged"] = [e for e in record.get("staged", ()) if e["turn"] < state.turn_index]
    return record


async def recall_block(
    mem: MemoryRun, memory: Memory, counter: TokenCounter, text: str
) -> tuple[list[str], str]:
    """The ids and text of the recall block for ``text`` ("" when nothing fits or matches)."""
    try:
        items = await mem.store.search(mem.namespace, text, k=memory.auto_recall) if text else []
    except MemoryBackendError:
        raise
    except AgentLoopError as exc:  # a query the store refuses is no recall, never a crash
        raise MemoryBackendError(f"auto recall failed: {exc}") from exc
    while items:
        lines = [RECALL_HEADER, *(f"- [{i.id}] {i.text}" for i in items)]
        block = "\n".join(lines)
        if counter.count_text(block) <= memory.recall_tokens:
            return [i.id for i in items], block
        items = items[:-1]
    return [], ""


async def finish(
    session: Conversation[Any], state: RunState, error: AgentLoopError | None, paused: bool
) -> AgentLoopError | None:
    """Apply the writes of the committed turns; the run's new stop reason if the apply failed."""
    memory = session.agent.memory
    assert memory is not None
    run = state.run
    mem = memory.runs.pop(run.id, None)
    if mem is None:
        return error
    before: int | None = None if error is None and not paused else state.turn_index
    if error is not None and _cannot_fit(error):
        mem.keep_only(())
        return error
    try:
        applied = await mem.commit(before, memory.max_items)
    except MemoryBackendError as failed:
        run.stop_reason = failed
        return failed
    mem.keep_only((state.turn_index,) if paused else ())
    bus = session._bus
    if bus.active:
        bus.emit(
            ev.MemoryCommitted(
                run.id,
                state.turn_index,
                written=applied.written,
                deleted=applied.deleted,
                dropped=applied.dropped,
            )
        )
    return error


def _cannot_fit(error: AgentLoopError) -> bool:
    from agentloop.errors import CompactionStalled, ContextExceeded, ContextLengthExceeded

    return isinstance(error, ContextExceeded | CompactionStalled | ContextLengthExceeded)
