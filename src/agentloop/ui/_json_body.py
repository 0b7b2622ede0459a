"""A request body as JSON, checked where it enters both UI apps (SPEC 18, hostile requests).

``decode`` reads a body with pydantic_core's parser (jiter), which refuses, as not JSON, what
no later step could take safely: nesting deeper than ``MAX_DEPTH`` levels (the stdlib parser
would recurse until a bare ``RecursionError``), a lone surrogate escape (half of a UTF-16
pair: no Unicode text, it could not be encoded into the response or stored) and
``NaN``/``Infinity`` (not JSON). Every failure is one ``ValueError`` whose text starts ``the
body is not JSON:`` (or the caller's own words).
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json

__all__ = ["MAX_DEPTH", "decode"]

MAX_DEPTH = 200
"""The deepest nesting the parser takes (jiter's own limit); deeper is not JSON to the apps."""


def decode(body: bytes | bytearray | str, refusal: str = "the body is not JSON") -> Any:
    """``body`` decoded; ``ValueError`` (``<refusal>: <the problem>``) when it cannot be."""
    try:
        return from_json(body, allow_inf_nan=False)
    except ValueError as exc:
        problem = str(exc)
        if problem.startswith("recursion limit exceeded"):
            problem = f"nested deeper than {MAX_DEPTH} levels"
        elif "surrogate" in problem:
            problem = f"{problem} (a lone surrogate is not Unicode text)"
        raise ValueError(f"{refusal}: {problem}") from None
