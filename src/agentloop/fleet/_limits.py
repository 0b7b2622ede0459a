"""``RateLimit`` and the arithmetic of a sliding window: how long a request must wait.

Everything here is pure: given what a key has sent in its window (``Sent`` rows), whether a 429
closed it, and the request's token estimate, ``wait_for`` says how many seconds until the request
fits, and which line holds it back. Every backend (memory, SQLite, PostgreSQL) reads its rows and
asks this one function, so "never over" is proved once:

- ``rpm``: a request is admitted at ``now`` only when fewer than ``rpm`` rows have ``at`` in
  ``(now - window, now]``; so every window ending at an admission holds at most ``rpm``. The
  wait is until the oldest row that must leave does: ``rows[n - rpm].at + window - now``.
- ``tpm``: the same with token sums (a row counts its estimate until the reply reports usage).
- ``concurrent``: rows whose ``flight_until`` lies ahead are in flight (a lease that expires at
  the client's ``timeout + connect_timeout``, so a process that died frees its slot).
- ``retry_after``: a 429 closed the key until ``closed_until``.

A row is counted at its admission, but the provider counts its arrival, a few milliseconds
later and not the same few for every request; so the rpm and tpm lines hold a row for
``window + guard(window)`` (a tenth of the window, at most 0.25 s): a request admitted a
window after another never reaches the provider inside that other's window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError

__all__ = ["GUARD_SECONDS", "LIMIT_KINDS", "RateLimit", "Sent", "guard", "wait_for"]

LIMIT_KINDS = ("rpm", "tpm", "concurrent", "retry_after")
"""What ``RateLimitWait.limit`` may say."""

GUARD_SECONDS = 0.25
"""The most a row is held past its window (see ``guard``)."""

_EPSILON = 1e-6
"""Added to a computed wait so the row it waits for has left the window when it wakes."""


def _positive_int(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigurationError(
            f"RateLimit.{name} must be a positive int or None, got {value!r}", field=name
        )
    return value


def _window(value: object) -> float:
    good = isinstance(value, int | float) and not isinstance(value, bool)
    if not good or not math.isfinite(float(value)) or float(value) <= 0:  # type: ignore[arg-type]
        raise ConfigurationError(
            f"RateLimit.window must be a positive number of seconds, got {value!r}",
            field="window",
        )
    return float(value)  # type: ignore[arg-type]


class RateLimit:
    """One provider's (or one model's) limits, counted per sliding ``window`` seconds.

    Args:
        provider: The provider it limits (``"openai"``, ``"anthropic"``, ...).
        model: One model, or None for one limit shared by all the provider's models.
        rpm: Requests per window.
        tpm: Tokens (input + output) per window.
        concurrent: Requests in flight at once.
        window: The window's length in seconds (60 makes ``rpm`` per minute).

    Raises:
        ConfigurationError: A limit that is not a positive int, a ``window`` that is not a
            positive number, no limit at all, or an unknown keyword.
    """

    __slots__ = ("concurrent", "model", "provider", "rpm", "tpm", "window")

    def __init__(
        self,
        provider: str,
        model: str | None = None,
        *,
        rpm: int | None = None,
        tpm: int | None = None,
        concurrent: int | None = None,
        window: float = 60.0,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise ConfigurationError(
                f"RateLimit got unknown keyword(s) {sorted(unknown)}; it takes rpm, tpm, "
                "concurrent and window",
                field=sorted(unknown)[0],
            )
        if not isinstance(provider, str) or not provider.strip():
            raise ConfigurationError("RateLimit needs a provider name", field="provider")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ConfigurationError("RateLimit.model must be a model name or None", field="model")
        self.provider = provider
        self.model = model
        self.rpm = _positive_int("rpm", rpm)
        self.tpm = _positive_int("tpm", tpm)
        self.concurrent = _positive_int("concurrent", concurrent)
        self.window = _window(window)
        if self.rpm is None and self.tpm is None and self.concurrent is None:
            raise ConfigurationError(
                "RateLimit needs at least one of rpm, tpm and concurrent", field="rpm"
            )

    @property
    def key(self) -> str:
        """The key it counts under: ``"provider:model"``, ``"provider:*"`` for all models."""
        return f"{self.provider}:{self.model or '*'}"

    def matches(self, provider: str, model: str) -> bool:
        """Whether a request to ``provider``'s ``model`` counts against this limit."""
        return provider == self.provider and (self.model is None or self.model == model)

    def __repr__(self) -> str:
        shown = [repr(self.provider)] + ([repr(self.model)] if self.model else [])
        for name in ("rpm", "tpm", "concurrent"):
            if getattr(self, name) is not None:
                shown.append(f"{name}={getattr(self, name)}")
        if self.window != 60.0:
            shown.append(f"window={self.window:g}")
        return f"RateLimit({', '.join(shown)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RateLimit) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


@record
class Sent:
    """One request a key admitted: when, its tokens, and until when it is in flight (or None)."""

    at: float
    tokens: int
    flight_until: float | None = None


def guard(window: float) -> float:
    """How long past ``window`` a row still counts: arrival jitter between two requests."""
    return min(GUARD_SECONDS, window / 10)


def wait_for(
    limit: RateLimit,
    now: float,
    sent: Sequence[Sent],
    tokens: int,
    closed_until: float = 0.0,
    ahead: int = 0,
) -> tuple[float, str] | None:
    """Seconds until a request of ``tokens`` fits ``limit`` and the line that holds it, or None.

    ``sent`` holds the key's rows (any order; rows out of the window are ignored). ``ahead``
    waiters queued before this one take the first slots that free (each counted at
    ``tokens``): the wait is then until this one's own slot, so a queue wakes one by one.
    """
    waits: list[tuple[float, str]] = []
    if closed_until > now:
        waits.append((closed_until - now, "retry_after"))
    held = limit.window + guard(limit.window)
    recent = sorted((s for s in sent if s.at > now - held), key=lambda s: s.at)
    if limit.rpm is not None:
        leaving = [s.at + held for s in recent]
        _slot(waits, leaving, len(recent) + ahead - limit.rpm, now, "rpm")
    if limit.tpm is not None:
        asked = min(limit.tpm, tokens * (ahead + 1))
        tpm_wait = _tokens_wait(held, limit.tpm, now, recent, asked)
        if tpm_wait is not None:
            waits.append((tpm_wait, "tpm"))
    if limit.concurrent is not None:
        flying = sorted(s.flight_until for s in sent if s.flight_until and s.flight_until > now)
        _slot(waits, flying, len(flying) + ahead - limit.concurrent, now, "concurrent")
    return max(waits) if waits else None


def _slot(waits: list[tuple[float, str]], frees: Sequence[float], index: int, now: float,
          line: str) -> None:  # fmt: skip
    """The wait until the ``index``-th (0-based) of ``frees`` (ascending) has passed, if any."""
    if index >= 0:
        free = frees[min(index, len(frees) - 1)] if frees else now
        waits.append((max(0.0, free - now) + _EPSILON, line))


def _tokens_wait(
    held: float, tpm: int, now: float, recent: Sequence[Sent], tokens: int
) -> float | None:
    """The wait until ``tokens`` more fit the ``tpm`` line (``recent`` oldest first)."""
    excess = sum(s.tokens for s in recent) + tokens - tpm
    if excess <= 0:
        return None
    for row in recent:
        excess -= row.tokens
        if excess <= 0:
            return row.at + held - now + _EPSILON
    return recent[-1].at + held - now + _EPSILON if recent else None
