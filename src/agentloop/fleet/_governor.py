"""``RateGovernor``: one set of rate limits for every process that shares its backend.

A request asks ``acquire`` before it is sent. The governor finds the limits it counts against
(its provider's, and its model's), queues it FIFO behind the earlier waiters of those keys (one
waiter per key set and process asks the backend; the others wait on a local lock, also FIFO),
and sleeps, on the injected clock, until every line has room. Then it returns a ``Lease``: the
request goes out, and ``settle`` (its reply's usage replaces the estimate; its in-flight slot
frees) or ``rate_limited`` (a 429 closes the keys for every process, then settles) ends it.

Fail closed: a backend that cannot be read or written is ``GovernorUnavailable`` and the request
is never sent. A wait longer than the run's remaining wall clock is ``BudgetExhausted`` at once.
Each wait is announced to the run (``RateLimitWait``) before it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from agentloop.clock import SYSTEM_CLOCK, Clock
from agentloop.errors import BudgetExhausted, ConfigurationError, GovernorUnavailable
from agentloop.fleet._backends import Ask, Backend, MemoryBackend, Verdict
from agentloop.fleet._limits import RateLimit
from agentloop.fleet._sql import STALE_SECONDS, SQLBackend, dsn_secrets, redacted_dsn
from agentloop.messages import Usage

__all__ = ["DEFAULT_LEASE_SECONDS", "GovernedRun", "Lease", "RateGovernor"]

DEFAULT_LEASE_SECONDS = 130.0
"""An in-flight lease when the client's timeouts are unknown (``Settings``' 120 s + 10 s)."""

CONCURRENT_POLL = 0.05
"""Seconds between looks while every in-flight slot is taken (a reply may free one any time)."""

_T = TypeVar("_T")


class GovernedRun(Protocol):
    """What the governor reads of the run a request belongs to (the engine's event bridge)."""

    def on_rate_limit_wait(self, key: str, limit: str, wait_seconds: float) -> None:
        """Announce a wait."""
        ...

    def wall_clock(self) -> tuple[float, float] | None:
        """The run's wall-clock ``(spent, limit)``, or None without that line."""
        ...

    def check_cancel(self) -> None:
        """Raise ``Cancelled`` if the run was cancelled."""
        ...


class Lease:
    """An admitted request: end it with ``settle`` or ``rate_limited``."""

    __slots__ = ("_governor", "asks", "id")

    def __init__(self, governor: RateGovernor, lease: str, asks: Sequence[Ask]) -> None:
        self._governor = governor
        self.id = lease
        self.asks = tuple(asks)

    async def settle(self, usage: Usage | None = None) -> None:
        """The request ended: free its slot; a reported ``usage`` replaces its estimate."""
        reported = usage is not None and (usage.input_tokens or usage.output_tokens)
        tokens = usage.input_tokens + usage.output_tokens if reported and usage else None
        await self._governor._call(self._governor.backend.settle, self.id, tokens)

    async def rate_limited(self, seconds: float) -> None:
        """A 429: close this request's keys for ``seconds`` for every process, then settle."""
        keys = [ask.limit.key for ask in self.asks]
        await self._governor._call(self._governor.backend.close, keys, seconds)
        await self.settle()


class RateGovernor:
    """Requests per minute, tokens per minute and requests in flight, per provider and model.

    Args:
        limits: The ``RateLimit`` lines (one, or any iterable of them; one per key).
        backend: ``"memory"`` (this process), ``"sqlite:///PATH"`` (the processes of one
            machine) or a ``postgresql://`` DSN (many machines; may be the store's database).
        clock: Time and sleep (``agentloop.testing.FakeClock`` in tests).

    Raises:
        ConfigurationError: A limit that is not a ``RateLimit``, two limits on one key, an
            unknown keyword or backend form, or PostgreSQL without psycopg.
    """

    def __init__(
        self,
        limits: RateLimit | Iterable[RateLimit],
        *,
        backend: str = "memory",
        clock: Clock = SYSTEM_CLOCK,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise ConfigurationError(
                f"RateGovernor got unknown keyword(s) {sorted(unknown)}; it takes limits, "
                "backend and clock",
                field=sorted(unknown)[0],
            )
        self.limits = _checked_limits(limits)
        self.clock = clock
        self.backend: Backend = _backend(backend, clock)
        self._mark = os.urandom(4).hex()  # ids unique across processes, whatever the clock
        self._locks: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[str, ...], asyncio.Lock]
        ] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"RateGovernor({list(self.limits)!r}, backend={self.backend.name!r})"

    def matching(self, provider: str, model: str) -> tuple[RateLimit, ...]:
        """The limits a request to ``provider``'s ``model`` counts against."""
        return tuple(limit for limit in self.limits if limit.matches(provider, model))

    async def acquire(
        self,
        provider: str,
        model: str,
        estimate: Callable[[], int] | int = 0,
        *,
        run: GovernedRun | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> Lease | None:
        """Wait until a request may be sent; None when no limit counts it.

        Args:
            provider: The request's provider.
            model: The model it asks.
            estimate: Its tokens (input + ``max_tokens``), or a function computing them (called
                only when a matching limit has a ``tpm``).
            run: The run it belongs to: its cancel signal, wall-clock line and events.
            lease_seconds: How long its in-flight slot lasts if it is never settled.

        Raises:
            ConfigurationError: The estimate alone exceeds a ``tpm`` (never sent).
            BudgetExhausted: The wait would outlast the run's wall clock (nothing sent).
            GovernorUnavailable: The backend failed (nothing sent).
        """
        limits = self.matching(provider, model)
        if not limits:
            return None
        tokens = 0
        if any(limit.tpm for limit in limits):
            tokens = estimate() if callable(estimate) else estimate
        for limit in limits:
            if limit.tpm is not None and tokens > limit.tpm:
                raise ConfigurationError(
                    f"a request estimated at {tokens} tokens can never fit {limit!r} "
                    f"(tpm={limit.tpm}); raise the limit or send less",
                    field="tpm",
                )
        asks = tuple(Ask(limit, tokens) for limit in limits)
        async with self._lock(tuple(sorted(limit.key for limit in limits))):
            return await self._wait(asks, run, lease_seconds)

    def _lock(self, keys: tuple[str, ...]) -> asyncio.Lock:
        """This event loop's lock for ``keys`` (its waiters queue FIFO on it)."""
        locks = self._locks.setdefault(asyncio.get_running_loop(), {})
        return locks.setdefault(keys, asyncio.Lock())

    async def _wait(self, asks: Sequence[Ask], run: GovernedRun | None, lease_seconds: float
                    ) -> Lease:  # fmt: skip
        waiter = f"{self._mark}-{self.clock.new_id()}"
        lease = f"{self._mark}-{self.clock.new_id()}"
        announced: tuple[str, str] | None = None
        admitted = False
        try:
            while True:
                if run is not None:
                    run.check_cancel()
                verdict = await self._admit(asks, waiter, lease, lease_seconds)
                if verdict.lease is not None:
                    admitted = True
                    return Lease(self, verdict.lease, asks)
                wait = _expected(verdict)
                if run is not None:
                    _check_budget(run, wait)
                    if announced != (verdict.key, verdict.limit):
                        announced = (verdict.key, verdict.limit)
                        run.on_rate_limit_wait(verdict.key, verdict.limit, wait)
                await self.clock.sleep(self._nap(wait))
        finally:
            if not admitted:
                await self._leave(waiter)

    async def _admit(self, asks: Sequence[Ask], waiter: str, lease: str, lease_seconds: float
                     ) -> Verdict:  # fmt: skip
        """One look at the backend (``admit``).

        Cancelled while a shared backend's thread admits, it waits for that thread and frees
        what it admitted: a request never sent holds no slot.
        """
        if not self.backend.remote:
            return await self._call(self.backend.admit, asks, waiter, lease, lease_seconds)
        looking = asyncio.ensure_future(
            self._call(self.backend.admit, asks, waiter, lease, lease_seconds)
        )
        try:
            return await asyncio.shield(looking)
        except asyncio.CancelledError:
            await asyncio.wait((looking,))
            if not looking.cancelled() and looking.exception() is None:
                if looking.result().lease is not None:
                    with contextlib.suppress(GovernorUnavailable):  # then its lease expires
                        await self._call(self.backend.settle, lease, 0)  # sent nothing
            raise

    def _nap(self, wait: float) -> float:
        """One sleep of a wait: a shared backend's queue ticket must be refreshed in time."""
        return min(wait, STALE_SECONDS / 4) if self.backend.remote else wait

    async def _leave(self, waiter: str) -> None:
        try:
            await self._call(self.backend.leave, waiter)
        except GovernorUnavailable:
            pass  # its ticket goes stale and is dropped by the next waiter

    async def _call(self, method: Callable[..., _T], *args: Any) -> _T:
        """One backend call (in a worker thread for a shared backend), failures translated."""
        try:
            if self.backend.remote:
                return await asyncio.to_thread(method, *args)
            return method(*args)
        except Exception as exc:
            root = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
            secrets = getattr(self.backend, "secrets", ())
            if any(s in f"{exc} {root!r}" for s in secrets):  # a DSN echoed: keep only the type
                raise GovernorUnavailable(self.backend.name, type(root).__name__) from None
            raise GovernorUnavailable(self.backend.name, root) from exc

    def close(self) -> None:
        """Release the backend's connection (a later request opens a new one)."""
        self.backend.dispose()


def _expected(verdict: Verdict) -> float:
    """How long a wait is expected to last: a slot in flight may free at any moment."""
    return min(verdict.wait, CONCURRENT_POLL) if verdict.limit == "concurrent" else verdict.wait


def _check_budget(run: GovernedRun, wait: float) -> None:
    line = run.wall_clock()
    if line is not None and line[0] + wait > line[1]:
        raise BudgetExhausted("wall_clock", line[0], line[1])


def _checked_limits(limits: RateLimit | Iterable[RateLimit]) -> tuple[RateLimit, ...]:
    given = (limits,) if isinstance(limits, RateLimit) else limits
    if isinstance(given, str | bytes) or not isinstance(given, Iterable):
        raise ConfigurationError("RateGovernor needs RateLimit values", field="limits")
    found = tuple(given)
    if not found or not all(isinstance(limit, RateLimit) for limit in found):
        raise ConfigurationError(
            f"RateGovernor needs one or more RateLimit values, got {found!r}", field="limits"
        )
    keys = [limit.key for limit in found]
    for key in keys:
        if keys.count(key) > 1:
            raise ConfigurationError(f"two RateLimit lines for {key}: merge them", field="limits")
    return found


def _backend(backend: object, clock: Clock) -> Backend:
    """The backend a ``backend=`` string names; its connection opens on first use."""
    if backend == "memory":
        return MemoryBackend(clock.monotonic)
    if isinstance(backend, str) and backend.startswith("sqlite:///") and len(backend) > 10:
        path = backend.removeprefix("sqlite:///")

        def sqlite() -> Any:
            from agentloop.store.sqlite import SQLiteStore

            return SQLiteStore(path, timeout=30.0)

        return SQLBackend(backend, sqlite, postgres=False, clock=clock.time)
    if isinstance(backend, str) and backend.startswith(("postgresql://", "postgres://")):
        if importlib.util.find_spec("psycopg") is None:
            raise ConfigurationError(
                "a PostgreSQL governor needs psycopg 3: pip install 'agentloop[postgres]'",
                field="backend",
            )

        def postgres() -> Any:
            from agentloop.store.postgres import PostgresStore

            return PostgresStore(backend)

        sql = SQLBackend(redacted_dsn(backend), postgres, postgres=True, clock=clock.time)
        sql.secrets = dsn_secrets(backend)
        return sql
    raise ConfigurationError(
        f"RateGovernor backend must be 'memory', 'sqlite:///PATH' or a postgresql:// DSN, "
        f"got {redacted_dsn(backend) if isinstance(backend, str) else backend!r}",
        field="backend",
    )
