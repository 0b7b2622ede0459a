"""A run's instructions at its start (the one place they are computed for a run).

The prompt function's text (SPEC 21), the memory recall block (27), the toolsets' lines (22),
and, for a continued run whose handoff receiver paused (26), the instructions stored at the
pause. Its own module: ``instructions`` is imported by the agent's definition, and this step
reaches memory and the tool plan.
"""

from __future__ import annotations

from typing import Any

from agentloop.engine.instructions import evaluate
from agentloop.run import RunContext

__all__ = ["run_instructions"]


async def run_instructions(session: Any, state: Any) -> None:
    """A run's instructions at its start: the prompt function's text, a recall (27), skills (22).

    ``session`` is the ``Conversation``, ``state`` its ``RunState`` (untyped: they import this
    module). A continued run keeps the instructions stored at its pause (SPEC 17: a handoff
    receiver's, with the recall and skills lines they held; else the agent's evaluated text),
    also in another process whose agent has other instructions or none; memory and the tool
    plan still start (the namespace, this call's tools).
    """
    agent = session.agent
    resumed = state.resuming.system if state.resuming is not None else None
    kept = state.system if state.run.last_agent is not None else resumed
    if agent._prompt is not None and kept is None:  # a function: this run's text
        context = RunContext(run_id=state.run.id, session_id=session.id, deps=state.deps)
        text = await evaluate(agent._prompt, context)
        state.system = agent._system(text)
    if agent.memory is not None:  # long-term memory: the namespace, a recall (SPEC 27)
        from agentloop.engine import remembering

        await remembering.start(session, state)
    if state.plan is not None:  # toolsets: this call's tools, and their instructions
        await state.plan.start(state)
    if kept is not None:
        state.system = kept
        if state.appendonly is not None:
            state.appendonly.recall = None  # already in the kept text
