"""The time and identity an agent reads: wall time, a monotonic clock, sleep, new ids.

Everything in a run that looks at a clock, waits, or makes an id goes through one ``Clock``
(``Agent(clock=...)``): run ids and timestamps, durations, recovery delays, breaker cooldowns,
the budget's wall-clock line. The default is the system's. Tests pass
``agentloop.testing.FakeClock``, whose ``sleep`` moves time forward without waiting, so nothing
in them sleeps for real.
"""

from __future__ import annotations

import asyncio
import time
import uuid

__all__ = ["SYSTEM_CLOCK", "Clock"]


class Clock:
    """The system's clock; subclass and override to fake any part of it."""

    __slots__ = ()

    def time(self) -> float:
        """Wall-clock seconds since the epoch (what records store)."""
        return time.time()

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations, cooldowns, deadlines)."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; cancellation propagates."""
        await asyncio.sleep(seconds)

    def new_id(self) -> str:
        """A fresh unique id (32 hex digits)."""
        return uuid.uuid4().hex


SYSTEM_CLOCK = Clock()
"""The default: real time, real sleep, random ids."""
