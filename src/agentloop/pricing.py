"""What tokens cost: estimates from a maintained price table, never from a list of our own.

Prices come from the ``genai-prices`` package (extra ``cost``), whose table ships inside the
package: a lookup never touches the network. It knows cached and uncached input rates (and the
long-context tiers some models have), so a request is priced on its own ``Usage``:
``uncached_input_tokens`` at the input rate, ``cache_read_tokens`` and ``cache_write_tokens``
at theirs, ``output_tokens`` at the output rate.

A model the table does not know (or any model, without the package) has no price: the estimate
is None, never 0. ``Price`` is the hand-written alternative for such a model (``Budget.prices``
and ``estimate_cost(prices=...)`` take a mapping of them); a ``Price`` given for a model wins
over the table.

The provider's own tools (SPEC 24) are billed per call: ``Usage.provider_tool_calls`` is priced
at ``Price.per_call`` (kind -> USD) when given, else at ``PROVIDER_TOOL_PRICES``; a call with no
price there makes the whole estimate None (a search is never free by omission).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from functools import cache
from typing import Any

from agentloop._util.numbers import require_number
from agentloop._util.slots import record
from agentloop.messages import Usage

__all__ = [
    "PROVIDER_TOOL_PRICES",
    "Price",
    "calls_cost",
    "estimate_cost",
    "sum_costs",
    "table_available",
    "table_cost",
    "turn_cost",
]

PROVIDER_TOOL_PRICES: Mapping[str, Mapping[str, float]] = {
    # Anthropic pricing page: web search $10 per 1,000 searches; web fetch has no charge beyond
    # tokens; code execution is billed by container hours, not per call (no entry: unknown).
    "anthropic": {"web_search": 0.01, "web_fetch": 0.0},
    # OpenAI pricing page (built-in tools): web search $10 per 1,000 calls, file search $2.50
    # per 1,000 calls, code interpreter $0.03 per container (one per call here, an upper bound).
    "openai": {"web_search": 0.01, "file_search": 0.0025, "code_execution": 0.03},
    # Gemini API pricing: grounding with Google Search $14 per 1,000 search queries (Gemini 3);
    # code execution and URL context are billed as tokens only.
    "gemini": {"web_search": 0.014, "code_execution": 0.0, "web_fetch": 0.0},
}
"""US dollars per call of each provider's own tools, by provider and kind (SPEC 24)."""


def _non_negative(name: str, value: float | None) -> None:
    if value is not None:
        require_number(value, f"Price.{name}", field=name, rule="a number >= 0")


@record
class Price:
    """US dollars per million tokens of one model.

    ``cache_read_per_million`` / ``cache_write_per_million`` price the cached parts of the input
    (None: the input rate, i.e. no discount assumed).
    """

    input_per_million: float
    output_per_million: float
    cache_read_per_million: float | None = None
    cache_write_per_million: float | None = None
    per_call: Mapping[str, float] | None = field(default=None, hash=False)
    """US dollars per call of the provider's own tools, by kind (``{"web_search": 0.01}``);
    a kind not here is priced at ``PROVIDER_TOOL_PRICES``."""
    batch_fraction: float = 0.5
    """The share of the synchronous price a batch request costs (SPEC 25; both providers: half)."""

    def __post_init__(self) -> None:
        _non_negative("input_per_million", self.input_per_million)
        _non_negative("output_per_million", self.output_per_million)
        _non_negative("cache_read_per_million", self.cache_read_per_million)
        _non_negative("cache_write_per_million", self.cache_write_per_million)
        for kind, price in (self.per_call or {}).items():
            _non_negative(f"per_call[{kind!r}]", price)
        _non_negative("batch_fraction", self.batch_fraction)

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs in US dollars."""
        read = self.cache_read_per_million
        write = self.cache_write_per_million
        spent = usage.uncached_input_tokens * self.input_per_million
        spent += usage.cache_read_tokens * (self.input_per_million if read is None else read)
        spent += usage.cache_write_tokens * (self.input_per_million if write is None else write)
        return (spent + usage.output_tokens * self.output_per_million) / 1_000_000


@cache
def table_available() -> bool:
    """Whether the ``genai-prices`` table is installed (``pip install 'agentloop[cost]'``)."""
    try:
        import genai_prices  # noqa: F401
    except ImportError:
        return False
    return True


def table_cost(usage: Usage, model: str, provider: str | None = None) -> float | None:
    """US dollars of one request by the ``genai-prices`` table; None when it has no price.

    ``provider`` (``anthropic``, ``openai``, ``google``...) narrows the lookup; without it the
    table finds the provider from the model name.
    """
    if not model or not table_available():
        return None
    from genai_prices import Usage as TableUsage
    from genai_prices import calc_price

    counts = TableUsage(
        input_tokens=usage.input_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    try:
        price: Any = calc_price(counts, model, provider_id=provider)
    except (LookupError, ValueError):
        return None
    return float(price.total_price)


def estimate_cost(
    usage: Usage,
    model: str,
    *,
    provider: str | None = None,
    prices: Mapping[str, Price] | None = None,
) -> float | None:
    """US dollars of one request: ``prices[model]`` when given, else the table; None if unknown."""
    price = (prices or {}).get(model)
    tokens = price.cost(usage) if price is not None else table_cost(usage, model, provider)
    if tokens is None or not usage.provider_tool_calls:
        return tokens
    calls = calls_cost(usage, provider or _provider_of(model), price)
    return None if calls is None else tokens + calls


def turn_cost(
    usage: Usage, model: str, batch: bool = False, *, prices: Mapping[str, Price] | None = None
) -> float | None:
    """``estimate_cost`` of one turn; a batch turn (SPEC 25) at its ``Price.batch_fraction``."""
    cost = estimate_cost(usage, model, prices=prices)
    if not batch or cost is None:
        return cost
    price = (prices or {}).get(model)
    return cost * (0.5 if price is None else price.batch_fraction)


def calls_cost(usage: Usage, provider: str, price: Price | None = None) -> float | None:
    """US dollars of ``usage``'s provider tool calls; None when a kind has no price."""
    listed = PROVIDER_TOOL_PRICES.get(provider, {})
    own = (price.per_call if price is not None else None) or {}
    total = 0.0
    for kind, count in usage.provider_tool_calls.items():
        each = own.get(kind, listed.get(kind))
        if each is None:
            return None
        total += each * count
    return total


def _provider_of(model: str) -> str:
    """The provider a model name belongs to (for its tools' prices): a guess by family."""
    name = model.lower().rpartition("/")[2]
    if "claude" in name:
        return "anthropic"
    if name.startswith("gemini"):
        return "gemini"
    return "openai"


def sum_costs(costs: Iterable[float | None]) -> float | None:
    """The total of several estimates; None as soon as one is unknown."""
    total = 0.0
    for cost in costs:
        if cost is None:
            return None
        total += cost
    return total
