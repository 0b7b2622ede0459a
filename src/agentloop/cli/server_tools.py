"""How the terminal shows the provider's own tools (SPEC 24): calls, results, citations.

The live console (``console.RunView``) draws a line per ``ProviderToolCalled`` and
``ProviderToolReturned`` event and the citations of each reply; ``runs show`` draws the same
from a stored run's messages. Everything shown is provider or model text: it goes out as
``rich.text.Text`` (``visible``), never as markup; a citation's URL is a terminal link.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from rich.text import Text

from agentloop.cli.terminal import visible
from agentloop.messages import Message, ProviderToolCallPart, ProviderToolResultPart, TextPart

__all__ = ["call_line", "citation_lines", "message_lines", "result_line"]

_LIMIT = 100


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text[:_LIMIT] + " …" * (len(text) > _LIMIT)


def _what(call: ProviderToolCallPart) -> str:
    arguments = dict(call.arguments)
    for key in ("query", "url", "code"):
        if isinstance(arguments.get(key), str):
            return _short(arguments[key])
    return _short(arguments) if arguments else ""


def call_line(call: ProviderToolCallPart) -> Text:
    """``  ⇢ web_search agentloop (anthropic runs it)``."""
    return Text.assemble(
        "  ", ("⇢", "magenta"), " ", (visible(call.name), "magenta"), " ",
        visible(_what(call)), (f" ({visible(call.provider)} runs it)", "dim"),
    )  # fmt: skip


def _found(content: Any) -> str:
    if isinstance(content, list):
        urls = [str(i.get("url")) for i in content if isinstance(i, dict) and i.get("url")]
        if urls:
            return f"{len(content)} result{'s' * (len(content) != 1)}: " + ", ".join(urls[:3])
    if isinstance(content, dict):
        for key in ("stdout", "output", "content"):
            if isinstance(content.get(key), str) and content[key].strip():
                return _short(content[key])
    return _short(content) if content else "(nothing)"


def result_line(result: ProviderToolResultPart) -> Text:
    """``    ok: 3 results: ...`` or ``    error: max_uses_exceeded`` (soft: the run went on)."""
    if result.is_error:
        code = visible(result.error_code or "failed")
        return Text.assemble("    ", ("provider tool error", "yellow"), ": ", code)
    return Text.assemble("    ", ("ok", "green"), ": ", visible(_found(result.content)))


def citation_lines(message: Message) -> Iterator[Text]:
    """``    [1] Title`` linked to its URL, for each citation of the message's text."""
    number = 0
    for part in message.parts:
        if not isinstance(part, TextPart):
            continue
        for citation in part.citations:
            number += 1
            title = visible(citation.title or citation.url)
            link = Text(title, style=f"link {citation.url}" if citation.url else "")
            yield Text.assemble("    ", (f"[{number}] ", "dim"), link, " ", (citation.url, "dim"))


def message_lines(message: Message) -> Iterator[Text]:
    """Every provider tool call, result and citation of a stored assistant message."""
    for part in message.parts:
        if isinstance(part, ProviderToolCallPart):
            yield call_line(part)
        elif isinstance(part, ProviderToolResultPart):
            yield result_line(part)
    yield from citation_lines(message)
