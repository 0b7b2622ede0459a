"""The replay tests' agent: ``_plan``'s tool plan, priced model calls, a moderation check.

Shared by the DBOS child process (``_dbos_replay_child.py``) and the in-process tests, so every
process builds the same agent. Each model reply costs ``INPUT`` and ``OUTPUT`` tokens; the
input guardrail ``moderation`` answers what the file ``VERDICT`` says (``pass`` or a reason),
and appends a line to ``CHECKS`` each time it really runs: a moderation service whose answer
changes between the process that ran the check and the one that recovers the run.
``Seen`` writes every model-call, tool-call and guardrail event (with its ``replayed`` mark and
the process id) to ``EVENTS``; ``SpanFile`` is an OpenTelemetry exporter that writes each
finished span to ``SPANS`` as it ends (a SIGKILLed process keeps what it exported).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from agentloop import events as ev
from agentloop.guardrails import GuardrailContext
from agentloop.messages import Usage
from agentloop.model import ModelRequest, ModelResponse, StreamEvent, WrappedClient
from agentloop.observers import Observer

INPUT, OUTPUT = 100, 7


class Priced(WrappedClient):
    """The inner client, every reply costing ``INPUT`` + ``OUTPUT`` tokens."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await self.inner.complete(request)
        return replace(response, usage=Usage(input_tokens=INPUT, output_tokens=OUTPUT))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield StreamEvent("done", response=await self.complete(request))


def moderation(ctx: GuardrailContext[Any], value: Any) -> str | None:
    """What the moderation service says today (the ``VERDICT`` file); counted in ``CHECKS``."""
    with Path(os.environ["CHECKS"]).open("a") as out:
        out.write(f"{os.getpid()}\n")
    verdict = Path(os.environ["VERDICT"]).read_text().strip()
    return None if verdict == "pass" else verdict


class Seen(Observer):
    """Writes ``pid kind key replayed`` per model call, tool call and guardrail verdict."""

    def on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.ModelResponded):
            line = ("model", str(event.turn), event.replayed)
        elif isinstance(event, ev.ToolCallFinished):
            line = ("tool", str(event.call.arguments.get("key")), event.replayed)
        elif isinstance(event, ev.GuardrailChecked):
            line = ("guardrail", f"{event.guardrail}:{event.tripped}", event.replayed)
        else:
            return
        with Path(os.environ["EVENTS"]).open("a") as out:
            out.write(json.dumps([os.getpid(), *line]) + "\n")


class SpanFile(SpanExporter):
    """Each finished span as a JSON line: the process, its name and its attributes."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with Path(os.environ["SPANS"]).open("a") as out:
            for span in spans:
                line = [os.getpid(), span.name, dict(span.attributes or {})]
                out.write(json.dumps(line, default=list) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def lines(path: Path) -> list[list[Any]]:
    """The JSON lines of ``path`` (none when it does not exist)."""
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
