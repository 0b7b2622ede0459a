"""Secret redaction for text that leaves the process (logs, traces, stored results).

``redact_secrets`` replaces what looks like a credential with ``[REDACTED]``: provider API keys
by their well-known prefixes, ``Bearer`` tokens, ``key=value`` pairs whose key names a secret,
and long high-entropy tokens (>= 32 characters, >= 4.5 bits of Shannon entropy per character).
Hex digests (at most 4 bits per character), UUIDs, paths and prose are left alone. Every
pattern is compiled once; text without a candidate costs one regex scan per pattern.
"""

from __future__ import annotations

import math
import re
from collections import Counter

__all__ = ["REDACTED", "redact_secrets", "shannon_entropy"]

REDACTED = "[REDACTED]"

MIN_ENTROPY_LENGTH = 32
"""High-entropy tokens shorter than this are kept."""
MIN_ENTROPY_BITS = 4.5
"""Bits of Shannon entropy per character at which a long token counts as a secret."""

_PREFIXED_KEYS = re.compile(
    r"""
    \b(?:
        sk-ant-[A-Za-z0-9_-]{8,}                    # Anthropic
      | sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}  # OpenAI and look-alikes
      | AIza[0-9A-Za-z_-]{30,}                      # Google
      | gh[pousr]_[A-Za-z0-9]{30,}                  # GitHub tokens
      | github_pat_[A-Za-z0-9_]{30,}                # GitHub fine-grained tokens
      | xox[abposr]-[A-Za-z0-9-]{10,}               # Slack
      | (?:AKIA|ASIA)[0-9A-Z]{16}                   # AWS access key ids
    )""",
    re.VERBOSE,
)

_BEARER = re.compile(
    r"\b(Bearer|Basic)(\s+)(?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE
)

_SECRET_ASSIGNMENT = re.compile(
    r"""
    (\b[\w.-]*?
        (?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?token
          |secret|token|password|passwd|pwd|credentials?)
        ["']?\s*[:=]\s*["']?)
    (?![\["'\s]|REDACTED)
    ([^\s"',;&}]+)
    """,
    re.VERBOSE | re.IGNORECASE,
)

_CANDIDATE = re.compile(rf"[A-Za-z0-9+/=_-]{{{MIN_ENTROPY_LENGTH},}}")


def shannon_entropy(text: str) -> float:
    """Bits of Shannon entropy per character of ``text`` (0.0 for empty text)."""
    if not text:
        return 0.0
    length = len(text)
    return -sum(n / length * math.log2(n / length) for n in Counter(text).values())


def _redact_high_entropy(match: re.Match[str]) -> str:
    token = match.group(0)
    if "/" in token and not _looks_random_path(token):
        return token
    return REDACTED if shannon_entropy(token) >= MIN_ENTROPY_BITS else token


def _looks_random_path(token: str) -> bool:
    """A slash-separated run counts as a secret only if no segment reads like a word."""
    return not any(segment.isalpha() and len(segment) >= 3 for segment in token.split("/"))


def redact_secrets(text: str) -> str:
    """Replace API keys, bearer tokens, secret assignments and high-entropy tokens.

    Args:
        text: any text.

    Returns:
        ``text`` with each secret replaced by ``[REDACTED]``; key names, ``Bearer`` and
        separators are kept (``password=[REDACTED]``, ``Bearer [REDACTED]``).
    """
    text = _PREFIXED_KEYS.sub(REDACTED, text)
    text = _BEARER.sub(rf"\1\2{REDACTED}", text)
    text = _SECRET_ASSIGNMENT.sub(rf"\1{REDACTED}", text)
    return _CANDIDATE.sub(_redact_high_entropy, text)
