"""A run's tokens and cost per turn as an inline SVG, drawn on the server (no chart library).

One group of bars a turn: input tokens (the cached part in a lighter shade, on top) and output
tokens beside them, on one token scale; the run's cumulative cost is a line on its own scale
when every turn's price is known. Each bar carries a ``<title>`` with its numbers, which the
browser shows on hover. The numbers are counts we computed, never stored text.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentloop._util.slots import record
from agentloop.messages import Usage

__all__ = ["TurnPoint", "chart"]

WIDTH, HEIGHT, PAD, TOP = 640, 180, 36, 12


@record
class TurnPoint:
    """One turn's numbers: its index, usage and estimated cost (None when unknown)."""

    index: int
    usage: Usage
    cost: float | None


def _bar(x: float, y: float, width: float, height: float, css: str, title: str) -> str:
    return (
        f'<rect class="{css}" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}">'
        f"<title>{title}</title></rect>"
    )


def _turn_bars(point: TurnPoint, x: float, slot: float, scale: float) -> list[str]:
    usage, base = point.usage, HEIGHT - PAD
    bar = max(1.0, slot * 0.35)
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    fresh = max(0, usage.input_tokens - cached)
    title = f"turn {point.index}: {usage.input_tokens:,} in ({cached:,} cached)"
    shapes = [
        _bar(x, base - fresh * scale, bar, fresh * scale, "bar-in", title),
        _bar(x, base - (fresh + cached) * scale, bar, cached * scale, "bar-cached", title),
        _bar(
            x + bar,
            base - usage.output_tokens * scale,
            bar,
            usage.output_tokens * scale,
            "bar-out",
            f"turn {point.index}: {usage.output_tokens:,} out",
        ),
        f'<text x="{x + bar:.1f}" y="{base + 14}" text-anchor="middle">{point.index}</text>',
    ]
    return shapes


def _cost_line(points: Sequence[TurnPoint], slot: float) -> list[str]:
    costs = [p.cost for p in points]
    if not points or any(c is None for c in costs):
        return []
    running, total = [], 0.0
    for value in costs:
        total += value or 0.0
        running.append(total)
    if total <= 0:
        return []
    height = HEIGHT - PAD - TOP
    xy = [
        (PAD + slot * (i + 0.5), HEIGHT - PAD - height * value / total)
        for i, value in enumerate(running)
    ]
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    return [
        f'<polyline class="cost-line" points="{path}"><title>cost so far</title></polyline>',
        f'<text class="cost-label" x="{WIDTH - 4}" y="{TOP + 4}" text-anchor="end">'
        f"${total:.4f} total</text>",
    ]


def chart(points: Sequence[TurnPoint]) -> str:
    """The SVG for a run's turns ("" for a run with no turn yet)."""
    if not points:
        return ""
    peak = max(max(p.usage.input_tokens, p.usage.output_tokens) for p in points) or 1
    slot = (WIDTH - 2 * PAD) / len(points)
    scale = (HEIGHT - PAD - TOP) / peak
    shapes = [
        f'<line class="axis" x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" '
        f'y2="{HEIGHT - PAD}"/>',
        f'<text x="{PAD - 4}" y="{TOP + 4}" text-anchor="end">{peak:,}</text>',
        f'<text x="{PAD - 4}" y="{HEIGHT - PAD}" text-anchor="end">0</text>',
    ]
    for i, point in enumerate(points):
        shapes.extend(_turn_bars(point, PAD + slot * i + slot * 0.15, slot, scale))
    shapes.extend(_cost_line(points, slot))
    legend = (
        f'<text class="legend" x="{PAD}" y="{HEIGHT - 4}">tokens per turn: '
        "input (cached lighter) · output · cost so far</text>"
    )
    return (
        f'<svg class="chart" role="img" aria-label="tokens and cost per turn" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">'
        f"{''.join(shapes)}{legend}</svg>"
    )
