"""Secret redaction for text that leaves the process (logs, traces, stored results, errors).

The one redactor of the package: the engine redacts what it logs and records with it, and the
HTTP layer (``providers/``) redacts every error a server's reply fills in with it, passing the
client's own credentials as explicit ``secrets``.

``redact_secrets`` replaces what looks like a credential with ``[REDACTED]``: the known secret
values it is given, provider API keys by their well-known prefixes, ``Bearer``/``Basic``
credentials, ``key=value`` pairs whose key names a secret (``?key=`` in a URL query included),
the password of a URL's user info (``postgresql://app:[REDACTED]@db``: a DSN in a database
driver's error), and long high-entropy tokens (>= 32 characters, >= 4.5 bits of Shannon
entropy per character).
Hex digests (at most 4 bits per character), UUIDs, paths and prose are left alone. Every
pattern is compiled once; text without a candidate costs one regex scan per pattern.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

__all__ = ["REDACTED", "redact_secrets", "shannon_entropy"]

REDACTED = "[REDACTED]"

MIN_ENTROPY_LENGTH = 32
"""High-entropy tokens shorter than this are kept."""
MIN_ENTROPY_BITS = 4.5
"""Bits of Shannon entropy per character at which a long token counts as a secret."""
MIN_SECRET_LENGTH = 4
"""Known secret values shorter than this are not searched for (they would match anywhere)."""

# No leading \b: a pattern that starts with literal characters lets the regex engine skip ahead;
# the left boundary is checked in ``_redact_prefixed`` instead.
_PREFIXED_KEYS = re.compile(
    r"""
    (?:
        sk-ant-[A-Za-z0-9_-]{8,}                            # Anthropic
      | sk-(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{4,}            # OpenAI & co (a digit: not sk-learn)
      | AIza[0-9A-Za-z_-]{10,}                              # Google
      | gh[pousr]_[A-Za-z0-9]{30,}                          # GitHub tokens
      | github_pat_[A-Za-z0-9_]{30,}                        # GitHub fine-grained tokens
      | xox[abposr]-[A-Za-z0-9-]{10,}                       # Slack
      | (?:AKIA|ASIA)[0-9A-Z]{16}                           # AWS access key ids
    )""",
    re.VERBOSE,
)

# A credential has a digit or punctuation in it: "Bearer tokens are described in..." is prose.
_BEARER = re.compile(
    r"\b(Bearer|Basic)(\s+)(?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{4,}", re.IGNORECASE
)

# Matched against the lowercased text (same length), which is several times faster than
# IGNORECASE; replacements are applied to the original text by position.
_SECRET_ASSIGNMENT = re.compile(
    r"""
    (?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?token
      |secret|token|password|passwd|pwd|credentials?|(?<=[?&])key)
    ["']?\s*[:=]\s*["']?
    (?![\["'\s]|redacted)
    ([^\s"',;&}]+)
    """,
    re.VERBOSE,
)

# scheme://user:password@host: the user and the host stay (they say which server failed).
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)([^/\s@]+)(@)"
)

_SECRET_ASSIGNMENT_ANY_CASE = re.compile(_SECRET_ASSIGNMENT.pattern, re.VERBOSE | re.IGNORECASE)

_MIN_DISTINCT = math.ceil(2**MIN_ENTROPY_BITS)
"""Fewer distinct characters than this cannot reach ``MIN_ENTROPY_BITS`` (entropy <= log2 of
their count): hex digests and request ids skip the count."""

_CANDIDATE = re.compile(rf"[A-Za-z0-9+/=_-]{{{MIN_ENTROPY_LENGTH},}}")


def shannon_entropy(text: str) -> float:
    """Bits of Shannon entropy per character of ``text`` (0.0 for empty text)."""
    if not text:
        return 0.0
    length = len(text)
    return -sum(n / length * math.log2(n / length) for n in Counter(text).values())


def _redact_high_entropy(match: re.Match[str]) -> str:
    token = match.group(0)
    if len(set(token)) < _MIN_DISTINCT or ("/" in token and not _looks_random_path(token)):
        return token
    return REDACTED if shannon_entropy(token) >= MIN_ENTROPY_BITS else token


def _looks_random_path(token: str) -> bool:
    """A slash-separated run counts as a secret only if no segment reads like a word."""
    return not any(segment.isalpha() and len(segment) >= 3 for segment in token.split("/"))


def _redact_prefixed(match: re.Match[str]) -> str:
    start = match.start()
    if start and (match.string[start - 1].isalnum() or match.string[start - 1] == "_"):
        return match.group(0)
    return REDACTED


def _redact_assignments(text: str) -> str:
    lowered = text.lower()
    if len(lowered) != len(text):  # a rare character whose lowercase is longer
        return _SECRET_ASSIGNMENT_ANY_CASE.sub(_keep_key, text)
    pieces: list[str] = []
    position = 0
    for match in _SECRET_ASSIGNMENT.finditer(lowered):
        pieces.append(text[position : match.start(1)])
        pieces.append(REDACTED)
        position = match.end(1)
    if not pieces:
        return text
    pieces.append(text[position:])
    return "".join(pieces)


def _keep_key(match: re.Match[str]) -> str:
    return match.group(0)[: match.start(1) - match.start()] + REDACTED


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """Replace known secrets, API keys, bearer tokens, secret assignments and high-entropy tokens.

    Args:
        text: any text.
        secrets: values known to be secret (a client's API key): each occurrence is replaced
            first, whatever its shape; values shorter than ``MIN_SECRET_LENGTH`` are ignored.

    Returns:
        ``text`` with each secret replaced by ``[REDACTED]``; key names, ``Bearer`` and
        separators are kept (``password=[REDACTED]``, ``Bearer [REDACTED]``).
    """
    for secret in secrets:
        if len(secret) >= MIN_SECRET_LENGTH:
            text = text.replace(secret, REDACTED)
    text = _PREFIXED_KEYS.sub(_redact_prefixed, text)
    if "://" in text:
        text = _URL_PASSWORD.sub(rf"\1{REDACTED}\3", text)
    lowered = text.lower()
    if "bearer" in lowered or "basic" in lowered:
        text = _BEARER.sub(rf"\1\2{REDACTED}", text)
    if "=" in text or ":" in text:
        text = _redact_assignments(text)
    if max(map(len, text.split()), default=0) >= MIN_ENTROPY_LENGTH:  # cheaper than the regex
        text = _CANDIDATE.sub(_redact_high_entropy, text)
    return text
