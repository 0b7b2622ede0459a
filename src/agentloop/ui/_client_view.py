"""What an end user of the application sees of a run (SPEC 18): the app's choice, not ours.

Both UI apps pass a run's events through one ``ClientView`` before they become the protocol's
events, and word a hard error for the client with it:

- **A withheld answer is never shown** (SPEC 19: rejected or tripped by an output guardrail, or
  cut short by the run's end): its ``ModelResponded`` carries a ``WithheldResponse`` (the
  engine's mark), which reaches the protocol without its text (the placeholder) and without
  its ``final_result`` calls, whose results are not shown either. Its reasoning and its other
  tool calls are the run's work and go out as always. The retry streams as a reply of its own.
- **Guardrails are internal** unless the app says otherwise: ``GuardrailChecked`` (a
  guardrail's name, a policy's reason) reaches the client only with ``expose_guardrails=True``.
- **A hard error** keeps its class; its message goes through the package's redactor
  (``redact_secrets``). A ``GuardrailTripped`` reads ``GUARDRAIL_MESSAGE`` (no name, no
  reason) unless guardrails are exposed; an exception that is no ``AgentLoopError`` (a bug),
  and the ``InternalError`` the engine ends a run with for one (a hook, an instructions
  function or a model client that raised), reads ``INTERNAL_MESSAGE``: its text (which names
  the app's internals: a host, a query, a path) is for the log, the store and the viewer only.
  A ``MemoryBackendError`` (the app's store failed, or another worker runs the conversation
  now: its text names a file, a host and a process id) reads ``STORE_MESSAGE``; a
  ``GovernorUnavailable`` (the rate governor's database: a path, a user, a host) reads
  ``GOVERNOR_MESSAGE``; an error wrapping what the app's own code raised (a compactor, a memory
  namespace function) reads ``INTERNAL_MESSAGE``, and so does a ``CompactionFailed`` event's
  error (``agentloop.safety._client_text``, the words every served face uses). A provider
  failure says what failed, not where (no host, port or URL).
- **A stopped child reads the same**: an agent used as a tool whose run ended in a hard error is
  its parent's soft result ``agent '<name>' stopped: <Class>: <message>``; the client reads
  that message worded as above (the child's ``RunFinished``, with a ``path``, says which error
  it was), the model and the store the whole of it.
- **An event's error is worded the same**: a ``RetryScheduled`` or ``FellBack`` (a custom event
  on either protocol) carries a copy of its error with the words above (``served_error``); the
  run's own events (an observer's) keep the whole text.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentloop import events as ev
from agentloop.engine.holdback import WithheldResponse
from agentloop.engine.output import FINAL_RESULT
from agentloop.errors import AgentLoopError, GuardrailTripped
from agentloop.messages import Message, Part, TextPart, ToolCallPart
from agentloop.safety._client_text import (
    GOVERNOR_MESSAGE,
    INTERNAL_MESSAGE,
    STORE_MESSAGE,
    served_compaction_failure,
    served_error,
    served_failure,
    served_message,
    served_reason,
)
from agentloop.safety.redact import redact_secrets

__all__ = [
    "GOVERNOR_MESSAGE",
    "GUARDRAIL_MESSAGE",
    "INTERNAL_MESSAGE",
    "STORE_MESSAGE",
    "WATCHED",
    "ClientView",
]

GUARDRAIL_MESSAGE = "The application's guardrails stopped this run."
"""A ``GuardrailTripped``'s message for a client, unless the app exposes guardrails."""
WATCHED: frozenset[type[ev.Event]] = frozenset(
    {
        ev.ModelResponded,
        ev.GuardrailChecked,
        ev.ToolCallFinished,
        ev.RunFinished,
        ev.CompactionFailed,
        ev.RetryScheduled,
        ev.FellBack,
    }
)
"""The only event types ``ClientView.shown`` may change: every other one goes out as it is."""


class ClientView:
    """One response's filter of what the client sees (see the module)."""

    __slots__ = ("_hidden", "_stopped", "expose_guardrails")

    def __init__(self, *, expose_guardrails: bool = False) -> None:
        self.expose_guardrails = expose_guardrails
        self._hidden: set[str] = set()  # the final_result calls of withheld answers
        self._stopped: dict[
            str, str
        ] = {}  # a stopped child's error: as the model reads it -> shown

    def shown(self, event: ev.Event) -> ev.Event | None:
        """``event`` as the client may see it, or None when it sees nothing of it."""
        kind = type(event)
        if isinstance(event, ev.GuardrailChecked):
            if not self.expose_guardrails:
                return None
            reason = event.reason  # a crashed check's: without the exception's text
            return (
                event
                if reason is None
                else dataclasses.replace(event, reason=served_reason(reason))
            )
        if isinstance(event, ev.CompactionFailed):  # its error names what the compactor raised
            return dataclasses.replace(event, error=served_compaction_failure(event.error))
        if isinstance(event, ev.RetryScheduled | ev.FellBack):  # a provider's host, a bug's text
            said = served_error(event.error)
            return event if said is event.error else dataclasses.replace(event, error=said)
        if kind is ev.ToolCallFinished:
            if event.call.id in self._hidden:  # type: ignore[attr-defined]
                return None
            return self._reworded(event) if self._stopped else event  # type: ignore[arg-type]
        if kind is ev.RunFinished:
            if event.path:
                self._child_finished(event.run)  # type: ignore[attr-defined]
            return event
        if kind is ev.ModelResponded and isinstance(
            event.response,  # type: ignore[attr-defined]
            WithheldResponse,
        ):
            return self._unsaid(event)  # type: ignore[arg-type]
        return event

    def _child_finished(self, run: Any) -> None:
        """Note how a child's hard error reads for the client (its parent's soft result, next)."""
        error = run.stop_reason
        if isinstance(error, AgentLoopError) and not error.is_cancelled():
            head = f": {type(error).__name__}: "
            shown = head + self.message(error)
            if shown != head + str(error):
                self._stopped[head + str(error)] = shown

    def _reworded(self, event: ev.ToolCallFinished) -> ev.ToolCallFinished:
        """A stopped child's soft result, worded as its hard error is for the client.

        The result is ``agent '<name>' stopped: <Class>: <message>`` (SPEC 13); the model read
        the whole message, the client reads the message ``message`` gives the hard error.
        """
        result = event.result
        if not result.is_error or not result.content.startswith("agent '"):
            return event
        for whole, shown in self._stopped.items():
            if result.content.endswith(whole):
                content = result.content[: -len(whole)] + shown
                return dataclasses.replace(
                    event, result=dataclasses.replace(result, content=content)
                )
        return event

    def _unsaid(self, event: ev.ModelResponded) -> ev.ModelResponded:
        """A withheld reply without its placeholder text and its ``final_result`` calls."""
        message = event.response.message
        kept: list[Part] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                continue
            if isinstance(part, ToolCallPart) and part.name == FINAL_RESULT:
                self._hidden.add(part.id)
                continue
            kept.append(part)
        response = dataclasses.replace(event.response, message=Message(message.role, tuple(kept)))
        return dataclasses.replace(event, response=response)

    def message(self, error: BaseException, *, face: str | None = None) -> str:
        """A hard error's message for the client: redacted, the guardrail's only when exposed.

        ``face`` (the app's name) is given where the error ends a run the app serves: what the
        words hide is logged there once (``served_failure``).
        """
        if isinstance(error, GuardrailTripped) and not self.expose_guardrails:
            return GUARDRAIL_MESSAGE
        said = served_message(error) if face is None else served_failure(error, face)
        return said or type(error).__name__  # a bug's text: the log's only

    def facts(self, error: BaseException) -> dict[str, str]:
        """What an exposed ``GuardrailTripped`` adds for the client: its name and reason."""
        if isinstance(error, GuardrailTripped) and self.expose_guardrails:
            reason = redact_secrets(served_reason(error.reason))  # a crash's text: the log's
            return {"guardrail": error.guardrail, "reason": reason}
        return {}
