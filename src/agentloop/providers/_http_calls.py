"""The other calls of a provider API, beside model requests: the batch APIs' uploads and reads.

SPEC 25's batch runs upload a JSONL file (a multipart form), create a batch, read its status and
download its results. They go through the client's own ``HttpTransport`` (its session, headers,
proxy, TLS, limits and redaction) and, like every model request, through an active cassette
(``_tape.TAPE``, SPEC 23): one channel for all of a client's HTTP. ``call`` answers any status
with the error a synchronous model request with that status and body would raise (SPEC 8), after
the cassette has kept the exchange, so a recorded failure replays as the same error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.providers._classify import error_for_status, read_request_id, redirect_error

if TYPE_CHECKING:
    from agentloop.providers._http import HttpResponse, HttpTransport

__all__ = ["Form", "call", "parse_json", "raise_for_status", "send"]

Form = Mapping[str, "str | tuple[str, bytes]"]
"""A multipart form: a field's text, or a file as ``(filename, content)``."""


async def call(
    transport: HttpTransport,
    method: str,
    url: str,
    *,
    payload: Mapping[str, Any] | None = None,
    form: Form | None = None,
    limit: int | None = None,
) -> HttpResponse:
    """One API call (a cassette's, if one is active); a failure status raises its error."""
    from agentloop.providers._tape import TAPE

    tape = TAPE.get()
    if tape is not None:
        reply: HttpResponse = await tape.call(transport, method, url, payload, form, limit)
    else:
        reply = await send(transport, method, url, payload=payload, form=form, limit=limit)
    return raise_for_status(reply, transport, url)


def raise_for_status(reply: HttpResponse, transport: HttpTransport, url: str) -> HttpResponse:
    """``reply`` when it succeeded; else the error its status and body make (as live, SPEC 8)."""
    if reply.status < 300:
        return reply
    secrets = transport.secrets
    if reply.status < 400:
        raise redirect_error(reply.status, reply.headers, url, transport.provider, secrets)
    raise error_for_status(
        reply.status, reply.headers, reply.text, provider=transport.provider, secrets=secrets,
        url=url,
    )  # fmt: skip


async def send(
    transport: HttpTransport,
    method: str,
    url: str,
    *,
    payload: Mapping[str, Any] | bytes | None = None,
    form: Form | None = None,
    headers: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> HttpResponse:
    """The call over the network, whatever its status; ``data`` is the parsed JSON or None.

    ``headers`` go beside the transport's own (a signed request's); a cassette that records a
    model request sends it this way, so a refused one is kept with its status and headers.
    """
    from agentloop.providers._http import HttpResponse, form_data
    from agentloop.providers._http_errors import foreign_errors as _foreign_errors
    from agentloop.providers._http_errors import lower_headers as _lower_headers
    from agentloop.providers._paths import as_sent

    sent = {**transport._sent_headers("application/json"), **(headers or {})}
    kwargs: dict[str, Any] = {}
    if form is not None:
        sent.pop("Content-Type", None)  # aiohttp writes the multipart boundary
        kwargs["data"] = form_data(form)
    elif payload is not None:
        kwargs["data"] = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    else:
        sent.pop("Content-Type", None)
    target = url if "%" not in url else as_sent(url)  # a Bedrock model id keeps its escapes
    try:
        session = await transport._sessions.get()
        response = await session.request(
            method, target, headers=sent, allow_redirects=False, proxy=transport._proxy, **kwargs
        )
    except _foreign_errors() as exc:
        raise transport._translate(exc, "send") from exc
    try:
        raw = await transport._read(response, limit=limit or transport.max_body)
    finally:
        response.release()
    lowered = _lower_headers(response)
    text = raw.decode("utf-8", errors="replace")
    request_id = read_request_id(lowered, transport.secrets)
    return HttpResponse(response.status, lowered, parse_json(text), text, request_id)


def parse_json(text: str) -> Any:
    """The JSON value of ``text``, or None (a JSONL download, an empty body)."""
    try:
        return json.loads(text)
    except ValueError:
        return None
