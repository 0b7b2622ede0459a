"""The fleet (SPEC 25): one rate governor for every process that calls a provider.

``RateGovernor([RateLimit("openai", rpm=600)], backend="postgresql://...")`` given as
``Agent(..., governor=...)`` makes every HTTP request of that agent's client wait, before it is
sent, until the provider's (and the model's) requests per minute, tokens per minute and
requests in flight have room, counted across every process sharing the backend; one 429 closes
the key for all of them. See ``docs/fleet.md``.

Rooms: ``_limits`` (``RateLimit`` and the sliding-window arithmetic, pure), ``_backends`` (the
backend protocol, the admission rule and the in-process backend), ``_sql`` (SQLite and
PostgreSQL over the store's connection code), ``_governor`` (``RateGovernor``: the waiting
loop), ``_client`` (``GovernedClient`` and ``govern``, which put it under the retries).
"""

from __future__ import annotations

from agentloop.fleet._client import GovernedClient, estimate_tokens, govern
from agentloop.fleet._governor import Lease, RateGovernor
from agentloop.fleet._limits import RateLimit

__all__ = ["GovernedClient", "Lease", "RateGovernor", "RateLimit", "estimate_tokens", "govern"]
