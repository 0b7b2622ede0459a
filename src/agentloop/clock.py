"""The time and identity an agent reads: wall time, a monotonic clock, sleep, new ids.

Everything in a run that looks at a clock, waits, or makes an id goes through one ``Clock``
(``Agent(clock=...)``): run ids and timestamps, durations, recovery delays, breaker cooldowns,
the budget's wall-clock line. The default is the system's. Tests pass
``agentloop.testing.FakeClock``, whose ``sleep`` moves time forward without waiting, so nothing
in them sleeps for real.
"""

from __future__ import annotations

import asyncio
import itertools
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
        loads ``platform``: about 4 ms of every first import), drawn from a pool of ids made
        256 at a time (one system call and one hex encoding for all of them; see ``_Pool``).
        The pool's batch is read here, with no method of its own: a call fewer per id.
        """
        pool = _POOL
        hexed, slots = pool._batch
        start = next(slots) * 32
        if start >= len(hexed):
            hexed, slots = pool._batch = (_fresh_batch(), itertools.count(1))
            start = 0
        return hexed[start : start + 32]


class _Pool:
    """Version 4 UUIDs' hex digits, made ``_BATCH`` at a time from one ``os.urandom`` read.

    The batch's bytes are the same random bytes ``uuid.uuid4`` would read, with its version
    and variant bits set on every 16-byte slice at once; taking one (``Clock.new_id``) is a
    string slice. Each slot is taken once: ``next`` on an ``itertools.count`` is atomic, so
    threads never share one, and a refill replaces batch and counter together (a thread still
    on the old batch takes its own slots there). A forked child starts a fresh batch, never its
    parent's.
    """

    __slots__ = ("_batch",)

    def __init__(self) -> None:
        self._batch: tuple[str, itertools.count[int]] = ("", itertools.count())

    def forget(self) -> None:
        """Drop the batch (a forked child: its parent takes the same ids)."""
        self._batch = ("", itertools.count())


_BATCH = 256


def _fresh_batch() -> str:
    raw = bytearray(os.urandom(16 * _BATCH))
    raw[6::16] = raw[6::16].translate(_VERSION_4)
    raw[8::16] = raw[8::16].translate(_VARIANT)
    return raw.hex()


_VERSION_4 = bytes(range(0x40, 0x50)) * 16  # byte b -> (b & 0x0F) | 0x40
_VARIANT = bytes(range(0x80, 0xC0)) * 4  # byte b -> (b & 0x3F) | 0x80, RFC 4122's


_POOL = _Pool()
if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_POOL.forget)


SYSTEM_CLOCK = Clock()
"""The default: real time, real sleep, random ids."""
