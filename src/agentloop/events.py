"""The engine's one event channel: typed, frozen event objects.

Everything a run tells the outside world travels as one of these: observers receive them through
``Observer.on_event``, ``agent.stream()`` yields them, the OpenTelemetry observer and the CLI
render them. Every event carries ``run_id``, ``session_id``, ``turn`` (the 0-based turn it
belongs to) and ``path``, the names of the agents from the root when an agent runs as another
agent's tool (empty for a top-level run).

``turn`` is an int on every event but ``TurnFinished``, whose ``turn`` is the finished ``Turn``
record itself (SPEC 12: ``TurnFinished(turn)``). ``turn_index`` is the int on every event, that
one included, so code that handles any event reads the number one way.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any

from agentloop._util.slots import record
from agentloop.messages import (
    ProviderToolCallPart,
    ProviderToolResultPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.model import ModelResponse

if TYPE_CHECKING:
    from agentloop.batching import BatchWait
    from agentloop.errors import AgentLoopError
    from agentloop.pausing import PendingCall
    from agentloop.run import Run, Turn

__all__ = [
    "AttemptReset",
    "BudgetWarning",
    "Compacted",
    "CompactionFailed",
    "ConvergenceWarning",
    "Event",
    "FellBack",
    "GuardrailChecked",
    "HandoffOccurred",
    "LoopWarning",
    "MemoryCommitted",
    "MemoryRecalled",
    "ModelResponded",
    "ModelSwitched",
    "PartialOutput",
    "ProviderToolCalled",
    "ProviderToolReturned",
    "RateLimitWait",
    "RetryScheduled",
    "RunFinished",
    "RunPaused",
    "RunStarted",
    "RunWaiting",
    "TextDelta",
    "ThinkingDelta",
    "ThinkingDropped",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallRequested",
    "ToolCallStarted",
    "ToolsLoaded",
    "TurnFinished",
    "TurnStarted",
]


@record
class Event:
    """Base of every event: which run, which turn, and which agent (``path``)."""

    run_id: str
    turn: int
    path: tuple[str, ...] = field(default=(), kw_only=True)
    session_id: str = field(default="", kw_only=True)
    """The session (conversation) whose run sent it; stamped by the session's event channel."""
    agent: str | None = field(default=None, kw_only=True)
    """The active agent's handoff name (SPEC 26); None for the run's starting agent."""

    @property
    def turn_index(self) -> int:
        """The 0-based turn as an int, on every event (``TurnFinished.turn`` is the record)."""
        return self.turn


@record
class RunStarted(Event):
    """A run started (``run.input`` is its prompt)."""

    run: Run[Any]


@record
class TurnStarted(Event):
    """Turn ``turn`` is about to call the model.

    ``model`` and ``provider`` name what the agent's client asks by default (``client.model``,
    ``client.provider``); the model that served the reply is ``ModelResponded.response.model``.
    """

    model: str | None = field(default=None, kw_only=True)
    provider: str | None = field(default=None, kw_only=True)


@record
class TextDelta(Event):
    """A streamed fragment of the reply's text."""

    text: str


@record
class ThinkingDelta(Event):
    """A streamed fragment of the model's readable reasoning (or its summary); never an answer."""

    text: str


@record
class ToolCallDelta(Event):
    """A streamed fragment of a tool call: its name (first fragment) and argument text.

    ``index`` is the call's position in the reply; ``call_id`` is set when the provider has sent
    it. Concatenating ``arguments_delta`` of one index gives the call's JSON arguments.
    """

    index: int
    name: str | None
    arguments_delta: str
    call_id: str | None = None


@record
class AttemptReset(Event):
    """A streamed attempt failed and a retry starts: discard the fragments of this turn."""


@record
class ModelResponded(Event):
    """The model's complete reply for this turn.

    ``replayed``: a durable run's recovery answered this call from its record (a DBOS step's
    result, a Temporal history); the model was not asked again in this process.
    """

    response: ModelResponse
    replayed: bool = field(default=False, kw_only=True)


@record
class ProviderToolCalled(Event):
    """The provider ran one of its own tools (SPEC 24); before the reply's ``ModelResponded``."""

    call: ProviderToolCallPart


@record
class ProviderToolReturned(Event):
    """A provider tool's result (``result.is_error``: its own failure, soft); once per result."""

    result: ProviderToolResultPart


@record
class ToolCallRequested(Event):
    """The model asked for a tool call (once per call, before any attempt)."""

    call: ToolCallPart


@record
class ToolCallStarted(Event):
    """An attempt of a tool call starts (``attempt`` is 0-based; recovery retries count up)."""

    call: ToolCallPart
    attempt: int


@record
class ToolCallFinished(Event):
    """An attempt produced a result; ``result.is_error`` marks a soft error (vetoes included).

    ``replayed``: a durable run's recovery answered this call from its record; the tool did
    not run again in this process.
    """

    call: ToolCallPart
    result: ToolResultPart
    attempt: int
    duration: float
    replayed: bool = field(default=False, kw_only=True)


@record
class LoopWarning(Event):
    """A repeated operation reached the loop detector's warning threshold."""

    pattern: str
    repetitions: int


@record
class ConvergenceWarning(Event):
    """Terminal replies converged (``status`` is the detector's ``ConvergenceStatus``)."""

    status: Any


@record
class Compacted(Event):
    """A compaction pass shrank the transcript from ``before`` to ``after`` tokens."""

    before: int
    after: int


@record
class ThinkingDropped(Event):
    """The provider dropped thinking blocks whose prefix changed (SPEC 28's ``drop_block``).

    ``blocks``: what it listed (Anthropic's ``input_transformations``), as it sent them.
    """

    blocks: tuple[Any, ...]


@record
class CompactionFailed(Event):
    """A compaction pass failed; ``error`` is the hard error that ends the run."""

    error: AgentLoopError


@record
class RetryScheduled(Event):
    """A model request failed with ``error``; attempt ``attempt + 1`` follows after a wait."""

    error: BaseException
    attempt: int
    wait_seconds: float


@record
class RateLimitWait(Event):
    """A request waits ``wait_seconds`` for the rate governor (SPEC 25) before it is sent.

    ``key`` is the limit's key (``"openai:gpt-5-mini"``, ``"openai:*"`` for a provider-wide
    limit); ``limit`` the line that holds it back: ``"rpm"``, ``"tpm"``, ``"concurrent"`` or
    ``"retry_after"`` (a 429 closed the key for every process sharing the governor).
    """

    key: str
    limit: str
    wait_seconds: float


@record
class FellBack(Event):
    """A request failed on ``from_model`` and moves on to ``to_model``."""

    from_model: str
    to_model: str
    error: BaseException


@record
class ModelSwitched(Event):
    """The model serving requests changed (for instance a recovered primary after its probe)."""

    from_model: str
    to_model: str


@record
class ToolsLoaded(Event):
    """Deferred tools were loaded (SPEC 22): ``via`` ``"search"``, ``"call"`` or ``"native"``."""

    names: tuple[str, ...]
    via: str


@record
class BudgetWarning(Event):
    """A budget dimension crossed its soft line (once per dimension per run)."""

    dimension: str
    spent: float
    limit: float


@record
class GuardrailChecked(Event):
    """A guardrail gave its verdict (``agentloop.guardrails``), after ``duration`` seconds.

    ``kind`` is what it checked: ``"input"`` (the run's input), ``"tool_result"`` (a tool's
    result, before the model reads it) or ``"output"`` (the final answer). ``reason`` says why
    it tripped (None when it passed); ``soft`` is True when a trip is a rejection the model
    answers again (``OutputGuardrail(retry=True)``), not the end of the run. ``replayed``: a
    durable run's recovery took the recorded verdict; the check did not run again.
    """

    guardrail: str
    tripped: bool
    duration: float
    kind: str = field(default="input", kw_only=True)
    reason: str | None = field(default=None, kw_only=True)
    soft: bool = field(default=False, kw_only=True)
    replayed: bool = field(default=False, kw_only=True)


@record
class TurnFinished(Event):
    """A turn finished: its model call and the dispatch of its tool calls.

    Here ``turn`` is the finished ``Turn`` record itself; its number is ``event.turn_index``
    (``event.turn.index``), as on every other event.
    """

    turn: Turn  # type: ignore[assignment]

    @property
    def turn_index(self) -> int:
        """The finished turn's 0-based number."""
        return self.turn.index


@record
class PartialOutput(Event):
    """A typed answer as parsed so far while it streams (SPEC 18): a dict that grows.

    The last one of a turn equals the validated output (its ``model_dump()`` for a pydantic
    model) when the answer is accepted.
    """

    value: Any


@record
class HandoffOccurred(Event):
    """The run handed off (SPEC 26): ``to_agent`` rules from the next turn.

    ``from_agent`` and ``to_agent`` are handoff names (None: the run's starting agent).
    """

    from_agent: str | None
    to_agent: str | None


@record
class RunPaused(Event):
    """The run paused on calls that wait for a person or another service (SPEC 17).

    ``pending`` is ``run.pending``; ``RunFinished`` follows. ``continue_run(decisions=...)``
    continues the same run.
    """

    pending: tuple[PendingCall, ...]


@record
class RunWaiting(Event):
    """A batch run waits on its model turn in a provider batch (SPEC 25); ``RunFinished`` follows.

    ``waiting`` is ``run.waiting``; ``agentloop.batch.poll`` continues the run.
    """

    waiting: BatchWait


@record
class RunFinished(Event):
    """The run ended (``run.stop_reason`` says how); always the last event of a run."""

    run: Run[Any]


@record
class MemoryRecalled(Event):
    """Auto recall put these memories in the run's instructions (SPEC 27); after ``RunStarted``."""

    ids: tuple[str, ...] = ()


@record
class MemoryCommitted(Event):
    """The run's staged memory writes were applied at finalize; before ``RunFinished``.

    ``dropped``: writes the apply refused because the namespace was full (``max_items``).
    """

    written: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
