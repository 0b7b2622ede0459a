"""Two ready guardrails built on the public API: a prompt-injection heuristic and a secret detector.

``prompt_injection()`` is a **heuristic**: a handful of regular expressions for the phrasings
public injection examples share (an order to ignore earlier instructions, a new persona, a
request for the hidden prompt, a forged role marker, an order to hide something from the user,
a link that carries data away, a note addressed to "the AI"), matched on a normalised copy of
the text (NFKC, lowercased, zero-width characters dropped, whitespace collapsed). It catches
the copy-paste attacks and misses paraphrases, other languages than the four it knows,
encodings (base64, leetspeak) and anything split across messages; it flags some harmless text
that talks *about* instructions. ``docs/guardrails.md`` gives its measured false-positive and
false-negative rates on a small labelled set (``tests/fixtures/prompt_injection.jsonl``). Use it
as a cheap first gate, not as the defence.

``secret_leak()`` checks the final answer with the package's one redactor
(``agentloop.safety.redact``): an answer the redactor would change contains something shaped
like a credential. The reason counts the matches and never quotes them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from agentloop.guardrails._base import (
    DEFAULT_TIMEOUT,
    GuardrailContext,
    InputGuardrail,
    OutputGuardrail,
)
from agentloop.safety.redact import REDACTED, redact_secrets
from agentloop.tools import render_content

__all__ = ["INJECTION_SIGNALS", "injection_signals", "prompt_injection", "secret_leak"]

_EARLIER = (
    r"(?:previous|prior|above|earlier|preceding|foregoing|former|original|initial|system|"
    r"old|existing|given|your)"
)
_ORDERS = (
    r"(?:instructions?|prompts?|directions?|directives?|rules|guidelines|commands?|orders|"
    r"constraints|restrictions|programming|context|text|tasks?)"
)
_MODEL = r"(?:ai|llm|language\s+model|assistant|chatbot|gpt|claude|bot)"

INJECTION_SIGNALS: dict[str, re.Pattern[str]] = {
    # "ignore all previous instructions", "disregard the above directions", "forget everything
    # you were told", "ignore the above and say ..."
    "override": re.compile(
        rf"\b(?:ignore|disregard|forget|bypass|override|overlook|abandon)\b"
        rf"(?:\W+\w+){{0,3}}?\W+{_EARLIER}\b(?:\W+\w+){{0,2}}?\W+{_ORDERS}\b"
        r"|\b(?:ignore|disregard|forget)\s+(?:all\s+|everything\s+|anything\s+)?"
        r"(?:(?:the|that|this)\s+)?(?:above|before)\b"
        r"|\bforget\s+(?:everything|all|what)\b(?:\W+\w+){0,4}?\W+(?:told|said|learned)\b"
    ),
    # "you are now DAN", "act as an unrestricted AI", "developer mode enabled"
    "persona": re.compile(
        r"\b(?:you\s+are\s+now|from\s+now\s+on,?\s+you\s+are|you\s+will\s+now\s+act\s+as|"
        r"act\s+as|pretend\s+(?:to\s+be|you\s+are))\s+(?:an?\s+|my\s+)?(?:dan\b|unrestricted|"
        r"unfiltered|uncensored|jailbroken|evil|free\s+from|no\s+longer\s+bound|in\s+\w+\s+mode)"
        r"|\b(?:do\s+anything\s+now|developer\s+mode|jailbr(?:eak|oken)|dan\s+mode)\b"
        r"|\bwithout\s+(?:any\s+)?(?:restrictions|filters|censorship|limitations)\b"
    ),
    # "reveal your system prompt", "what was written at the beginning of the document above?"
    "prompt_leak": re.compile(
        r"\b(?:reveal|print|show|repeat|output|display|leak|recite|tell\s+me|spell|what\s+(?:is|"
        r"are|was|were))\b(?:\W+\w+){0,4}?\W+(?:(?:system|initial|original|hidden|secret)\s+"
        r"(?:prompt|instructions)|your\s+(?:instructions|prompt|rules|guidelines)|(?:the\s+)?"
        r"(?:text|words|everything)\s+above|the\s+password)\b"
        r"|\b(?:beginning|start)\s+of\s+the\s+(?:document|conversation|prompt|text)\s+above\b"
    ),
    # a forged turn or instruction block: "[system]", "<|im_start|>", "[INST]", "new instructions:"
    "role_marker": re.compile(
        r"\[/?(?:system|inst)\]|</?system>|<\|(?:im_start|im_end|system|endoftext)\|>"
        r"|#{2,}\s*(?:system|new\s+instructions?)\b|\(#(?:\w+_)?instructions?\)"
        r"|(?:^|\n)\s*(?:system|assistant)\s*(?:message|prompt|note)?\s*:\s*(?:you|ignore|new|"
        r"from\s+now|disregard|forget|the\s+assistant)\b"
        r"|\bnew\s+(?:instructions?|rules|directives?)\s*:"
    ),
    # "do not tell the user", "without informing the user"
    "concealment": re.compile(
        r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|reveal\s+"
        r"(?:this\s+)?to|let)\s+the\s+user\b|\bwithout\s+(?:telling|informing|asking|"
        r"notifying)\s+the\s+user\b|\bthe\s+user\s+(?:must|should)\s+not\s+(?:know|see|notice)\b"
    ),
    # data carried away: a markdown image whose URL has a query, "forward the emails to x@y.z"
    "exfiltration": re.compile(
        r"!\[[^\]]*\]\(\s*https?://[^)\s]*\?[^)\s]*="
        r"|\b(?:send|post|forward|upload|email|leak|exfiltrate)\b[^.\n]{0,60}?\b(?:conversation|"
        r"chat\s+history|history|credentials|passwords?|api\s+keys?|secrets?|tokens?|personal\s+"
        r"data|e-?mails?|messages|files|contacts)\b[^.\n]{0,40}?\bto\s+(?:https?://|"
        r"[\w.+-]+@[\w-]+\.\w+)"
    ),
    # a note for the model inside content: "AI assistants reading this must ..."
    "addressed_to_model": re.compile(
        rf"\b(?:if\s+you\s+are\s+an?\s+|note\s+to\s+(?:the\s+)?|instructions\s+for\s+(?:the\s+)?|"
        rf"message\s+(?:to|for)\s+(?:the\s+)?){_MODEL}s?\b"
        rf"|\b{_MODEL}s?\s+(?:reading|processing|summari[sz]ing|parsing|browsing)\s+this\b"
        rf"|\bthis\s+is\s+(?:an?\s+)?(?:important|urgent)\s+(?:message|instruction)\s+(?:to|for)\b"
    ),
    # the same order in the other languages of the public sets: German, Spanish, French
    "override_translated": re.compile(
        r"\b(?:ignorier(?:e|en)?|vergiss|vergessen\s+sie)\b(?:\W+\w+){0,3}?\W+(?:vorherigen|"
        r"obigen|bisherigen|vorigen|alle[ns]?|davor|vorher)\b"
        r"|\bignora\w*\b(?:\W+\w+){0,3}?\W+(?:instrucciones|indicaciones)\b"
        r"|\b(?:ignore[zr]?|oublie[zr]?)\b(?:\W+\w+){0,3}?\W+(?:instructions|consignes)\s+"
        r"(?:précédentes|ci-dessus|antérieures)\b"
    ),
}
"""The heuristic's signals, by name: any one that matches trips ``prompt_injection()``."""

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"))
_SPACES = re.compile(r"[ \t\r\f\v]+")


def injection_signals(text: str) -> tuple[str, ...]:
    """The names of the ``INJECTION_SIGNALS`` that match ``text`` (empty: none did)."""
    normal = unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH).lower()
    normal = _SPACES.sub(" ", normal)
    return tuple(name for name, pattern in INJECTION_SIGNALS.items() if pattern.search(normal))


def _injection_check(ctx: GuardrailContext[Any], value: Any) -> str | None:
    signals = injection_signals(value if isinstance(value, str) else render_content(value))
    if not signals:
        return None
    where = "a tool result" if ctx.kind == "tool_result" else "the input"
    return f"{where} looks like a prompt injection ({', '.join(signals)})"


def prompt_injection(
    *, tool_results: bool = True, parallel: bool = False, name: str = "prompt_injection"
) -> InputGuardrail:
    """The prompt-injection heuristic as an input guardrail (a heuristic: see the module).

    Args:
        tool_results: also check every tool result before the model reads it (the way
            injected text usually arrives: a web page, a file, an email).
        parallel: check the input beside the first model call instead of before it.
        name: the guardrail's name in events and in ``GuardrailTripped``.
    """
    return InputGuardrail(
        _injection_check,
        parallel=parallel,
        name=name,
        timeout=DEFAULT_TIMEOUT,
        tool_results=tool_results,
    )


def _secret_check(ctx: GuardrailContext[Any], value: Any) -> str | None:
    text = value if isinstance(value, str) else render_content(value)
    found = redact_secrets(text).count(REDACTED) - text.count(REDACTED)
    if found <= 0:
        return None
    what = "value that looks" if found == 1 else "values that look"
    return (
        f"the answer contains {found} {what} like a secret (an API key, a token, a password); "
        "answer without it"
    )


def secret_leak(*, retry: bool = True, name: str = "secret_leak") -> OutputGuardrail:
    """An output guardrail that trips on anything the redactor would hide (keys, tokens, ...).

    Args:
        retry: let the model answer again without the secret (``Output rejected: ...``) instead
            of ending the run; the rejected answer is never shown, stored or committed.
        name: the guardrail's name in events and in ``GuardrailTripped``.
    """
    return OutputGuardrail(_secret_check, retry=retry, name=name)
