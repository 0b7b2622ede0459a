"""Model fallback: a ``ModelClient`` over an ordered list of clients, with per-model breakers.

``FallbackClient([primary, backup, ...])`` sends each request to the first healthy model; a
request that fails there (after that client's own retries) moves on to the next healthy model
within the same request. Each model's health is a small pure state machine (``ModelHealth``
plus the functions below), driven with an injectable clock:

- ``closed``: in rotation; ``trip_threshold`` consecutive failed requests (3) open it.
- ``open``: out of rotation for ``cooldown`` seconds (60); then the next request probes it.
- ``probing``: in rotation again; ``probe_successes`` successes in a row (2) close it; a rate
  limit re-opens it at once; other failures restart the success streak and count toward
  ``trip_threshold`` again.

When every model is open, ``FallbackExhausted(retry_after=<seconds until the earliest cooldown
ends>)`` is raised before any request is sent. Bad requests (``BadRequestError``, including
``ContextLengthExceeded``), a ``ConfigurationError`` (a setting the model refuses: the caller
must fix it, SPEC 16), a refusal (``ModelRefused``) and cancellations never fail over and never
count: the same request is bad everywhere, and neither a refusal nor a cancel says anything about
a model's health. Any other ``ProviderError`` or a nested ``FallbackExhausted`` counts as a
failure and fails over. Other exceptions pass through.

``snapshot()`` / ``restore()`` carry every model's health into another process (``Agent.resume``),
with cooldown starts as wall-clock seconds.

If a state update itself raises, the fallback state is poisoned and every later request raises
``LockPoisoned("fallback")`` until ``reset()``: model selection fails closed, never open.
"""

from __future__ import annotations

import enum
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from agentloop._util.aio import aclose_iterator
from agentloop._util.numbers import require_number
from agentloop._util.slots import record
from agentloop.errors import (
    BadRequestError,
    ConfigurationError,
    FallbackExhausted,
    LockPoisoned,
    ProviderError,
    RateLimited,
    ResponseInvalid,
)
from agentloop.model import (
    MEDIA_KINDS,
    ModelClient,
    ModelRequest,
    ModelResponse,
    StreamEvent,
    media_kinds,
)
from agentloop.providers._client import ClosingClient
from agentloop.providers._model_string import client_from_string
from agentloop.safety.breaker import BreakerState, Circuit, CircuitRule, wall_shift

__all__ = [
    "BreakerPolicy",
    "FallbackClient",
    "Health",
    "ModelHealth",
    "admit",
    "cooldown_remaining",
    "fails_over",
    "record_failure",
    "record_success",
]

_log = logging.getLogger(__name__)

Clock = Callable[[], float]


class Health(enum.StrEnum):
    """Where a model stands in rotation."""

    CLOSED = "closed"
    OPEN = "open"
    PROBING = "probing"


@record
class BreakerPolicy:
    """The per-model breaker numbers (``trip_threshold=0`` never trips)."""

    trip_threshold: int = 3
    """Consecutive failed requests that take a model out of rotation."""
    cooldown: float = 60.0
    """Seconds out of rotation before requests probe the model."""
    probe_successes: int = 2
    """Successes in a row, while probing, that close the breaker."""

    def __post_init__(self) -> None:
        _require_int("trip_threshold", self.trip_threshold, minimum=0)
        _require_int("probe_successes", self.probe_successes, minimum=1)
        require_number(self.cooldown, "FallbackClient.cooldown", field="cooldown")


def _require_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(
            f"FallbackClient.{name} must be an int >= {minimum}, got {value!r}", field=name
        )


@record
class ModelHealth:
    """One model's breaker state: a frozen view of the shared ``safety.breaker.Circuit``.

    ``opened_at`` is kept while open, ``probe_successes`` while probing, and
    ``consecutive_failures`` outside ``open``; each is 0 elsewhere.
    """

    state: Health = Health.CLOSED
    consecutive_failures: int = 0
    opened_at: float = 0.0
    probe_successes: int = 0


_HEALTH: dict[BreakerState, Health] = {
    "closed": Health.CLOSED,
    "open": Health.OPEN,
    "half_open": Health.PROBING,
}
_STATE: dict[Health, BreakerState] = {health: state for state, health in _HEALTH.items()}


@functools.lru_cache(maxsize=64)
def _rule(policy: BreakerPolicy) -> CircuitRule:
    """Models: every request is admitted while probing; only a rate limit reopens at once."""
    return CircuitRule(
        threshold=policy.trip_threshold,
        cooldown=policy.cooldown,
        probes_to_close=policy.probe_successes,
        single_probe=False,
        recount_when_probing=True,
    )


def _circuit(health: ModelHealth) -> Circuit:
    return Circuit(
        _STATE[health.state], health.consecutive_failures, health.opened_at, health.probe_successes
    )


def _step(health: ModelHealth, step: Callable[[Circuit], object]) -> ModelHealth:
    """Run one step of the shared state machine on ``health``; unchanged, it is returned as is."""
    circuit = _circuit(health)
    step(circuit)
    state = _HEALTH[circuit.state]
    after = (circuit.generation, circuit.consecutive_failures, circuit.probe_successes)
    if after == (0, health.consecutive_failures, health.probe_successes):
        return health
    return ModelHealth(
        state,
        0 if state is Health.OPEN else circuit.consecutive_failures,
        circuit.opened_at if state is Health.OPEN else 0.0,
        circuit.probe_successes if state is Health.PROBING else 0,
    )


def cooldown_remaining(health: ModelHealth, policy: BreakerPolicy, now: float) -> float:
    """Seconds until an open model may be probed (0.0 when it is not open)."""
    return _circuit(health).cooldown_left(_rule(policy), now)


def admit(health: ModelHealth, policy: BreakerPolicy, now: float) -> ModelHealth:
    """Move an open model whose cooldown has ended to ``probing``; others are unchanged."""
    return _step(health, lambda circuit: circuit.admit(_rule(policy), now))


def record_success(health: ModelHealth, policy: BreakerPolicy) -> ModelHealth:
    """A request this model served succeeded (a late success while open changes nothing)."""
    return _step(health, lambda circuit: circuit.record(_rule(policy), 0.0, success=True))


def record_failure(
    health: ModelHealth, policy: BreakerPolicy, now: float, *, rate_limited: bool
) -> ModelHealth:
    """A request this model served failed; may open the breaker (a rate limit while probing)."""
    rule = _rule(policy)
    return _step(
        health, lambda circuit: circuit.record(rule, now, success=False, hard=rate_limited)
    )


def fails_over(error: BaseException) -> bool:
    """Whether ``error`` counts against the model and moves the request to the next one."""
    if isinstance(error, BadRequestError):
        return False
    return isinstance(error, ProviderError | FallbackExhausted)


class FallbackClient(ClosingClient):
    """A ``ModelClient`` that fails over along an ordered list of clients.

    Args:
        clients: The models in order of preference (the first is the primary): clients, or
            ``"provider:model"`` strings built as ``build_client(Settings(provider, model))``.
        trip_threshold: Consecutive failed requests that take a model out of rotation.
        cooldown: Seconds a model stays out before it is probed.
        probe_successes: Successes in a row that restore a probed model.
        clock: Monotonic clock (default ``time.monotonic``).
    """

    def __init__(
        self,
        clients: Sequence[ModelClient | str],
        *,
        trip_threshold: int = 3,
        cooldown: float = 60.0,
        probe_successes: int = 2,
        clock: Clock | None = None,
    ) -> None:
        if isinstance(clients, str | bytes) or not isinstance(clients, Sequence) or not clients:
            raise ConfigurationError("FallbackClient needs at least one client", field="clients")
        self.policy = BreakerPolicy(trip_threshold, cooldown, probe_successes)
        self.clients: tuple[ModelClient, ...] = tuple(
            client_from_string(c) if isinstance(c, str) else c for c in clients
        )
        self._clock: Clock = clock or time.monotonic
        self._health = [ModelHealth() for _ in self.clients]
        self._serving = 0  # the primary serves until another model does
        self._poisoned = False

    def __repr__(self) -> str:
        return f"FallbackClient({list(self.clients)!r}, {self.policy!r})"

    @property
    def model(self) -> str:
        """The primary's model."""
        return self.clients[0].model

    @property
    def provider(self) -> str:
        """The primary's provider."""
        return self.clients[0].provider

    @property
    def accepts_media(self) -> frozenset[str]:
        """The media kinds every model of the chain takes (any of them may serve a request)."""
        kinds = MEDIA_KINDS
        for client in self.clients:
            kinds = kinds & media_kinds(client)
        return kinds

    def check_provider_tools(self, tools: Sequence[Any], functions: bool) -> None:
        """Every model of the chain must take ``tools`` (any may serve): else the first refusal."""
        from agentloop.provider_tools import check_client

        for client in self.clients:
            check_client(client, tools, functions=functions)

    @property
    def health(self) -> tuple[ModelHealth, ...]:
        """A snapshot of every model's breaker state, in client order."""
        return tuple(self._health)

    def reset(self) -> None:
        """Forget every breaker state (and a poisoning): all models back in rotation."""
        self._health = [ModelHealth() for _ in self.clients]
        self._serving = 0
        self._poisoned = False

    def snapshot(self, *, wall: float | None = None) -> dict[str, Any]:
        """Every model's health as plain JSON data, cooldown starts as wall-clock seconds."""
        shift = wall_shift(self._clock, wall)
        return {
            "models": [c.model for c in self.clients],
            "serving": self._serving,
            "health": [
                [h.state.value, h.consecutive_failures, h.opened_at + shift, h.probe_successes]
                for h in self._health
            ],
        }

    def restore(self, data: Mapping[str, Any], *, wall: float | None = None) -> None:
        """Take a ``snapshot()``'s health; ignored when it was taken of other models.

        Raises:
            ValueError: ``data`` is not a snapshot.
        """
        shift = -wall_shift(self._clock, wall)
        try:
            if list(data["models"]) != [c.model for c in self.clients]:
                return
            health = [
                ModelHealth(Health(state), int(failures), float(opened) + shift, int(probes))
                for state, failures, opened, probes in data["health"]
            ]
            serving = int(data["serving"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a FallbackClient snapshot: {exc!r}") from exc
        if len(health) == len(self.clients) and 0 <= serving < len(self.clients):
            self._health, self._serving = health, serving

    async def aclose(self) -> None:
        """Close every client; the first error is re-raised after all were closed."""
        first: BaseException | None = None
        for client in self.clients:
            try:
                await client.aclose()
            except Exception as error:  # close the others before reporting
                first = first or error
        if first is not None:
            raise first

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` to the first healthy model, failing over on model failures."""
        order = self._route()
        for position, index in enumerate(order):
            client = self.clients[index]
            try:
                response = await client.complete(replace(request, model=client.model))
            except Exception as error:
                self._failed(request, order, position, error)
                continue
            return self._served(request, index, response)
        raise AssertionError("unreachable: the last failure is re-raised")  # pragma: no cover

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream from the first healthy model; fails over only before any event was yielded.

        Yields:
            The serving model's events; ``done`` carries the response with its ``model`` set.
        """
        order = self._route()
        for position, index in enumerate(order):
            client = self.clients[index]
            yielded = False
            try:
                async for event in self._stream_one(client, request):
                    if event.kind == "done" and event.response is not None:
                        served = self._served(request, index, event.response)
                        yield replace(event, response=served)
                        return
                    yielded = True
                    yield event
            except Exception as error:
                self._failed(request, order, position, error, yielded=yielded)

    async def _stream_one(
        self, client: ModelClient, request: ModelRequest
    ) -> AsyncIterator[StreamEvent]:
        """One model's stream up to ``done``; a stream ending without it is ``ResponseInvalid``."""
        iterator = client.stream(replace(request, model=client.model))
        try:
            async for event in iterator:
                yield event
                if event.kind == "done" and event.response is not None:
                    return
        finally:
            await aclose_iterator(iterator)
        raise ResponseInvalid(
            f"{client.model}: stream ended without a terminal event",
            provider=client.provider,
            phase="body",
            request_sent=True,
        )

    def _route(self) -> list[int]:
        """The models in rotation for a new request; raises before sending if none is."""
        if self._poisoned:
            raise LockPoisoned("fallback")
        now = self._update(lambda: self._clock())
        self._update(lambda: self._admit_all(now))
        order = [i for i, h in enumerate(self._health) if h.state is not Health.OPEN]
        if order:
            return order
        wait = min(cooldown_remaining(h, self.policy, now) for h in self._health)
        raise FallbackExhausted(retry_after=wait)

    def _admit_all(self, now: float) -> None:
        self._health = [admit(h, self.policy, now) for h in self._health]

    def _failed(
        self,
        request: ModelRequest,
        order: list[int],
        position: int,
        error: Exception,
        *,
        yielded: bool = False,
    ) -> None:
        """Record a failed attempt and return to fail over, or re-raise ``error``."""
        if not fails_over(error):
            raise error
        index = order[position]
        rate_limited = isinstance(error, RateLimited)
        self._update(lambda: self._record(index, rate_limited))
        following = [i for i in order[position + 1 :] if self._health[i].state is not Health.OPEN]
        if yielded or not following:
            raise error
        from_model, to_model = self.clients[index].model, self.clients[following[0]].model
        _log.warning("model %s failed (%s); falling back to %s", from_model, type(error).__name__,
                     to_model)  # fmt: skip
        _notify(request, "on_fallback", from_model, to_model, error)

    def _record(self, index: int, rate_limited: bool) -> None:
        now = self._clock()
        before = self._health[index]
        after = record_failure(before, self.policy, now, rate_limited=rate_limited)
        self._health[index] = after
        if after.state is Health.OPEN and before.state is not Health.OPEN:
            _log.warning("model %s out of rotation for %.0fs", self.clients[index].model,
                         self.policy.cooldown)  # fmt: skip

    def _served(self, request: ModelRequest, index: int, response: ModelResponse) -> ModelResponse:
        """Record a success, report a model switch, and stamp the serving model."""
        self._update(lambda: self._succeed(index))
        previous, self._serving = self._serving, index
        model = self.clients[index].model
        if previous != index:
            _notify(request, "on_model_switched", self.clients[previous].model, model)
        return response if response.model else replace(response, model=model)

    def _succeed(self, index: int) -> None:
        self._health[index] = record_success(self._health[index], self.policy)

    def _update(self, update: Callable[[], Any]) -> Any:
        """Run a state update; if it raises, poison the fallback state (fail closed)."""
        try:
            return update()
        except Exception as exc:
            self._poisoned = True
            raise LockPoisoned("fallback") from exc


def _notify(request: ModelRequest, name: str, *args: Any) -> None:
    """Call ``request.events.<name>(*args)``; a listener that raises is logged and ignored."""
    if request.events is None:
        return
    try:
        getattr(request.events, name)(*args)
    except Exception:  # an observer must never break the request
        _log.exception("%s listener raised; ignored", name)
