"""The guardrail values, their context, and the one place a check's answer becomes a verdict.

A guardrail is a gate, so it fails closed: ``evaluate`` turns whatever a check does into
``None`` (pass) or a reason (trip). A ``str`` is a trip in the check's own words; ``None``
passes; anything else trips, saying what it got; a check that raises trips with the
exception in the reason; an async check still running after its ``timeout`` trips. Task
cancellation, ``KeyboardInterrupt`` and ``SystemExit`` are never made into a verdict.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import field
from typing import Any, Generic, Literal, TypeAlias

from typing_extensions import TypeVar

from agentloop._util.aio import aclose_iterator
from agentloop._util.governing import governed_as
from agentloop._util.slots import record
from agentloop.errors import ConfigurationError
from agentloop.messages import ToolCallPart, Usage
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent, WrappedClient
from agentloop.safety.redact import redact_secrets

__all__ = [
    "DEFAULT_TIMEOUT",
    "Check",
    "Guardrail",
    "GuardrailContext",
    "InputGuardrail",
    "OutputGuardrail",
]

DepsT = TypeVar("DepsT", default=Any)

DEFAULT_TIMEOUT = 30.0
"""Seconds an async check may take before it trips (``timeout=None`` or ``0``: no limit).

A check that calls a model answers in a few seconds; one still silent after 30 has hung, and
a gate that hangs must not hold the run forever (nor let it through)."""

Kind: TypeAlias = Literal["input", "tool_result", "output"]

Check: TypeAlias = Callable[["GuardrailContext[Any]", Any], "str | Awaitable[str | None] | None"]
"""``check(ctx, value)``: None to pass, a ``str`` saying why it trips; sync or async."""

Reporter: TypeAlias = Callable[[Usage, str], None]

Live: TypeAlias = Callable[["GuardrailContext[Any]", Any], Awaitable["str | None"]]
Recorder: TypeAlias = Callable[
    ["Guardrail", "GuardrailContext[Any]", Any, Live], Awaitable["str | None"]
]
"""``recorder(guardrail, ctx, value, live)``: the verdict, from ``live(ctx, value)`` or a record."""

RECORDER: ContextVar[Recorder | None] = ContextVar("agentloop_guardrail_recorder", default=None)
"""Set by a durable run's workflow (SPEC 14): each verdict is recorded once, reused on replay.

``agentloop.durable`` sets it in the workflow's context, so a recovered run takes the verdict
its first execution reached instead of asking the check again (a moderation service may answer
otherwise the second time, and the run would leave its recorded path). Unset: checks run."""


@record
class GuardrailContext(Generic[DepsT]):
    """What a check may know, and a model client whose usage counts in the run.

    ``deps`` is what the application passed to ``run(..., deps=...)``; ``kind`` says what is
    checked (``"input"``, ``"tool_result"`` or ``"output"``); ``call`` is the tool call whose
    result is checked (None otherwise). ``client`` is the run's model client (the agent's, or
    what ``agent.override(model=...)`` put in its place), metered: a check that asks a model
    through it (or through ``metered(other_client)``) adds the reply's tokens to ``run.usage``
    and to the run's ``Budget``.
    """

    deps: DepsT
    run_id: str
    session_id: str
    turn: int
    kind: Kind
    call: ToolCallPart | None = None
    _client: ModelClient | None = field(default=None, repr=False)
    _report: Reporter | None = field(default=None, repr=False)

    @property
    def client(self) -> ModelClient:
        """The run's model client; its replies' usage counts in the run's usage and budget."""
        if self._client is None:
            raise RuntimeError("this GuardrailContext was made without a model client")
        return self.metered(self._client)

    def metered(self, client: ModelClient) -> ModelClient:
        """``client`` with its replies' usage counted in the run's usage and budget.

        Its requests wait for the rate governor the run's own client waits for (SPEC 25),
        unless ``client`` has a governor of its own.
        """
        if self._client is not None and client is not self._client:
            client = governed_as(self._client, client)
        if self._report is None:
            return client
        return MeteredClient(client, self._report)


class MeteredClient(WrappedClient):
    """A ``ModelClient`` that reports each reply's usage (a guardrail's calls count)."""

    def __init__(self, inner: ModelClient, report: Reporter) -> None:
        super().__init__(inner)
        self._report = report

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The inner reply, its usage reported."""
        response = await self.inner.complete(request)
        self._report(response.usage, response.model or self.inner.model)
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The inner stream, the usage of its final reply reported."""
        events = self.inner.stream(request)
        try:
            async for event in events:
                if event.kind == "done" and event.response is not None:
                    self._report(event.response.usage, event.response.model or self.inner.model)
                yield event
        finally:
            await aclose_iterator(events)


class Guardrail:
    """What input and output guardrails share: the check, its name and its timeout."""

    __slots__ = ("check", "name", "timeout")

    def __init__(self, check: Check, *, name: str | None, timeout: float | None) -> None:
        label = type(self).__name__
        if not callable(check):
            raise ConfigurationError(
                f"{label} check must be callable as check(ctx, value), got {check!r}",
                field="check",
            )
        _check_signature(label, check)
        if timeout is not None and not (
            isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout >= 0
        ):
            raise ConfigurationError(
                f"{label} timeout must be None or seconds >= 0, got {timeout!r}", field="timeout"
            )
        if name is not None and (not isinstance(name, str) or not name):
            raise ConfigurationError(
                f"{label} name must be a non-empty str, got {name!r}", field="name"
            )
        self.check = check
        self.name = name or _name_of(check)
        self.timeout = timeout or None

    async def evaluate(self, ctx: GuardrailContext[Any], value: Any) -> str | None:
        """The verdict on ``value``: None to pass, else why it trips (never raises for a check).

        In a durable run's workflow (``RECORDER`` set) the verdict is recorded, or replayed.
        """
        recorder = RECORDER.get()
        if recorder is not None:
            return await recorder(self, ctx, value, self._evaluated)
        return await self._evaluated(ctx, value)

    async def _evaluated(self, ctx: GuardrailContext[Any], value: Any) -> str | None:
        """The check's own verdict on ``value`` (what ``evaluate`` returns outside a workflow)."""
        try:
            answer = self.check(ctx, value)
            if inspect.isawaitable(answer):
                answer = await self._awaited(answer)
        except _TimedOut:
            return f"the check timed out after {self.timeout:g}s"
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():  # the run (or its caller) is cancelling us
                raise
            return "the check raised CancelledError"  # raised by the check, not a cancel
        except Exception as exc:
            what = redact_secrets(str(exc))
            return f"the check raised {type(exc).__name__}" + (f": {what}" if what else "")
        return _verdict(answer)

    async def _awaited(self, answer: Awaitable[Any]) -> Any:
        if self.timeout is None:
            return await answer
        scope = asyncio.timeout(self.timeout)
        try:
            async with scope:
                return await answer
        except TimeoutError:
            if scope.expired():  # our deadline, not a TimeoutError the check raised itself
                raise _TimedOut from None
            raise

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class InputGuardrail(Guardrail):
    """A check of the run's input, before the model acts on it (SPEC 19).

    Blocking (the default): it runs before the first request. ``parallel=True``: it runs beside
    the first model call; the reply is not acted on (no tool runs, the run does not end) until
    it passed, and a trip cancels the call. ``tool_results=True``: it also checks each tool
    result's text before the model reads it (always blocking: the results wait for it).
    ``name`` defaults to the check's ``__name__``; ``timeout`` (seconds, None for none) bounds an
    async check.
    """

    __slots__ = ("parallel", "tool_results")

    def __init__(
        self,
        check: Check,
        *,
        parallel: bool = False,
        name: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        tool_results: bool = False,
    ) -> None:
        super().__init__(check, name=name, timeout=timeout)
        self.parallel = bool(parallel)
        self.tool_results = bool(tool_results)


class OutputGuardrail(Guardrail):
    """A check of the final answer (the typed value with an ``output_type``) (SPEC 19).

    A trip ends the run with ``GuardrailTripped``; with ``retry=True`` the model reads
    ``Output rejected: <reason>`` instead and answers again, within ``RunConfig.output_retries``.
    ``name`` defaults to the check's ``__name__``; ``timeout`` bounds an async check.
    """

    __slots__ = ("retry",)

    def __init__(
        self,
        check: Check,
        *,
        retry: bool = False,
        name: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(check, name=name, timeout=timeout)
        self.retry = bool(retry)


class _TimedOut(Exception):
    """Our own deadline passed (a check raising ``TimeoutError`` itself is a raise, not this)."""


def _verdict(answer: object) -> str | None:
    if answer is None:
        return None
    if isinstance(answer, str):
        return answer or "the check gave no reason"
    shown = repr(answer)
    if len(shown) > 80:
        shown = shown[:79] + "…"
    return f"the check returned {shown} ({type(answer).__name__}), not None or a str"


def _name_of(check: Callable[..., Any]) -> str:
    inner = getattr(check, "func", check)  # functools.partial
    name = getattr(inner, "__name__", None)
    return name if isinstance(name, str) and name else type(inner).__name__


def _check_signature(label: str, check: Callable[..., Any]) -> None:
    """A check that cannot be called as ``check(ctx, value)`` is a configuration error."""
    try:
        signature = inspect.signature(check)
    except (TypeError, ValueError):
        return  # a builtin without a signature: it is tried when called
    try:
        signature.bind(None, None)
    except TypeError:
        raise ConfigurationError(
            f"{label} check {_name_of(check)}{signature} cannot be called as check(ctx, value)",
            field="check",
        ) from None
