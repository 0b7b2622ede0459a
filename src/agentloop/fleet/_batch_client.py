"""A batch run's client (SPEC 25): each model call submitted to the provider's batch API.

``BatchClient`` wraps the client of a run with ``RunConfig(batch=True)``: the model call builds
its request as always, then submits it (``custom_id`` ``<run id>_<turn>_<attempt>``) and raises
``agentloop.batching.Waiting`` with the ``BatchWait``; the engine stores the run waiting
(``agentloop.engine.batching``). Within ``start_many`` or ``poll`` (``COLLECTOR`` set) the
requests of all runs of the pass wait for each other and go as one batch per client and model
(``Collector``). A failed request reaches its run as an order (``ORDERS``): raise this error, or
submit the turn again as attempt ``n``. ``check_agent`` refuses, at construction, what cannot
run in batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from agentloop.batching import BatchWait, Waiting
from agentloop.errors import AgentLoopError, ConfigurationError
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent, WrappedClient

__all__ = ["COLLECTOR", "ORDERS", "BatchClient", "Collector", "check_agent", "governed_submit"]

_T = TypeVar("_T")

ORDERS: ContextVar[dict[str, AgentLoopError | int] | None] = ContextVar(
    "agentloop_batch_orders", default=None
)
"""Per run id: the error its failed request stands for, or the attempt to submit again."""


class Collector:
    """One pass's requests (``start_many``, ``poll``): one batch per client and model.

    ``expected`` runs are driven together; each either submits a request (``add``) or ends
    without one (``done``). When none is still on its way, the requests go, grouped.
    """

    def __init__(self, expected: int) -> None:
        self.outstanding = expected
        self.items: list[tuple[Any, str, ModelRequest, asyncio.Future[BatchWait]]] = []
        self.governed: dict[int, Any] = {}

    async def add(
        self, client: Any, custom_id: str, request: ModelRequest, governed: Any = None
    ) -> BatchWait:
        """Queue one request; its ``BatchWait`` once the pass's batches are submitted.

        ``governed``: the run's ``GovernedClient`` (or None): a batch passes it once, when it
        is submitted, never while a run waits for the others of its pass.
        """
        future: asyncio.Future[BatchWait] = asyncio.get_running_loop().create_future()
        self.items.append((client, custom_id, request, future))
        if governed is not None:
            self.governed.setdefault(id(client), governed)
        self.outstanding -= 1
        if self.outstanding <= 0:
            await self._flush()
        return await future

    async def done(self) -> None:
        """A run of the pass ended without submitting."""
        self.outstanding -= 1
        if self.outstanding <= 0 and self.items:
            await self._flush()

    async def _flush(self) -> None:
        from agentloop.fleet._batch_wire import submit

        items, self.items = self.items, []
        groups: dict[tuple[int, str], list[Any]] = {}
        for item in items:
            groups.setdefault((id(item[0]), item[2].model or item[0].model), []).append(item)
        for group in groups.values():
            # the pass's one submission: no run's own wall clock, cancel or events decide it
            client, first = group[0][0], replace(group[0][2], events=None)
            batch = [(c, r) for _, c, r, _ in group]
            try:
                governed = self.governed.get(id(client))
                sent = await governed_submit(governed, first, partial(submit, client, batch))
            except BaseException as error:
                for *_, future in group:
                    future.set_exception(error)
                continue
            for _, custom_id, _, future in group:
                wait = BatchWait(sent.provider, sent.batch_id, custom_id, sent.submitted_at)
                future.set_result(wait)


COLLECTOR: ContextVar[Collector | None] = ContextVar("agentloop_batch_collector", default=None)


class BatchClient(WrappedClient):
    """The client of a batch run: each model call is submitted to the provider's batch API."""

    def __init__(self, inner: ModelClient, state: Any, recorder: object) -> None:
        """Wrap ``inner`` for the run of ``state``; ``ConfigurationError`` without a store."""
        if recorder is None:
            raise ConfigurationError(
                "a batch run (RunConfig(batch=True)) waits in the store: give the agent one, "
                "Agent(..., store=SQLiteStore(path))"
            )
        super().__init__(inner)
        self._state = state

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Submit ``request`` and raise ``Waiting`` (or raise the error a failed one stands for)."""
        from agentloop.fleet._batch_wire import batch_client

        state = self._state
        orders = ORDERS.get()
        order = orders.pop(state.run.id, 0) if orders is not None else 0
        if isinstance(order, AgentLoopError):
            raise order
        client = batch_client(self.inner)
        custom_id = f"{state.run.id}_{state.turn_index}_{order}"
        governed = _governed(self.inner)  # a batch submission waits for the governor too
        raise Waiting(await self._submit(client, custom_id, request, governed))

    @staticmethod
    async def _submit(client: Any, custom_id: str, request: ModelRequest, governed: Any
                      ) -> BatchWait:  # fmt: skip
        from agentloop.fleet._batch_wire import submit

        collector = COLLECTOR.get()
        if collector is not None:  # the pass's batch passes the governor when it is sent
            return await collector.add(client, custom_id, request, governed)
        items = [(custom_id, request)]
        sent = await governed_submit(governed, request, partial(submit, client, items))
        return BatchWait(sent.provider, sent.batch_id, custom_id, sent.submitted_at)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """As ``complete``: a batch reply arrives whole (a face that streams gets no deltas)."""
        await self.complete(request)
        yield StreamEvent("done")  # pragma: no cover (complete raised)


async def governed_submit(
    governed: Any, request: ModelRequest, submitting: Callable[[], Awaitable[_T]]
) -> _T:
    """``submitting()`` once ``governed`` (a ``GovernedClient``, or None) admits ``request``."""
    lease = await governed._acquire(request) if governed is not None else None
    try:
        result = await submitting()
    except BaseException as error:
        if lease is not None:
            await governed._failed(lease, error)
        raise
    if lease is not None:
        await governed._settle(lease, None)
    return result


def check_agent(agent: Any) -> None:
    """``ConfigurationError`` before anything is sent: a batch agent's client, stream, handoffs.

    Checked at construction for the agent and every agent it hands off to (SPEC 26).
    """
    from agentloop.fleet._batch_wire import batch_client

    seen: set[int] = set()
    todo = [agent]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if current.config.stream:
            raise ConfigurationError(
                "RunConfig(batch=True) with stream=True: a batch turn's reply arrives whole "
                "(set stream=False)"
            )
        batch_client(current.client)
        todo.extend(getattr(h, "agent", None) for h in current._handoffs if hasattr(h, "agent"))


def _governed(client: Any) -> Any:
    """The ``GovernedClient`` in ``client``'s wrappers (an agent with a governor), or None."""
    from agentloop.fleet._client import GovernedClient

    current = client
    while current is not None and not isinstance(current, GovernedClient):
        current = getattr(current, "inner", None)
    return current
