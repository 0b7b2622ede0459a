"""The one way stored text reaches the page: redacted, then escaped.

Everything the viewer shows from a store (a model's reply, a tool's arguments and result, an
error's message, a session id) is user, model or provider text. ``text`` passes it through the
package's one redactor (``agentloop.safety.redact``: an API key, a bearer token or a
``password=...`` becomes ``[REDACTED]``) and then HTML-escapes it, so no stored value is markup
and none shows a key. The page builders write HTML only around values that went through here.

``page`` is the skeleton every page shares: one stylesheet and one script, both served by the
package (``static/``), and nothing from any other host.
"""

from __future__ import annotations

import html
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:
    from agentloop.ui.viewer._records import Cost

__all__ = [
    "attr",
    "cost",
    "json_text",
    "live",
    "page",
    "run_cost",
    "seconds",
    "text",
    "tokens",
    "when",
]


def text(value: object) -> str:
    """``value`` as page text: secrets redacted, then HTML escaped (never markup)."""
    return html.escape(redact_secrets(str(value)), quote=True)


def attr(value: object) -> str:
    """``value`` for an attribute inside double quotes (the same treatment as ``text``)."""
    return text(value)


def json_text(value: Any) -> str:
    """A value as indented JSON page text (tool arguments, attributes)."""
    dumped = json.dumps(value, ensure_ascii=False, indent=2, default=str, sort_keys=False)
    return text(dumped)


def when(timestamp: float | None) -> str:
    """A stored wall-clock time, to the second, in the server's local time."""
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp).isoformat(sep=" ", timespec="seconds")


def seconds(value: float | None) -> str:
    """Seconds rounded for reading: 0.25 s, 3.1 s, 42 s."""
    if value is None:
        return "-"
    if value >= 10:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.1f} s"
    return f"{value:.2f} s"


def cost(value: float | None, *, at_least: bool = False) -> str:
    """US dollars, or ``unknown`` (never ``$0`` for a price nobody knows); ``≥`` a lower bound."""
    if value is None:
        return "unknown"
    dollars = f"${value:.4f}" if value < 1 else f"${value:.2f}"
    if at_least:
        why = "the recorded turns; the failed model call may have been billed too"
        return f'<span class="cost at-least" title="{why}">≥ {dollars}</span>'
    return dollars


def run_cost(spent: Cost) -> str:
    """A run's ``Cost`` as ``cost`` writes it."""
    return cost(spent.dollars, at_least=spent.at_least)


def tokens(count: int) -> str:
    """A token count with thousands separators."""
    return f"{count:,}"


def live(inner: str, stream: str | None) -> str:
    """The part of a page the server pushes again (Server-Sent Events from ``stream``)."""
    source = f' data-stream="{attr(stream)}"' if stream else ""
    return f'<div id="live"{source}>{inner}</div>'


def page(title: str, body: str) -> str:
    """A whole page around ``body``: the package's stylesheet and script, nothing else."""
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)} · agentloop</title>"
        '<link rel="stylesheet" href="/static/viewer.css">'
        '<script src="/static/viewer.js" defer></script>'
        "</head>"
        '<body><header class="top"><a href="/" class="brand">agentloop runs</a></header>'
        f"<main>{body}</main></body></html>\n"
    )
