"""What ``PartialOutput`` costs (SPEC 18): the parser alone, and a typed answer through the engine.

Parser rows: one JSON answer of N characters fed in 8-character fragments (as the fake server
and ``ScriptedModel`` stream), with the engine's throttled ``PartialJson`` and with a naive
parse of the whole text after every fragment (the O(n^2) it avoids; skipped past 100 KB, where
it takes minutes). Engine rows: one typed answer of N characters through ``agent.stream()``
(every ``PartialOutput`` built and queued) against the same characters as an untyped reply's
text, and a typed ``run()`` that does not stream (which builds nothing). A benchmark, not a
test: ``python bench/partial_output.py``; it takes the best of ``--repeats`` (the machine is
shared, so the best is the steadiest figure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_core import from_json

from agentloop import Agent
from agentloop.engine.partial import UNCHANGED, PartialJson
from agentloop.events import PartialOutput
from agentloop.testing import ScriptedModel, call, reply


def answer(size: int) -> dict[str, Any]:
    """A typed answer of about ``size`` characters of JSON: a title and a list of lines."""
    lines = [f"line {i}: some words of a long answer" for i in range(max(1, size // 42))]
    return {"title": "a long answer", "lines": lines}


def fragments(text: str) -> list[str]:
    return [text[i : i + 8] for i in range(0, len(text), 8)]


def throttled(pieces: list[str]) -> int:
    parser = PartialJson()
    grown = sum(parser.feed(p) is not UNCHANGED for p in pieces)
    return grown + (parser.flush() is not UNCHANGED)


def naive(pieces: list[str]) -> int:
    text = ""
    for piece in pieces:
        text += piece
        from_json(text, allow_partial="trailing-strings")
    return len(pieces)


def best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


async def best_async(fn: Callable[[], Awaitable[object]], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - started)
    return min(times)


async def streamed(agent: Agent[Any]) -> int:
    partials = 0
    async with agent.stream("go") as events:
        async for event in events:
            partials += isinstance(event, PartialOutput)
    return partials


async def engine_rows(size: int, repeats: int) -> None:
    value = answer(size)
    text = json.dumps(value)

    def typed() -> Agent[Any]:
        return Agent(ScriptedModel([call("final_result", value)]), output_type=dict[str, Any])

    def untyped() -> Agent[Any]:
        return Agent(ScriptedModel([reply(text)]))

    partials = await streamed(typed())
    rows = [
        ("typed stream", await best_async(lambda: streamed(typed()), repeats)),
        ("untyped stream", await best_async(lambda: streamed(untyped()), repeats)),
        ("typed run()", await best_async(lambda: typed().run("go"), repeats)),
    ]
    for how, seconds in rows:
        shown = partials if how == "typed stream" else 0
        print(f"{'engine':<8} {how:<15} {len(text):>9} {seconds * 1e3:>10.2f} {shown:>9}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'':<8} {'how':<15} {'chars':>9} {'ms':>10} {'partials':>9}")
    for size in (1_000, 10_000, 100_000, 1_000_000):
        pieces = fragments(json.dumps(answer(size)))
        chars = sum(map(len, pieces))
        grown = throttled(pieces)
        seconds = best(lambda p=pieces: throttled(p), args.repeats)  # type: ignore[misc]
        print(f"{'parser':<8} {'throttled':<15} {chars:>9} {seconds * 1e3:>10.2f} {grown:>9}")
        if size <= 100_000:
            times = 1 if size > 10_000 else args.repeats
            seconds = best(lambda p=pieces: naive(p), times)  # type: ignore[misc]
            row = f"{'parser':<8} {'every fragment':<15} {chars:>9} {seconds * 1e3:>10.2f}"
            print(f"{row} {len(pieces):>9}")
    for size in (1_000, 10_000, 100_000):
        await engine_rows(size, args.repeats)


if __name__ == "__main__":
    asyncio.run(main())
