"""The run viewer shows the provider's own tools (SPEC 24): calls, results, errors, sources.

Citations are links, but only for http(s): a URL a web page handed the provider is untrusted.
"""

from __future__ import annotations

from typing import Any

from agentloop.messages import (
    Citation,
    Message,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
)
from agentloop.run import Run, Turn
from agentloop.store import StoredRun
from agentloop.ui.viewer._run_page import run_body
from agentloop.ui.viewer._turns import Nesting


def test_the_run_page_lists_provider_calls_results_and_sources() -> None:
    parts = (
        ProviderToolCallPart("s1", "web_search", {"query": "<b>loops</b>"}, provider="anthropic"),
        ProviderToolResultPart(
            "s1", "web_search", [{"url": "https://a.example", "title": "A"}], provider="anthropic"
        ),
        ProviderToolCallPart("s2", "web_search", {"query": "more"}, provider="anthropic"),
        ProviderToolResultPart(
            "s2", "web_search", None, provider="anthropic", is_error=True, error_code="unavailable"
        ),
        TextPart(
            "It loops.",
            citations=(Citation("https://a.example", "A"), Citation("javascript:alert(1)", "x")),
        ),
    )
    run: Run[Any] = Run(id="r1", input="q", session_id="s", output="It loops.")
    run.turns.append(Turn(index=0, model="claude-sonnet-4-5", text="It loops."))
    run.messages = [Message.user("q"), Message("assistant", parts)]
    stored = StoredRun("s", run, True)
    body = run_body(stored, Nesting([stored]), allow_decisions=False)
    section = body.split('id="provider-tools"')[1]
    assert "<b>web_search</b>" in section and "&lt;b&gt;loops&lt;/b&gt;" in section
    assert '<a href="https://a.example" rel="noopener noreferrer">A</a>' in section
    assert "error: <code>unavailable</code>" in section
    assert 'href="javascript' not in section and "x</li>" in section


def test_a_run_without_them_has_no_section() -> None:
    run: Run[Any] = Run(id="r2", input="q", session_id="s", output="hi")
    run.messages = [Message.user("q"), Message.assistant("hi")]
    stored = StoredRun("s", run, True)
    assert "provider-tools" not in run_body(stored, Nesting([stored]), allow_decisions=False)
