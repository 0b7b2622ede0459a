"""Prompt-cache share and input cost of a long run: 500 turns (the shape of examples/long_run.py).

Every turn the scripted model reads another ~460-token page, so the transcript grows until the
context guard compacts it. Each request is encoded by the real adapters (Anthropic Messages and
OpenAI Chat Completions); its *cacheable prefix* is the part of its wire form, in the
provider's cache order (tools, system, messages) and without breakpoint markers, that is
byte-identical to the previous request's. The share is cacheable characters / all characters.

Input cost is priced from the genai-prices table (``agentloop.pricing``), per request:

- without caching: every input token at the input rate;
- with caching: the cacheable prefix as cache reads, the rest as cache writes on Anthropic
  (breakpoints write what is new) or plain input on OpenAI (automatic caching, no write price).
  The providers' minimums apply: nothing is cached below 1,024 tokens, and OpenAI caches in
  128-token steps.

Two compaction settings: the default ``TruncatingCompactor()`` (first message + 4 recent) and
the cache-friendly one, ``TruncatingCompactor(head_share=0.8, preserve_recent=2)`` (a stable
head of up to 80 % of the compaction target, then the last call and its results). Run:
``.venv/bin/python bench/cache_share.py`` (about 20 s). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentloop import Agent, ModelRequest, RunConfig, tool
from agentloop.context import Compactor, TruncatingCompactor
from agentloop.messages import Usage
from agentloop.pricing import table_cost
from agentloop.providers import anthropic, openai
from agentloop.testing import FunctionModel, call, reply
from agentloop.tokens import HeuristicTokenCounter, estimate_request

SYSTEM = "You read long documents page by page."
ANTHROPIC_MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-4.1"
MIN_CACHED = 1024
COUNTER = HeuristicTokenCounter()


@tool
def read_page(page: int) -> str:
    """Read one page of a long document."""
    return f"page {page}: " + "the quick brown fox jumps over the lazy dog. " * 40


def record(window: int, turns: int, compactor: Compactor) -> list[ModelRequest]:
    """The requests of one run, as the model received them."""
    requests: list[ModelRequest] = []

    def model(request: ModelRequest) -> Any:
        requests.append(request)
        if len(requests) < turns:
            return call("read_page", {"page": len(requests)})
        return reply(f"read {turns - 1} pages")

    config = RunConfig(context_window=window, max_turns=turns + 10, compactor=compactor)
    agent = Agent(FunctionModel(model), tools=[read_page], system=SYSTEM, config=config)
    agent.run_sync("Read the whole document.")
    return requests


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def cache_order(payload: dict[str, Any], keys: tuple[str, ...]) -> str:
    """The wire form in the provider's cache order, breakpoints removed."""
    return "".join(json.dumps(_plain(payload.get(k)), separators=(",", ":")) for k in keys)


@dataclass
class Measure:
    share: float
    input_tokens: int
    cost_uncached: float | None
    cost_cached: float | None


Encoder = Callable[[ModelRequest], dict[str, Any]]
PROVIDERS: dict[str, tuple[Encoder, tuple[str, ...], str, bool]] = {
    "anthropic": (
        lambda r: anthropic.build_payload(r, model=ANTHROPIC_MODEL, max_tokens=1024, stream=False),
        ("tools", "system", "messages"),
        ANTHROPIC_MODEL,
        True,
    ),
    "openai": (
        lambda r: openai.encode_request(r, OPENAI_MODEL, cache_key=True),
        ("tools", "messages"),
        OPENAI_MODEL,
        False,
    ),
}


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (bisected, C comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _add(total: float | None, cost: float | None) -> float | None:
    return None if total is None or cost is None else total + cost


def measure(requests: list[ModelRequest], provider: str) -> Measure:
    """Cacheable share and the priced input of ``requests`` for one provider."""
    encode, keys, model, writes = PROVIDERS[provider]
    previous = ""
    chars = cached_chars = tokens = 0
    uncached_cost: float | None = 0.0
    cached_cost: float | None = 0.0
    for request in requests:
        wire = cache_order(encode(request), keys)
        common = common_prefix(previous, wire)
        chars, cached_chars, previous = chars + len(wire), cached_chars + common, wire
        size = estimate_request(request.messages, system=SYSTEM, tools=request.tools,
                                counter=COUNTER)  # fmt: skip
        read = size * common // len(wire)
        read = 0 if read < MIN_CACHED else (read if writes else read // 128 * 128)
        write = size - read if writes and size >= MIN_CACHED else 0
        tokens += size
        uncached_cost = _add(uncached_cost, table_cost(Usage(size, 0), model))
        usage = Usage(size, 0, cache_read_tokens=read, cache_write_tokens=write)
        cached_cost = _add(cached_cost, table_cost(usage, model))
    return Measure(cached_chars / chars, tokens, uncached_cost, cached_cost)


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    args = parser.parse_args()
    compactors: dict[str, Compactor] = {
        "default": TruncatingCompactor(),
        "stable head": TruncatingCompactor(head_share=0.8, preserve_recent=2),
    }
    print(f"{args.turns} turns; {ANTHROPIC_MODEL} and {OPENAI_MODEL} priced by genai-prices")
    print(f"{'window':>7} {'compaction':<12} {'provider':<10} {'share':>7} {'input tok':>10} "
          f"{'no cache':>9} {'cached':>9}")  # fmt: skip
    for window in (8_000, 32_000):
        for name, compactor in compactors.items():
            requests = record(window, args.turns, compactor)
            for provider in PROVIDERS:
                m = measure(requests, provider)
                print(f"{window:>7} {name:<12} {provider:<10} {m.share:>7.1%} "
                      f"{m.input_tokens:>10,} {_money(m.cost_uncached):>9} "
                      f"{_money(m.cost_cached):>9}")  # fmt: skip


if __name__ == "__main__":
    main()
