"""PerLoop: one resource per event loop, made on first use and closed before its loop ends."""

from __future__ import annotations

import asyncio

from agentloop.providers._per_loop import PerLoop


class Resource:
    """A closable stand-in for an aiohttp session."""

    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_one_resource_per_loop_reused_while_open() -> None:
    per_loop = PerLoop(Resource)

    async def twice() -> tuple[Resource, Resource]:
        return await per_loop.get(), await per_loop.get()

    first, again = asyncio.run(twice())
    assert first is again
    assert first.closed  # closed by the loop's shutdown_asyncgens, not left to the collector
    second, _ = asyncio.run(twice())
    assert second is not first and second.closed


async def test_a_closed_resource_is_replaced_and_aclose_closes_now() -> None:
    per_loop = PerLoop(Resource)
    first = await per_loop.get()
    await first.close()
    second = await per_loop.get()
    assert second is not first and not second.closed
    await per_loop.aclose()
    assert second.closed
    await per_loop.aclose()  # idempotent
    third = await per_loop.get()
    assert third is not second
    await per_loop.aclose()


def test_a_loop_closed_without_shutdown_is_finished_by_the_next_get() -> None:
    per_loop = PerLoop(Resource)
    loop = asyncio.new_event_loop()
    try:
        stale = loop.run_until_complete(per_loop.get())
    finally:
        loop.close()  # no shutdown_asyncgens: the guardian never ran its finally
    fresh = asyncio.run(per_loop.get())
    assert stale.closed and fresh is not stale
