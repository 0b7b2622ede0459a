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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from agentloop._util.numbers import require_number
from agentloop._util.slots import record
from agentloop.messages import Usage

__all__ = ["Price", "estimate_cost", "sum_costs", "table_available", "table_cost"]


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

    def __post_init__(self) -> None:
        _non_negative("input_per_million", self.input_per_million)
        _non_negative("output_per_million", self.output_per_million)
        _non_negative("cache_read_per_million", self.cache_read_per_million)
        _non_negative("cache_write_per_million", self.cache_write_per_million)

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
    if price is not None:
        return price.cost(usage)
    return table_cost(usage, model, provider)


def sum_costs(costs: Iterable[float | None]) -> float | None:
    """The total of several estimates; None as soon as one is unknown."""
    total = 0.0
    for cost in costs:
        if cost is None:
            return None
        total += cost
    return total
