"""The provider's own tools on a run page (SPEC 24): each call, its result or error code, sources.

Drawn from the run's stored messages (``Run.messages``), in their order: a call with what it
asked (a query, a URL, code), its result (the URLs found, the code's output) or its error code
(soft: the run went on), then the reply's citations as links. Only ``http``/``https`` URLs
become links (a ``javascript:`` URL from a page the provider read stays text); every string
goes through ``_html.text``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloop.messages import ProviderToolCallPart, ProviderToolResultPart, TextPart
from agentloop.ui.viewer._html import attr, json_text, text

if TYPE_CHECKING:
    from agentloop.messages import Citation, Message
    from agentloop.run import Run

__all__ = ["provider_tools_html"]


def _link(url: str, label: str | None = None) -> str:
    shown = text(label or url)
    if url.startswith(("https://", "http://")):
        return f'<a href="{attr(url)}" rel="noopener noreferrer">{shown}</a>'
    return shown


def _result(part: ProviderToolResultPart) -> str:
    if part.is_error:
        code = text(part.error_code or "failed")
        return f'<li class="provider-result soft-error">error: <code>{code}</code></li>'
    content: Any = part.content
    if isinstance(content, list) and all(isinstance(i, dict) for i in content):
        links = ", ".join(
            _link(str(i.get("url", "")), i.get("title")) for i in content if i.get("url")
        )
        if links:
            return f'<li class="provider-result">found: {links}</li>'
    return f'<li class="provider-result"><pre>{json_text(content)}</pre></li>'


def _citation(citation: Citation) -> str:
    said = f" “{text(citation.cited_text)}”" if citation.cited_text else ""
    return f'<li class="citation">{_link(citation.url, citation.title)}{said}</li>'


def _items(message: Message) -> list[str]:
    items = []
    for part in message.parts:
        if isinstance(part, ProviderToolCallPart):
            items.append(
                f'<li class="provider-call"><b>{text(part.name)}</b> '
                f"<small>({text(part.provider)} runs it)</small>"
                f"<pre>{json_text(dict(part.arguments))}</pre></li>"
            )
        elif isinstance(part, ProviderToolResultPart):
            items.append(_result(part))
        elif isinstance(part, TextPart):
            items.extend(_citation(c) for c in part.citations)
    return items


def provider_tools_html(run: Run) -> str:
    """The section, or "" for a run without provider tools or citations."""
    items = [item for m in run.messages if m.role == "assistant" for item in _items(m)]
    if not items:
        return ""
    return (
        '<section class="provider-tools" id="provider-tools"><h2>provider tools and sources</h2>'
        f"<ul>{''.join(items)}</ul></section>"
    )
