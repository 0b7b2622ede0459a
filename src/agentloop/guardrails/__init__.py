"""Guardrails: gates on what an agent is asked and what it answers (SPEC 19).

Tool hooks guard what an agent *does*; guardrails guard its input and its final answer. A
guardrail wraps a check, ``check(ctx, value)``, sync or async, that returns ``None`` to pass or a
``str`` saying why it trips. A guardrail is a gate, so it fails closed: a check that raises,
times out (``timeout``, default ``DEFAULT_TIMEOUT`` seconds) or returns anything but ``None`` or a
``str`` trips too, with what went wrong as the reason. Give them as ``Agent(guardrails=[...])``.

- ``InputGuardrail(check, *, parallel=False, name=None)``: the run's input, once per run; before
  the first request, or (``parallel=True``) beside the first model call, whose reply is not acted
  on until the check passed. ``tool_results=True`` also checks each tool result.
- ``OutputGuardrail(check, *, retry=False, name=None)``: the final answer (the validated typed
  value with an ``output_type``). While output guardrails are set, no event carries a reply's
  text until the reply is known not to be the answer or the answer passed.

A trip ends the run with ``agentloop.errors.GuardrailTripped(guardrail, reason)``; an output
guardrail with ``retry=True`` lets the model read ``Output rejected: <reason>`` and answer again
instead. Two ready ones: ``prompt_injection()`` (a heuristic) and ``secret_leak()``.
"""

from agentloop.guardrails._base import (
    DEFAULT_TIMEOUT,
    Check,
    Guardrail,
    GuardrailContext,
    InputGuardrail,
    OutputGuardrail,
)
from agentloop.guardrails._ready import (
    INJECTION_SIGNALS,
    injection_signals,
    prompt_injection,
    secret_leak,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "INJECTION_SIGNALS",
    "Check",
    "Guardrail",
    "GuardrailContext",
    "InputGuardrail",
    "OutputGuardrail",
    "injection_signals",
    "prompt_injection",
    "secret_leak",
]
