"""A request body as JSON, checked where it enters both UI apps (SPEC 18, hostile requests).

``decode`` reads a body with pydantic_core's parser (jiter), which refuses, as not JSON, what
no later step could take safely: nesting deeper than ``MAX_DEPTH`` levels (the stdlib parser
would recurse until a bare ``RecursionError``), a lone surrogate escape (half of a UTF-16
pair: no Unicode text, it could not be encoded into the response or stored) and
``NaN``/``Infinity`` (not JSON). Every failure is one ``ValueError`` whose text starts ``the
body is not JSON:`` (or the caller's own words). ``read_capped`` reads the body itself, never
past a cap (the apps' 413), for the UI apps and the A2A app alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_core import from_json

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["MAX_DEPTH", "decode", "read_capped"]

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


async def read_capped(request: Request, limit: int) -> bytes | None:
    """The request's body, or None when it is (or says it is) larger than ``limit`` bytes.

    A declared ``Content-Length`` over the cap is refused before reading; an undeclared or
    false one is read only up to the cap.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            return None
    return bytes(body)
