"""A cassette's side of the batch APIs' calls (SPEC 23, 25): the upload, the status GETs, results.

``providers._http_calls.call`` hands each call of a transport here while a cassette is
active. The request is stored as any other (``{method, path, body}``; a multipart upload as its
fields, the JSONL file as a list), the response with its status whatever it is, so a recorded
failure replays as the same error. A batch status GET matches the first unplayed recording of
it, and once those are played, the last one again (a run polled more often than recorded sees
its batch ended).

A batch's results name each request by ``custom_id``, ``<run id>_<turn>_<attempt>``, and a replay
has fresh run ids. So run ids in these responses are stored as ``<run-id N>``: the N-th run id the
block's requests carried (in order of first appearance, which strict matching keeps); a replay
puts the N-th run id of its own requests there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.cassettes._format import (
    kept_headers,
    parse_body,
    request_record,
    run_ids,
    scrub_known,
)
from agentloop.providers._classify import read_request_id
from agentloop.providers._http_calls import parse_json, send

if TYPE_CHECKING:
    from agentloop.cassettes import Cassette
    from agentloop.providers._http import HttpResponse, HttpTransport
    from agentloop.providers._http_calls import Form

__all__ = ["taped_call"]

_NUMBERED = re.compile(r"<run-id (\d+)>")
_JSONL_TYPES = ("jsonl", "ndjson", "jsonlines", "json-seq")


async def taped_call(
    cassette: Cassette,
    transport: HttpTransport,
    method: str,
    url: str,
    payload: Mapping[str, Any] | None,
    form: Form | None,
    limit: int | None,
) -> HttpResponse:
    """Replay the recorded answer to this call, or send it and keep the exchange."""
    secrets = cassette._secrets(transport)
    body = _form_record(form) if form is not None else payload
    cassette._note_ids(run_ids(json.dumps(body, default=str)) if body is not None else [])
    request = request_record(method, url, body, secrets)
    if not cassette.recording:
        return _replayed(cassette, cassette._take(request)["response"])
    reply = await send(transport, method, url, payload=payload, form=form, limit=limit)
    text = cassette._number_ids(reply.text)
    kept = {
        "status": reply.status,
        "headers": kept_headers(reply.headers, secrets),
        "body": parse_body(scrub_known(text, secrets).encode()),
    }
    cassette._keep(request, kept)
    return reply


def _form_record(form: Form) -> dict[str, Any]:
    """A multipart form as stored: each field's text, a file as its parsed content."""
    return {
        name: value if isinstance(value, str) else parse_body(value[1])
        for name, value in form.items()
    }


def _replayed(cassette: Cassette, response: Mapping[str, Any]) -> HttpResponse:
    from agentloop.providers._http import HttpResponse

    headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
    body = response.get("body")
    if isinstance(body, str):
        text = body
    elif isinstance(body, list) and any(t in headers.get("content-type", "") for t in _JSONL_TYPES):
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in body)
    else:
        text = json.dumps(body, ensure_ascii=False)
    text = _NUMBERED.sub(lambda m: cassette._live_id(int(m.group(1))) or m.group(0), text)
    status = int(response.get("status", 200))
    return HttpResponse(status, headers, parse_json(text), text, read_request_id(headers, ()))
