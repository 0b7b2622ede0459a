"""Cancelling a stored paused or waiting run from any process (``agentloop runs cancel ID``).

The run's session is restored from the store (``agent.session(id)``, as ``Agent.resume`` does)
on an agent whose client is never asked anything (``_NoModel``: a cancel sends no request and
runs no tool), then ``session.cancel_run()`` ends it (``agentloop.engine.cancelling``): the same
finalize, record, history and lease as a cancel in the process that paused it. The application's
hooks and observers are not there; the application calls ``cancel_run()`` itself when they must
see the cancel.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, NoReturn

from agentloop.errors import InvalidInput

if TYPE_CHECKING:
    from agentloop.model import ModelRequest, ModelResponse, StreamEvent
    from agentloop.run import Run
    from agentloop.store import Store

__all__ = ["cancel_stored"]


class _NoModel:
    """The client of an agent that only cancels stored runs: it is never asked anything."""

    def __init__(self, model: str) -> None:
        self.provider, self.model = "none", model

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Never called: cancelling asks no model."""
        _refuse()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Never called: cancelling asks no model."""
        _refuse()
        yield  # an async generator, as the protocol has it

    async def aclose(self) -> None:
        """Nothing to release."""


def _refuse() -> NoReturn:
    raise InvalidInput("this agent only cancels stored runs: it has no model client")


async def cancel_stored(store: Store, run_id: str) -> Run[Any]:
    """Cancel the stored paused or waiting run ``run_id`` from any process (the CLI's path).

    Raises:
        InvalidInput: No such run, or it is not paused or waiting (its status says why).
        MemoryBackendError: Another live process is running or deciding its session.
    """
    from agentloop.engine.agent import Agent

    stored = store.load_run(run_id)
    if stored is None:
        raise InvalidInput(f"no stored run {run_id!r}")
    run = stored.run
    if not (run.pending or run.waiting is not None):
        raise InvalidInput(
            f"run {run.id} is not paused or waiting (it ended {_ending(run)}): "
            "runs cancel ends a paused or waiting run"
        )
    agent: Agent[Any] = Agent(_NoModel(run.turns[-1].model if run.turns else "none"), store=store)
    session = agent.session(stored.session_id)
    try:
        if session.current_run is None or session.current_run.id != run.id:
            raise InvalidInput(f"run {run.id} is not its session's last run: nothing to cancel")
        return await session.cancel_run()
    finally:
        await agent.aclose()


def _ending(run: Run[Any]) -> str:
    error = run.stop_reason
    return "completed" if error is None else f"with {type(error).__name__}"
