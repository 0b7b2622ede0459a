"""``_aio``: closing an async iterator left mid-way, and the closing context-manager protocols."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentloop._util.aio import AsyncClosing, Closing, aclose_iterator


async def test_closing_a_generator_left_mid_way_runs_its_finally() -> None:
    cleaned: list[str] = []

    async def numbers() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            cleaned.append("finally")

    iterator = numbers()
    assert await anext(iterator) == 1
    await aclose_iterator(iterator)
    assert cleaned == ["finally"]


async def test_an_iterator_without_aclose_is_left_alone() -> None:
    class Countdown:
        def __init__(self) -> None:
            self.left = 1

        def __aiter__(self) -> Countdown:
            return self

        async def __anext__(self) -> int:
            if not self.left:
                raise StopAsyncIteration
            self.left -= 1
            return self.left

    iterator = Countdown()
    await aclose_iterator(iterator)
    assert iterator.left == 1


async def test_async_closing_yields_itself_and_closes_on_the_way_out() -> None:
    class Resource(AsyncClosing):
        closed = False

        async def aclose(self) -> None:
            self.closed = True

    resource = Resource()
    async with resource as entered:
        assert entered is resource
        assert not resource.closed
    assert resource.closed


def test_closing_yields_itself_and_closes_on_the_way_out() -> None:
    class Resource(Closing):
        closed = False

        def close(self) -> None:
            self.closed = True

    resource = Resource()
    with resource as entered:
        assert entered is resource
    assert resource.closed
