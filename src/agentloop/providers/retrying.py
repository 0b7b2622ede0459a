"""Retries for any ``ModelClient``: a pure retry decision and a thin loop that sleeps.

``RetryingClient(inner)`` is itself a ``ModelClient``. Whether and how long to wait after a failed
attempt is decided by ``decide(policy, state, error, jitter)``, a pure function of a frozen
``RetryState`` (tenacity-style), so the policy is unit-testable without sockets or clocks; the
async loop in ``RetryingClient`` only calls the inner client, asks ``decide`` and sleeps through
an injectable ``sleep``.

Rules (see ``docs/resilience.md``):

- Only errors whose class ``retryable`` is true are retried (``RateLimited``,
  ``ProviderUnavailable``, ``ProviderTimeout``, ``ResponseInvalid``); a ``should_retry`` hint on
  the error (the ``x-should-retry`` header) overrides the class either way.
  ``RateLimitEscalation`` and ``StreamError`` are verdicts and never retried.
- Transport failures: ``min(base_delay * 2**n, max_delay) * (1 + uniform(-jitter, jitter))``
  for the n-th (0-based) transport retry, at most ``max_retries`` of them; a ``Retry-After``
  the server sent wins over the backoff (capped at ``rate_limit_max_delay``).
- Rate limits have their own budget: wait ``min(retry_after or rate_limit_default_delay,
  rate_limit_max_delay)``; the ``rate_limit_retries + 1``-th rate limit of one request (the 4th
  by default) raises ``RateLimitEscalation(attempts, retry_after)``.
- Under a rate governor (SPEC 25, the inner client says ``waits_for_rate_limits``) a rate
  limit's retry does not sleep here: the 429 closed its key in the governor, and the next
  attempt waits there, with every other process that shares it.
- A non-retryable error costs exactly one attempt. Anything that is not a ``ProviderError``
  (cancellation included) passes through untouched and is never retried.
"""

from __future__ import annotations

import asyncio
import logging
import random as _random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import NoReturn

from agentloop._util.aio import aclose_iterator
from agentloop._util.backoff import exponential_backoff
from agentloop._util.numbers import require_number
from agentloop._util.slots import record
from agentloop.errors import (
    AttemptRecord,
    ConfigurationError,
    ProviderError,
    RateLimited,
    RateLimitEscalation,
    ResponseInvalid,
    StreamError,
)
from agentloop.messages import Message
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent, WrappedClient

__all__ = [
    "RetryDecision",
    "RetryPolicy",
    "RetryState",
    "RetryingClient",
    "decide",
    "is_retryable",
]

_log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]
Uniform = Callable[[float, float], float]


def _require_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"RetryingClient.{name} must be an int >= 0, got {value!r}")


def _require_seconds(name: str, value: object) -> None:
    require_number(value, f"RetryingClient.{name}", field=name)


@record
class RetryPolicy:
    """The numbers of the retry ladder; invalid values raise ``ConfigurationError``."""

    max_retries: int = 3
    base_delay: float = 0.1
    max_delay: float = 10.0
    jitter: float = 0.1
    rate_limit_default_delay: float = 5.0
    rate_limit_max_delay: float = 60.0
    rate_limit_retries: int = 3

    def __post_init__(self) -> None:
        _require_count("max_retries", self.max_retries)
        _require_count("rate_limit_retries", self.rate_limit_retries)
        for name in ("base_delay", "max_delay", "jitter", "rate_limit_default_delay"):
            _require_seconds(name, getattr(self, name))
        _require_seconds("rate_limit_max_delay", self.rate_limit_max_delay)
        if self.jitter > 1.0:
            raise ConfigurationError(
                f"RetryingClient.jitter must be in [0, 1], got {self.jitter!r}", field="jitter"
            )

    def backoff(self, retry_index: int, jitter_sample: float) -> float:
        """The transport wait before retry ``retry_index`` (0-based), jitter already drawn."""
        delay = exponential_backoff(retry_index, self.base_delay, self.max_delay)
        return delay * (1.0 + jitter_sample)


@record
class RetryState:
    """What the retry loop knows about one request so far."""

    attempts: int = 0
    """Attempts made (all failed, or we would not be deciding)."""
    transport_retries: int = 0
    rate_limit_retries: int = 0


@record
class RetryDecision:
    """The verdict after a failed attempt: retry after ``wait_seconds``, give up, or escalate."""

    retry: bool
    state: RetryState
    wait_seconds: float = 0.0
    escalate: bool = False
    retry_after: float | None = None


def is_retryable(error: BaseException) -> bool:
    """Whether an error is worth another attempt at all (before any budget is consulted)."""
    if not isinstance(error, ProviderError):
        return False
    if isinstance(error, RateLimitEscalation | StreamError):
        return False
    if error.should_retry is not None:
        return error.should_retry
    return type(error).retryable


def decide(
    policy: RetryPolicy, state: RetryState, error: BaseException, jitter_sample: float = 0.0
) -> RetryDecision:
    """Decide what follows a failed attempt; pure, so tests need no clock and no sleep.

    Args:
        policy: The ladder's numbers.
        state: The request's history before this failure.
        error: What the attempt raised.
        jitter_sample: A draw from ``uniform(-policy.jitter, policy.jitter)``.

    Returns:
        The decision, with the state that includes this attempt.
    """
    state = replace(state, attempts=state.attempts + 1)
    if not is_retryable(error):
        return RetryDecision(retry=False, state=state)
    assert isinstance(error, ProviderError)  # is_retryable guarantees it
    hint = None if error.retry_after is None else max(0.0, float(error.retry_after))
    if isinstance(error, RateLimited):
        clamped = None if hint is None else min(hint, policy.rate_limit_max_delay)
        if state.rate_limit_retries >= policy.rate_limit_retries:
            return RetryDecision(retry=False, state=state, escalate=True, retry_after=clamped)
        wait = min(policy.rate_limit_default_delay if hint is None else hint,
                   policy.rate_limit_max_delay)  # fmt: skip
        state = replace(state, rate_limit_retries=state.rate_limit_retries + 1)
        return RetryDecision(retry=True, state=state, wait_seconds=wait, retry_after=clamped)
    if state.transport_retries >= policy.max_retries:
        return RetryDecision(retry=False, state=state)
    if hint is not None:
        wait = min(hint, policy.rate_limit_max_delay)
    else:
        wait = policy.backoff(state.transport_retries, jitter_sample)
    state = replace(state, transport_retries=state.transport_retries + 1)
    return RetryDecision(retry=True, state=state, wait_seconds=max(0.0, wait))


@dataclass
class _Ledger:
    """The mutable bookkeeping of one request: its state and attempt log."""

    policy: RetryPolicy
    state: RetryState = field(default_factory=RetryState)
    log: list[AttemptRecord] = field(default_factory=list)

    @property
    def total_wait(self) -> float:
        return sum(record.wait_seconds for record in self.log)

    def failed(
        self,
        error: ProviderError,
        duration: float,
        jitter: float,
        allow_retry: bool,
        governed: bool = False,
    ) -> RetryDecision:
        decision = decide(self.policy, self.state, error, jitter)
        if not allow_retry and decision.retry:
            decision = replace(decision, retry=False, wait_seconds=0.0)
        elif governed and decision.retry and isinstance(error, RateLimited):
            decision = replace(decision, wait_seconds=0.0)  # the rate governor waits instead
        self.state = decision.state
        self.log.append(
            AttemptRecord(
                attempt=decision.state.attempts,
                error_type=type(error).__name__,
                status_code=error.status_code,
                phase=error.phase,
                request_sent=error.request_sent,
                duration_seconds=max(0.0, duration),
                wait_seconds=decision.wait_seconds if decision.retry else 0.0,
            )
        )
        return decision

    def stamp(self, error: ProviderError) -> ProviderError:
        """Fill the attempt fields of the error that ends the request."""
        error.attempts = self.state.attempts
        error.retry_wait_seconds = self.total_wait
        error.attempt_log = tuple(self.log)
        return error

    def verdict(self, error: ProviderError, decision: RetryDecision) -> ProviderError:
        """The error to raise when ``decision`` gives up on ``error``."""
        if not decision.escalate:
            return self.stamp(error)
        escalation = RateLimitEscalation(
            self.state.attempts,
            decision.retry_after,
            provider=error.provider,
            status_code=error.status_code,
            request_id=error.request_id,
        )
        return self.stamp(escalation)


def _partial_message(events: list[StreamEvent]) -> Message:
    """What a caller received before a stream broke: the text (incomplete calls are dropped)."""
    return Message.assistant("".join(e.text for e in events if e.kind == "text_delta"))


def _stream_error(cause: ProviderError, received: list[StreamEvent]) -> StreamError:
    """Wrap a failure that came after output reached the caller, keeping the cause's facts."""
    return StreamError(
        f"stream failed after output reached the caller: {cause.message}",
        partial=_partial_message(received),
        provider=cause.provider,
        status_code=cause.status_code,
        retry_after=cause.retry_after,
        request_id=cause.request_id,
        phase=cause.phase,
        request_sent=cause.request_sent,
        redirect_host=cause.redirect_host,
        body=cause.body,
    )


class RetryingClient(WrappedClient):
    """A ``ModelClient`` that retries its inner client's retryable failures.

    Args:
        inner: The client to wrap.
        max_retries: Transport retries per request (``0`` = none).
        base_delay: First transport backoff in seconds.
        max_delay: Cap of the transport backoff.
        jitter: Relative jitter of the transport backoff, in ``[0, 1]``.
        rate_limit_default_delay: Wait after a rate limit without ``Retry-After``.
        rate_limit_max_delay: Cap of any server-requested wait.
        rate_limit_retries: Rate-limit retries per request before ``RateLimitEscalation``.
        replay_streams: Retry a stream even after output reached the caller (an
            ``attempt_reset`` event precedes the new attempt).
        sleep: Awaitable sleep (default ``asyncio.sleep``); cancellation must propagate.
        clock: Monotonic clock for attempt durations (default ``time.monotonic``).
        random: ``uniform(a, b)`` used for jitter (default ``random.uniform``).
    """

    def __init__(
        self,
        inner: ModelClient,
        max_retries: int = 3,
        base_delay: float = 0.1,
        max_delay: float = 10.0,
        jitter: float = 0.1,
        rate_limit_default_delay: float = 5.0,
        rate_limit_max_delay: float = 60.0,
        rate_limit_retries: int = 3,
        *,
        replay_streams: bool = False,
        sleep: Sleep | None = None,
        clock: Clock | None = None,
        random: Uniform | None = None,
    ) -> None:
        self.policy = RetryPolicy(
            max_retries=max_retries,
            base_delay=base_delay,
            max_delay=max_delay,
            jitter=jitter,
            rate_limit_default_delay=rate_limit_default_delay,
            rate_limit_max_delay=rate_limit_max_delay,
            rate_limit_retries=rate_limit_retries,
        )
        super().__init__(inner)
        self.replay_streams = replay_streams
        self._sleep: Sleep = sleep or asyncio.sleep
        self._clock: Clock = clock or time.monotonic
        self._uniform: Uniform = random or _random.uniform

    def __repr__(self) -> str:
        return f"RetryingClient({self.inner!r}, {self.policy!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request``, retrying retryable failures; the final error carries the log."""
        ledger = _Ledger(self.policy)
        while True:
            started = self._clock()
            try:
                return await self.inner.complete(request)
            except ProviderError as error:
                decision = self._after_failure(ledger, request, error, started)
                if not decision.retry:
                    verdict = ledger.verdict(error, decision)
                    if verdict is error:
                        raise
                    raise verdict from error
            await self._sleep(decision.wait_seconds)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream ``request``; retries attempts that failed before output reached the caller.

        Yields:
            The inner client's events; ``attempt_reset`` before a replayed attempt.

        Raises:
            StreamError: A failure after output reached the caller (without ``replay_streams``).
        """
        ledger = _Ledger(self.policy)
        received: list[StreamEvent] = []
        while True:
            started = self._clock()
            failure: ProviderError | None = None
            async with aclosing(self._attempt(request)) as attempt:
                async for item in attempt:
                    if isinstance(item, ProviderError):
                        failure = item
                        break
                    if item.kind != "attempt_reset":
                        received.append(item)
                    yield item
                    if item.kind == "done":
                        return
            assert failure is not None  # an attempt ends with done or a failure
            allow = not received or self.replay_streams
            decision = self._after_failure(ledger, request, failure, started, allow)
            if not decision.retry:
                _raise_stream_verdict(ledger, decision, failure, received)
            await self._sleep(decision.wait_seconds)
            if received:
                received.clear()
                yield StreamEvent(kind="attempt_reset")

    async def _attempt(
        self, request: ModelRequest
    ) -> AsyncGenerator[StreamEvent | ProviderError, None]:
        """One streaming attempt: its events, then a ``ProviderError`` if it did not finish."""
        iterator = self.inner.stream(request)
        count = 0
        try:
            while True:
                try:
                    event = await anext(iterator)
                except StopAsyncIteration:
                    break
                except ProviderError as error:
                    yield error
                    return
                count += 1
                yield event
                if event.kind == "done":
                    return
        finally:
            await aclose_iterator(iterator)
        yield ResponseInvalid(
            f"stream ended without a terminal event after {count} events (truncated?)",
            provider=self.inner.provider,
            phase="body",
            request_sent=True,
        )

    def _after_failure(
        self,
        ledger: _Ledger,
        request: ModelRequest,
        error: ProviderError,
        started: float,
        allow_retry: bool = True,
    ) -> RetryDecision:
        """Record a failed attempt, decide, and report a retry to the request's listeners."""
        jitter = self._uniform(-self.policy.jitter, self.policy.jitter)
        governed = getattr(self.inner, "waits_for_rate_limits", False) is True
        decision = ledger.failed(error, self._clock() - started, jitter, allow_retry, governed)
        if decision.retry:
            _log.info(
                "retrying %s after %s (attempt %d, status %s): waiting %.3fs",
                self.inner.model,
                type(error).__name__,
                decision.state.attempts,
                error.status_code,
                decision.wait_seconds,
            )
            _notify_retry(request, error, decision)
        return decision


def _raise_stream_verdict(
    ledger: _Ledger, decision: RetryDecision, failure: ProviderError, received: list[StreamEvent]
) -> NoReturn:
    """Raise what ends a stream: the error, an escalation, or ``StreamError`` after output."""
    verdict = ledger.verdict(failure, decision)
    if received and not isinstance(verdict, StreamError):
        verdict = ledger.stamp(_stream_error(verdict, received))
    if verdict is failure:
        raise failure
    raise verdict from failure


def _notify_retry(request: ModelRequest, error: ProviderError, decision: RetryDecision) -> None:
    """Report a retry through ``request.events``; a listener that raises is logged and ignored."""
    if request.events is None:
        return
    try:
        request.events.on_retry(error, decision.state.attempts, decision.wait_seconds)
    except Exception:  # an observer must never break the request
        _log.exception("on_retry listener raised; ignored")
