"""The time and identity an agent reads: wall time, a monotonic clock, sleep, new ids.

Everything in a run that looks at a clock, waits, or makes an id goes through one ``Clock``
(``Agent(clock=...)``): run ids and timestamps, durations, recovery delays, breaker cooldowns,
the budget's wall-clock line. The default is the system's. Tests pass
``agentloop.testing.FakeClock``, whose ``sleep`` moves time forward without waiting, so nothing
in them sleeps for real.
"""

from __future__ import annotations

import asyncio
import os
import time

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
        """A fresh unique id: a random (version 4) UUID's 32 hex digits.

        Made from ``os.urandom`` as ``uuid.uuid4`` makes it, without importing ``uuid`` (which
        loads ``platform``: about 4 ms of every first import) and in a tenth of its time.
        """
        raw = bytearray(os.urandom(16))
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
        raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
        return raw.hex()


SYSTEM_CLOCK = Clock()
"""The default: real time, real sleep, random ids."""
