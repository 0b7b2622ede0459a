"""The fake server's batch APIs (SPEC 25): OpenAI's files and batches, Anthropic's message batches.

A batch plays one script step per request it holds, at submission, in the order of its lines;
its results are ready ``complete_after`` seconds later (``batch = {complete_after = S}`` in a
script). Each step's ``batch_result`` says how the batch answers it:

- ``succeeded``: the reply, in the endpoint's own body (chat completion, response, message);
- ``errored``: a fault's status and body (a reply's is a 500 ``server_error``);
- ``expired`` / ``canceled``: the request was not run.

OpenAI (``POST /v1/files`` with ``purpose=batch``, ``POST /v1/batches``, ``GET
/v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/files/{id}/content``): a batch is
``in_progress``, then ``completed`` (an output file of the succeeded lines, an error file of
the others), ``expired`` (when every request expired) or ``cancelled`` (cancelled, or a step
says ``canceled``). Anthropic (``POST /v1/messages/batches``, ``GET .../{id}``, ``POST
.../{id}/cancel``, ``GET .../{id}/results``): ``in_progress``, then ``ended`` with a
``results_url`` to JSONL lines ``{"custom_id", "result": {"type": ...}}``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentloop._util.slots import record
from agentloop.testing import fake_wire as wire
from agentloop.testing.fake_steps import FakeReply, Fault

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["FakeBatches"]

_ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}


@record
class _Batch:
    id: str
    wire: str
    lines: list[tuple[str, str, dict[str, Any]]]
    """``(custom_id, result type, result payload)`` per request."""
    created: float
    ready_at: float
    endpoint: str = ""
    input_file_id: str = ""


class FakeBatches:
    """The batch endpoints of one ``FakeProviderServer`` (its script supplies the steps)."""

    def __init__(
        self,
        next_step: Callable[[Mapping[str, Any]], FakeReply | Fault],
        model: Callable[[Mapping[str, Any]], str],
        complete_after: float,
    ) -> None:
        self._next_step = next_step
        self._model = model
        self.complete_after = complete_after
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.cancelled: set[str] = set()
        self._ids = itertools.count(1)

    def routes(self, app: web.Application) -> None:
        """Add the batch routes to ``app`` (before its catch-all)."""
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}/content", self._content)
        app.router.add_post("/v1/batches", self._openai_create)
        app.router.add_get("/v1/batches/{id}", self._openai_get)
        app.router.add_post("/v1/batches/{id}/cancel", self._cancel)
        app.router.add_post("/v1/messages/batches", self._anthropic_create)
        app.router.add_get("/v1/messages/batches/{id}", self._anthropic_get)
        app.router.add_post("/v1/messages/batches/{id}/cancel", self._cancel)
        app.router.add_get("/v1/messages/batches/{id}/results", self._anthropic_results)

    # -- playing the steps ---------------------------------------------------------------------

    def _play(self, custom_id: str, body: Mapping[str, Any], form: str) -> tuple[str, str, Any]:
        step = self._next_step(body)
        number = next(self._ids)
        if step.batch_result == "succeeded" and isinstance(step, FakeReply):
            shape = wire.FORMATS[form]
            ident = f"{shape.id_prefix}{number}"
            calls = [c.id or f"call_fake_{number}_{i}" for i, c in enumerate(step.tool_calls)]
            return custom_id, "succeeded", shape.body(step, self._model(body), ident, calls)
        if step.batch_result in ("expired", "canceled"):
            return custom_id, step.batch_result, None
        status = step.status if isinstance(step, Fault) else 500
        payload = step.body if isinstance(step, Fault) and step.body is not None else None
        if isinstance(payload, str):
            payload = json.loads(payload)
        return custom_id, "errored", {"status": status, "body": payload or _error_body(status)}

    def _new(self, prefix: str, form: str, lines: list[tuple[str, str, Any]], endpoint: str = "",
             input_file_id: str = "") -> _Batch:  # fmt: skip
        ready = asyncio.get_running_loop().time() + self.complete_after
        ident = f"{prefix}{next(self._ids)}"
        batch = _Batch(ident, form, lines, time.time(), ready, endpoint, input_file_id)
        self.batches[batch.id] = batch
        return batch

    def _state(self, batch: _Batch) -> str:
        """``in_progress``, ``cancelled``, ``expired`` or ``completed``."""
        if batch.id in self.cancelled or any(kind == "canceled" for _, kind, _ in batch.lines):
            return "cancelled"
        if asyncio.get_running_loop().time() < batch.ready_at:
            return "in_progress"
        if batch.lines and all(kind == "expired" for _, kind, _ in batch.lines):
            return "expired"
        return "completed"

    # -- OpenAI ----------------------------------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        from aiohttp.web import FileField

        upload = form.get("file")
        if form.get("purpose") != "batch" or not isinstance(upload, FileField):
            return _json(400, wire.openai_error("purpose must be batch, with a file", "invalid"))
        data = upload.file.read()
        file_id = f"file-fake{next(self._ids)}"
        self.files[file_id] = data
        return _json(200, _file_object(file_id, len(data), upload.filename or "batch.jsonl"))

    async def _openai_create(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        endpoint, window = body.get("endpoint"), body.get("completion_window")
        data = self.files.get(str(body.get("input_file_id")))
        if endpoint not in _ENDPOINTS or window != "24h" or data is None:
            message = "endpoint must be /v1/chat/completions or /v1/responses, window 24h"
            return _json(400, wire.openai_error(message, "invalid_request"))
        requests = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        form = _ENDPOINTS[endpoint]
        lines = [self._play(r["custom_id"], r["body"], form) for r in requests]
        batch = self._new("batch_fake", form, lines, endpoint, str(body["input_file_id"]))
        return _json(200, self._openai_object(batch))

    async def _openai_get(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _json(404, wire.openai_error("No batch found", "not_found"))
        return _json(200, self._openai_object(batch))

    def _openai_object(self, batch: _Batch) -> dict[str, Any]:
        status = self._state(batch)
        done = status != "in_progress"
        output = [(c, k, p) for c, k, p in batch.lines if k == "succeeded"]
        errors = [(c, k, p) for c, k, p in batch.lines if k != "succeeded"]
        if done:
            self.files[f"{batch.id}-output"] = _openai_jsonl(output)
            self.files[f"{batch.id}-errors"] = _openai_jsonl(errors)
        counts = {"total": len(batch.lines), "completed": len(output), "failed": len(errors)}
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.endpoint, "errors": None,
            "input_file_id": batch.input_file_id, "completion_window": "24h", "status": status,
            "output_file_id": f"{batch.id}-output" if done and output else None,
            "error_file_id": f"{batch.id}-errors" if done and errors else None,
            "created_at": int(batch.created), "request_counts": counts,
        }  # fmt: skip

    async def _content(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        data = self.files.get(request.match_info["id"])
        if data is None:
            return _json(404, wire.openai_error("No such file", "not_found"))
        return web.Response(body=data, content_type="application/octet-stream")

    async def _cancel(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _json(404, wire.openai_error("No batch found", "not_found"))
        if self._state(batch) == "in_progress":
            self.cancelled.add(batch.id)
        if batch.wire == "anthropic":
            return _json(200, self._anthropic_object(batch, request))
        return _json(200, self._openai_object(batch))

    # -- Anthropic -------------------------------------------------------------------------------

    async def _anthropic_create(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return _json(400, wire.anthropic_error("invalid_request_error", "requests: empty"))
        lines = [self._play(r["custom_id"], r["params"], "anthropic") for r in requests]
        return _json(200, self._anthropic_object(self._new("msgbatch_fake", "anthropic", lines),
                                                 request))  # fmt: skip

    async def _anthropic_get(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _json(404, wire.anthropic_error("not_found_error", "batch not found"))
        return _json(200, self._anthropic_object(batch, request))

    def _anthropic_object(self, batch: _Batch, request: web.Request) -> dict[str, Any]:
        ended = self._state(batch) != "in_progress"
        kinds = [kind for _, kind, _ in self._anthropic_lines(batch)] if ended else []
        counts = {k: kinds.count(k) for k in ("succeeded", "errored", "canceled", "expired")}
        counts["processing"] = 0 if ended else len(batch.lines)
        url = f"{request.url.origin()}/v1/messages/batches/{batch.id}/results"
        return {
            "id": batch.id, "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts, "results_url": url if ended else None,
            "created_at": _iso(batch.created), "ended_at": _iso(time.time()) if ended else None,
        }  # fmt: skip

    def _anthropic_lines(self, batch: _Batch) -> list[tuple[str, str, Any]]:
        if batch.id in self.cancelled:
            return [(c, "canceled", None) for c, _, _ in batch.lines]
        return batch.lines

    async def _anthropic_results(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        batch = self.batches.get(request.match_info["id"])
        if batch is None or self._state(batch) == "in_progress":
            return _json(404, wire.anthropic_error("not_found_error", "no results yet"))
        out = []
        for custom_id, kind, payload in self._anthropic_lines(batch):
            result: dict[str, Any] = {"type": kind}
            if kind == "succeeded":
                result["message"] = payload
            elif kind == "errored":
                result["error"] = payload["body"]
            out.append(json.dumps({"custom_id": custom_id, "result": result}))
        return web.Response(text="\n".join(out) + "\n", content_type="application/x-jsonl")


def _openai_jsonl(lines: list[tuple[str, str, Any]]) -> bytes:
    out = []
    for number, (custom_id, kind, payload) in enumerate(lines):
        line: dict[str, Any] = {"id": f"batch_req_{number}", "custom_id": custom_id}
        if kind == "succeeded":
            line |= {"response": {"status_code": 200, "body": payload}, "error": None}
        elif kind == "errored":
            line |= {"response": {"status_code": payload["status"], "body": payload["body"]},
                     "error": None}  # fmt: skip
        else:
            code = "batch_expired" if kind == "expired" else "batch_cancelled"
            line |= {"response": None, "error": {"code": code, "message": f"request {kind}"}}
        out.append(json.dumps(line))
    return ("\n".join(out) + "\n").encode() if out else b""


def _error_body(status: int) -> dict[str, Any]:
    return wire.openai_error(f"fake batch request failed with {status}", "server_error")


def _file_object(file_id: str, size: int, name: str) -> dict[str, Any]:
    return {"id": file_id, "object": "file", "bytes": size, "created_at": int(time.time()),
            "filename": name, "purpose": "batch", "status": "processed"}  # fmt: skip


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _json(status: int, payload: Mapping[str, Any]) -> web.Response:
    from aiohttp import web

    return web.json_response(dict(payload), status=status)
