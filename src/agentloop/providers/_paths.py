"""A name that goes into a URL path, checked before any request (issue 32, item 8).

Some providers put the model in the path rather than the body: Gemini
(``/models/{model}:generateContent``), Vertex AI (``.../publishers/anthropic/models/{model}:
rawPredict``), Azure OpenAI's dated API (``/openai/deployments/{name}/...``). A name such as
``"../../admin/delete?x="`` would then send the keyed request to another path on the provider's
host: the URL library folds the dot segments, and ``?`` or ``#`` end the path. So a name that
goes into a path is one segment of RFC 3986 *unreserved* characters (letters, digits, ``.``,
``_``, ``-``, ``~``), starting with a letter or digit, at most ``MAX_SEGMENT`` characters;
an adapter may allow a few more characters its provider's names use and the path grammar
allows unescaped (Vertex's ``@`` in ``claude-sonnet-4-5@20250929``). Anything else is a
``ConfigurationError`` naming the name and what is allowed, never escaped into something the
user did not write: every real model name already fits, so a name that does not is a mistake
or an attack, and the provider would only answer it with a 404.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from agentloop.errors import ConfigurationError

__all__ = ["MAX_SEGMENT", "as_sent", "path_segment"]

MAX_SEGMENT = 256
"""The longest name accepted as a path segment (Gemini's tuned-model ids are 40 at most)."""

_UNRESERVED = "A-Za-z0-9._~"


@cache
def _grammar(extra: str) -> re.Pattern[str]:
    allowed = _UNRESERVED + re.escape(extra) + "-"  # the dash last: not a range
    return re.compile(f"[A-Za-z0-9][{allowed}]{{0,{MAX_SEGMENT - 1}}}")


def path_segment(
    name: object,
    *,
    provider: str,
    example: str,
    what: str = "model",
    extra: str = "",
    given: object = None,
) -> str:
    """``name`` unchanged when it is safe as one URL path segment, else ``ConfigurationError``.

    Args:
        name: The name to put in the path (a model, a deployment).
        provider: Named in the error (``"Gemini"``).
        example: A name that fits, shown in the error (``"gemini-2.5-flash"``).
        what: What the name is, named in the error and the error's ``field``.
        extra: Characters beyond the unreserved ones that this provider's names use and that a
            path segment may hold unescaped (``"@"`` for Vertex); never ``/``, ``?``, ``#``
            or ``%``.
        given: The name as the user wrote it, for the error, when ``name`` is a part of it
            (Gemini's ``models/<id>``).
    """
    assert not set(extra) & set("/?#%\\"), "a path separator is never allowed"
    if isinstance(name, str) and _grammar(extra).fullmatch(name):
        return name
    given = name if given is None else given
    shown = repr(given) if isinstance(given, str) else f"a {type(given).__name__}"
    also = "".join(f", {c!r}" for c in extra)
    raise ConfigurationError(
        f"{provider} {what} {shown:.80} cannot go in the request's URL path: a {what} name is "
        f"letters, digits, '.', '_', '-', '~'{also} (starting with a letter or digit, at most "
        f"{MAX_SEGMENT} characters), such as {example!r}",
        field=what,
    )


def as_sent(url: str) -> Any:
    """``url`` with its percent-escapes kept, for the HTTP layer to send as it is.

    yarl would decode a Bedrock model id's ``%3A``, and the SigV4 signature, made over the
    escaped path, would no longer match it.
    """
    if "%" not in url:
        return url
    from yarl import URL

    return URL(url, encoded=True)
