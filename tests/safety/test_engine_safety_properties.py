"""Hypothesis properties of the safety stack, end to end through ``Agent``.

- The loop detector never stops a run whose identical calls keep returning changing results.
- For any script of sick / ok / rejected tool outcomes, a breaker-refused call never executes
  the tool, a refusal only follows three sick results, and the breaker never ends a run.
- No reflector / strategy combination executes a tool more than 6 times for one call.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from agentloop import Agent, RunConfig, ToolError, tool
from agentloop.errors import LoopDetected, ToolRecoveryExhausted
from agentloop.messages import ToolResultPart
from agentloop.model import ModelRequest
from agentloop.safety import (
    AskUser,
    Correction,
    ExponentialBackoffRecovery,
    Fail,
    FailureAnalysis,
    Retry,
    Skip,
    ToolBreaker,
    ToolFailure,
)
from agentloop.safety.recovery import Severity
from agentloop.testing import (
    FakeClock,
    FunctionModel,
    RecordingObserver,
    ScriptedModel,
    call,
    reply,
)
from agentloop.tools import ToolContext

BREAKER_TEXT = "tool temporarily unavailable: circuit breaker open"
FAST = settings(max_examples=30, deadline=None)


def last_results(request: ModelRequest) -> list[ToolResultPart]:
    last = request.messages[-1]
    return list(last.tool_results_parts) if last.role == "tool" else []


# --------------------------------------------- 1. changing results are never a loop


@st.composite
def changing_results(draw: st.DrawFn) -> list[tuple[int, bool]]:
    """A sequence of (result id, is_error) with no two consecutive results equal."""
    size = draw(st.integers(1, 40))
    alphabet = draw(st.integers(2, 6))
    value = draw(st.integers(0, alphabet - 1))
    values = [value]
    for _ in range(size - 1):
        value = (value + draw(st.integers(1, alphabet - 1))) % alphabet
        values.append(value)
    errors = draw(st.lists(st.booleans(), min_size=size, max_size=size))
    return list(zip(values, errors, strict=True))


@FAST
@given(script=changing_results(), interleave=st.lists(st.booleans(), max_size=40))
def test_identical_calls_with_changing_results_never_stop_a_run(
    script: list[tuple[int, bool]], interleave: list[bool]
) -> None:
    polls = 0
    side = 0

    @tool
    def poll(job: str) -> str:
        """Poll a job."""
        nonlocal polls
        value, is_error = script[polls]
        polls += 1
        text = f"state {value}"
        if is_error:
            raise ToolError(text)
        return text

    @tool
    def note(text: str) -> str:
        """Take a note (its result changes every time too)."""
        nonlocal side
        side += 1
        return f"note {side}"

    def decide(request: ModelRequest) -> Any:
        if polls == len(script):
            return reply("finished")
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn < len(interleave) and interleave[turn]:
            return [call("note", {"text": "progress"}), call("poll", {"job": "j"})]
        return call("poll", {"job": "j"})

    recorder = RecordingObserver()
    agent = Agent(FunctionModel(decide), tools=[poll, note], observers=[recorder])
    run = agent.run_sync("go")
    assert run.output == "finished" and run.stop_reason is None
    assert polls == len(script)
    # progress may re-warn after a flush, but a pattern of changing results never stops
    assert all(reps < 10 for _, _, reps in recorder.of("on_loop_detected"))


# ---------------------------------------------- 2. the breaker only ever refuses


@dataclass(frozen=True)
class Step:
    outcomes: tuple[str, ...]  # one per call of the turn: "sick", "ok", "rejected"
    pause: bool  # wait past the cooldown before answering


steps = st.builds(
    Step,
    outcomes=st.lists(
        st.sampled_from(["sick", "sick", "ok", "rejected"]), min_size=1, max_size=3
    ).map(tuple),
    pause=st.sampled_from([False, False, False, False, True]),
)


def plan(script: list[Step]) -> tuple[dict[int, str], list[list[int]]]:
    """Number the calls: call n's scripted outcome, and the call numbers of each turn."""
    planned: dict[int, str] = {}
    turns: list[list[int]] = []
    for step in script:
        turns.append(list(range(len(planned), len(planned) + len(step.outcomes))))
        planned.update(zip(turns[-1], step.outcomes, strict=True))
    return planned, turns


PANIC = 'Tool "svc" panicked: RuntimeError: crash'


def check_results(
    planned: dict[int, str], executed: list[int], results: dict[str, ToolResultPart]
) -> None:
    """Refused calls never ran; every other call ran once and reads its own outcome."""
    assert set(results) == {f"c{n}" for n in planned}
    assert len(executed) == len(set(executed))
    expected = {"sick": PANIC, "ok": "ok", "rejected": "bad input"}
    for n, outcome in planned.items():
        content = results[f"c{n}"].content
        if content == BREAKER_TEXT:
            assert n not in executed
        else:
            assert n in executed and content.startswith(expected[outcome])


@FAST
@given(
    script=st.lists(steps, min_size=1, max_size=14),
    parallel=st.booleans(),
    threshold=st.sampled_from([0, 1, 2, 3]),
)
def test_breaker_refused_calls_never_execute_and_never_end_the_run(
    script: list[Step], parallel: bool, threshold: int
) -> None:
    planned, turns = plan(script)
    executed: list[int] = []
    clock = FakeClock()

    @tool
    async def svc(n: int) -> str:
        """A service."""
        executed.append(n)
        await asyncio.sleep(0)
        if planned[n] == "sick":
            raise RuntimeError(f"crash {n}")
        if planned[n] == "rejected":
            raise ToolError(f"bad input {n}")
        return f"ok {n}"

    async def decide(request: ModelRequest) -> Any:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == len(turns):
            return reply("end")
        if script[turn].pause:
            clock.advance(0.012)
        return [call("svc", {"n": n}, id=f"c{n}") for n in turns[turn]]

    recorder = RecordingObserver()
    config = RunConfig(
        tool_breaker=ToolBreaker(failure_threshold=threshold, recovery_seconds=0.01),
        parallel_tool_calls=parallel,
    )
    model = FunctionModel(decide)
    agent = Agent(model, tools=[svc], config=config, observers=[recorder], clock=clock)
    run = agent.run_sync("go")
    assert run.output == "end" and run.stop_reason is None
    results = {r.call_id: r for request in model.requests for r in last_results(request)}
    check_results(planned, executed, results)

    # a refusal is only ever preceded by at least `threshold` sick results (never with 0)
    posted = [args[2].content for args in recorder.of("on_tool_post")]
    if BREAKER_TEXT in posted:
        event("the breaker refused a call")
        assert threshold > 0
        before = posted[: posted.index(BREAKER_TEXT)]
        assert sum(t.startswith(PANIC) for t in before) >= threshold


# ---------------------------------- 3. at most 6 executions per call, whatever the recovery


@dataclass(frozen=True)
class Recovery:
    recoverable: bool
    reflector_raises: bool
    correction: str  # "none" | "input_fix" | "tool_change" | "guidance"
    severity: Severity
    strategy: str  # "scripted" | "backoff"
    decisions: tuple[str, ...]
    max_retries: int


recoveries = st.builds(
    Recovery,
    recoverable=st.booleans(),
    reflector_raises=st.sampled_from([False, False, False, True]),
    correction=st.sampled_from(["none", "input_fix", "tool_change", "guidance"]),
    severity=st.sampled_from(["low", "medium", "high", "critical"]),
    strategy=st.sampled_from(["scripted", "scripted", "backoff"]),
    decisions=st.lists(
        st.sampled_from(["retry", "retry", "retry", "skip", "fail", "ask"]), min_size=1, max_size=8
    ).map(tuple),
    max_retries=st.integers(0, 9),
)


class Harness:
    """Two tools sharing one outcome script, a reflector and a strategy drawn from ``Recovery``."""

    def __init__(self, recovery: Recovery, outcomes: list[str]) -> None:
        self.recovery = recovery
        self.outcomes = outcomes
        self.per_call: dict[str, int] = {}
        self.max_attempts_seen: set[int] = set()
        self.executions = 0

    async def body(self, ctx: ToolContext, n: int) -> str:
        self.per_call[ctx.call_id] = self.per_call.get(ctx.call_id, 0) + 1
        outcome = self.outcomes[self.executions % len(self.outcomes)]
        self.executions += 1
        if outcome == "sick":
            raise RuntimeError("crash")
        if outcome == "rejected":
            raise ToolError(f"bad n={n}")
        return "ok"

    def tools(self) -> list[Any]:
        harness = self

        @tool
        async def primary(ctx: ToolContext, n: int = 0) -> str:
            """Primary."""
            return await harness.body(ctx, n)

        @tool
        async def backup(ctx: ToolContext, n: int = 0) -> str:
            """Backup."""
            return await harness.body(ctx, n)

        return [primary, backup]

    async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
        self.max_attempts_seen.add(failure.max_attempts)
        if self.recovery.reflector_raises:
            raise RuntimeError("reflector bug")
        correction = {
            "none": None,
            "input_fix": Correction("input_fix", arguments={"n": failure.attempt + 1}),
            "tool_change": Correction("tool_change", tool="backup"),
            "guidance": Correction("guidance", guidance="try harder"),
        }[self.recovery.correction]
        return FailureAnalysis(
            self.recovery.recoverable, "why", severity=self.recovery.severity, correction=correction
        )

    def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> Any:
        self.max_attempts_seen.add(max_attempts)
        decisions = self.recovery.decisions
        name = decisions[min(attempt, len(decisions) - 1)]
        return {"retry": Retry(0.0), "skip": Skip("s"), "fail": Fail("f"), "ask": AskUser("a")}[
            name
        ]

    def config(self, threshold: int) -> RunConfig:
        strategy: Any = (
            self
            if self.recovery.strategy == "scripted"
            else ExponentialBackoffRecovery(self.recovery.max_retries, base_delay=0.0)
        )
        return RunConfig(
            reflector=self,
            recovery=strategy,
            tool_breaker=ToolBreaker(failure_threshold=threshold),
        )


@FAST
@given(
    recovery=recoveries,
    outcomes=st.lists(st.sampled_from(["sick", "rejected", "ok"]), min_size=1, max_size=12),
    threshold=st.sampled_from([0, 3]),
    calls_made=st.integers(1, 3),
)
def test_no_recovery_combination_runs_a_tool_more_than_six_times_per_call(
    recovery: Recovery, outcomes: list[str], threshold: int, calls_made: int
) -> None:
    harness = Harness(recovery, outcomes)
    model = ScriptedModel(
        [call("primary", {"n": 0}, id=f"call{i}") for i in range(calls_made)] + [reply("end")]
    )
    agent = Agent(model, tools=harness.tools(), config=harness.config(threshold))
    exhausted: ToolRecoveryExhausted | None = None
    try:
        agent.run_sync("go")
    except ToolRecoveryExhausted as error:
        exhausted = error
        event("the recovery ceiling ended the run")
    except LoopDetected:
        event(
            "the loop stop ended the run"
        )  # identical failures across calls may reach the loop stop: also a clean end
    per_call = harness.per_call
    assert per_call, "the first call always executes"
    assert all(1 <= count <= 6 for count in per_call.values())
    assert harness.max_attempts_seen <= {5}
    if exhausted is not None:
        # the driver's ceiling: only a strategy that keeps saying Retry gets there, and the
        # call it stopped ran exactly 6 times (the original and 5 retries)
        assert recovery.strategy == "scripted"
        assert exhausted.attempts == 6 and exhausted.tool == "primary"
        assert list(per_call.values())[-1] == 6
    if recovery.reflector_raises or (recovery.strategy == "backoff" and not recovery.recoverable):
        assert all(count == 1 for count in per_call.values())
