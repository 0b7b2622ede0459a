"""``GovernedClient``: the rate governor between a client's wrappers and its HTTP adapter.

``govern(client, governor)`` rebuilds a client tree with a ``GovernedClient`` right above each
adapter (below ``RetryingClient`` and ``FallbackClient``, copied, never mutated), so every HTTP
request passes the governor: first attempts, retries and each fallback model's requests. A 429
closes the request's keys for every process sharing the governor (for its ``Retry-After``, else
the ``RetryingClient``'s ``rate_limit_default_delay``); the ``RetryingClient`` above sees
``waits_for_rate_limits`` and does not sleep beside it: its next attempt waits in the governor
(for a model a limit counts; another model's 429 is waited out by the ``RetryingClient``).
A cassette's replay (SPEC 23) sends nothing, so it neither waits nor asks the backend. A
backend lost while a request was at the provider fails nothing that was sent: the reply (or the
request's own error) is what the run reads, and the lease expires by itself (WARNING).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from agentloop.config import RunConfig
from agentloop.errors import GovernorUnavailable, RateLimited, RateLimitEscalation
from agentloop.fleet._governor import DEFAULT_LEASE_SECONDS
from agentloop.messages import Usage
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent, WrappedClient
from agentloop.providers._tape import TAPE
from agentloop.tokens import HeuristicTokenCounter, TokenCounter

if TYPE_CHECKING:
    from agentloop.fleet._governor import GovernedRun, Lease, RateGovernor

__all__ = ["GovernedClient", "estimate_tokens", "govern", "govern_helpers", "governor_of"]

logger = logging.getLogger("agentloop")

_DEFAULT_DELAY = 5.0
_MAX_DELAY = 60.0


def estimate_tokens(request: ModelRequest, counter: TokenCounter) -> int:
    """A request's tokens before it is sent: its input by ``counter``, plus ``max_tokens``."""
    total = counter.count_text(request.system) if request.system else 0
    total += sum(counter.count_message(m) for m in request.messages)
    if request.tools:
        specs = [(t.name, t.description, t.parameters) for t in request.tools]
        total += counter.count_text(json.dumps(specs, default=str))
    return total + (request.settings.max_tokens or 0)


class GovernedClient(WrappedClient):
    """A ``ModelClient`` whose every request first waits for ``governor``.

    Args:
        inner: The adapter (or any client) to govern.
        governor: The shared ``RateGovernor``.
        token_counter: Counts a request's input for the ``tpm`` estimate.
        lease_seconds: An in-flight slot's life (the adapter's timeout + connect timeout).
        rate_limit_default_delay: How long a 429 without ``Retry-After`` closes its keys.
        rate_limit_max_delay: The cap of that closing.
    """

    @property
    def waits_for_rate_limits(self) -> bool:
        """``RetryingClient`` reads this: a rate limit's wait happens here, not in its sleep.

        Only for a model a limit counts: a 429 of another model closes no key here, so its
        retry must wait in ``RetryingClient`` as without a governor.
        """
        return bool(self.governor.matching(self.inner.provider, self.inner.model))

    def __init__(
        self,
        inner: ModelClient,
        governor: RateGovernor,
        *,
        token_counter: TokenCounter | None = None,
        lease_seconds: float | None = None,
        rate_limit_default_delay: float = _DEFAULT_DELAY,
        rate_limit_max_delay: float = _MAX_DELAY,
    ) -> None:
        super().__init__(inner)
        self.governor = governor
        self.counter = token_counter or HeuristicTokenCounter()
        self.lease_seconds = lease_seconds or _lease_seconds(inner) or DEFAULT_LEASE_SECONDS
        self.default_delay = rate_limit_default_delay
        self.max_delay = rate_limit_max_delay

    def __repr__(self) -> str:
        return f"GovernedClient({self.inner!r}, {self.governor!r})"

    async def _acquire(self, request: ModelRequest) -> Lease | None:
        if _replaying():  # a cassette answers: nothing reaches the provider (SPEC 23)
            return None
        warm = getattr(self.inner, "warm", None)
        if callable(warm):  # an HTTP adapter: its pool opens now, not between admission and send
            await warm()
        run = request.events if hasattr(request.events, "wall_clock") else None
        return await self.governor.acquire(
            self.inner.provider,
            request.model or self.inner.model,
            lambda: estimate_tokens(request, self.counter),
            run=cast("GovernedRun | None", run),
            lease_seconds=self.lease_seconds,
        )

    async def _failed(self, lease: Lease, error: BaseException) -> None:
        try:
            if isinstance(error, RateLimited) and not isinstance(error, RateLimitEscalation):
                wait = error.retry_after if error.retry_after is not None else self.default_delay
                await lease.rate_limited(min(max(wait, 0.0), self.max_delay))
            else:
                await lease.settle()
        except GovernorUnavailable as lost:  # the request's own error is what the run reads
            _unrecorded(lost)

    @staticmethod
    async def _settle(lease: Lease, usage: Usage | None) -> None:
        """End a sent request's lease; a backend lost meanwhile never costs the reply."""
        try:
            await lease.settle(usage)
        except GovernorUnavailable as lost:
            _unrecorded(lost)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Wait for the governor, send, then settle the lease with the reported usage."""
        lease = await self._acquire(request)
        if lease is None:
            return await self.inner.complete(request)
        try:
            response = await self.inner.complete(request)
        except BaseException as error:
            await self._failed(lease, error)
            raise
        await self._settle(lease, response.usage)
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Wait for the governor, stream, then settle with the final usage."""
        lease = await self._acquire(request)
        iterator = self.inner.stream(request)
        if lease is None:
            async for event in iterator:
                yield event
            return
        usage = None
        try:
            async for event in iterator:
                if event.response is not None:
                    usage = event.response.usage
                yield event
        except BaseException as error:
            await self._failed(lease, error)
            raise
        await self._settle(lease, usage)


def govern(
    client: ModelClient,
    governor: RateGovernor,
    counter: TokenCounter | None = None,
    *,
    delays: tuple[float, float] = (_DEFAULT_DELAY, _MAX_DELAY),
) -> ModelClient:
    """``client`` with a ``GovernedClient`` above each adapter (wrappers copied, not mutated)."""
    if isinstance(client, GovernedClient):
        return client
    policy = getattr(client, "policy", None)
    if hasattr(policy, "rate_limit_default_delay"):
        delays = (policy.rate_limit_default_delay, policy.rate_limit_max_delay)  # type: ignore[union-attr]
    if isinstance(client, WrappedClient):
        wrapper = copy.copy(client)
        wrapper.inner = govern(client.inner, governor, counter, delays=delays)
        return cast(ModelClient, wrapper)
    clients = getattr(client, "clients", None)
    if isinstance(clients, tuple) and all(isinstance(c, ModelClient) for c in clients):
        chain = copy.copy(client)
        governed = tuple(govern(c, governor, counter, delays=delays) for c in clients)
        cast(Any, chain).clients = governed
        return chain
    return GovernedClient(
        client,
        governor,
        token_counter=counter,
        rate_limit_default_delay=delays[0],
        rate_limit_max_delay=delays[1],
    )


def _unrecorded(error: GovernorUnavailable) -> None:
    """A sent request's end could not be recorded: logged; its lease expires by itself."""
    logger.warning(
        "the rate governor could not record the end of a sent request (%s); its in-flight "
        "slot frees when its lease expires",
        error,
    )


def _replaying() -> bool:
    """Whether a cassette replays this block's requests (no socket opens, nothing is counted)."""
    tape = TAPE.get()
    return tape is not None and getattr(getattr(tape, "cassette", None), "recording", True) is False


def _lease_seconds(client: ModelClient) -> float | None:
    """An adapter's read timeout + connect timeout, if it says (else the governor's default)."""
    transport = getattr(client, "_transport", None)
    read, connect = getattr(transport, "_timeout", None), getattr(transport, "_connect_timeout", 0)
    if isinstance(read, int | float) and isinstance(connect, int | float):
        return float(read + connect)
    return None


def govern_helpers(config: RunConfig, governor: RateGovernor) -> RunConfig:
    """``config`` whose compactor and reflector send their model requests through ``governor``.

    A ``SummarizingCompactor`` or ``LLMReflector`` (or any compactor or reflector with a
    ``client``) is usually built with the agent's own client, which the agent governs as a
    copy: without this its summaries and analyses would reach the provider around the
    fleet's limits. Each gets a shallow copy holding the governed client (the application's
    object is not mutated); the governor counts only the models its limits name, so a helper
    on another provider is not held back. ``config`` itself when neither has a client.
    """
    counter = config.token_counter
    changes: dict[str, Any] = {}
    for field in ("compactor", "reflector"):
        helper = getattr(config, field)
        client = getattr(helper, "client", None)
        if not isinstance(client, ModelClient) or isinstance(client, GovernedClient):
            continue
        twin = copy.copy(helper)
        try:
            object.__setattr__(twin, "client", govern(client, governor, counter))
        except (AttributeError, TypeError):  # a client it does not let us set: left as it is
            continue
        changes[field] = twin
    return dataclasses.replace(config, **changes) if changes else config


def governor_of(client: object) -> RateGovernor | None:
    """The governor of the first ``GovernedClient`` in ``client``'s wrappers or chain, or None."""
    if isinstance(client, GovernedClient):
        return client.governor
    inner = getattr(client, "inner", None)
    if inner is not None and (found := governor_of(inner)) is not None:
        return found
    chain = getattr(client, "clients", None)
    if isinstance(chain, tuple):
        return next((g for c in chain if (g := governor_of(c)) is not None), None)
    return None
