"""The safety stack end to end through ``Agent`` (reference statements 9-16 and the bonus pins).

Everything here goes through the public API: a scripted or function model, real tools, and
what the model reads back. Nothing waits for real time: cooldowns, backoff and the wall-clock
budget run on a ``FakeClock`` (``Agent(clock=...)``) that the test moves forward, and tool
timeouts on looptime's fake loop time (``@pytest.mark.looptime``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agentloop import Agent, Hook, Observer, Run, RunConfig, ToolError, ToolOutput, tool
from agentloop.errors import (
    AgentLoopError,
    BudgetExhausted,
    Cancelled,
    LockPoisoned,
    LoopDetected,
    MaxTurnsExceeded,
    ToolRecoveryExhausted,
    UserInputRequired,
)
from agentloop.messages import Message, ToolCallPart, ToolResultPart, Usage
from agentloop.model import ModelRequest, ModelResponse
from agentloop.safety import (
    TRUNCATION_MARKER,
    Budget,
    Convergence,
    Correction,
    ExponentialBackoffRecovery,
    Fail,
    FailureAnalysis,
    LoopDetection,
    NoopReflector,
    Price,
    Retry,
    ToolBreaker,
    ToolFailure,
)
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
HOSTS = {"path": "/etc/hosts"}
HOSTS_PATTERN = 'read({"path":"/etc/hosts"})'


# --------------------------------------------------------------------------- helpers


def tool_results(request: ModelRequest) -> list[ToolResultPart]:
    """The results the model reads in ``request`` (empty when the last message is not tools)."""
    last = request.messages[-1]
    return list(last.tool_results_parts) if last.role == "tool" else []


def read_texts(model: ScriptedModel | FunctionModel) -> list[str]:
    """Every tool result text the model read, in order, across all its requests."""
    return [r.content for request in model.requests for r in tool_results(request)]


class Calls:
    """Counts executions of the tools built from it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, dict[str, Any]]] = []

    def count(self, name: str | None = None) -> int:
        return sum(1 for n, _ in self.log if name is None or n == name)


def read_tool(calls: Calls, content: str = "127.0.0.1 localhost") -> Any:
    @tool
    def read(path: str) -> str:
        """Read a file."""
        calls.log.append(("read", {"path": path}))
        return content

    return read


def sick_tool(calls: Calls, outcomes: Sequence[str] | None = None) -> Any:
    """A tool whose n-th execution raises (``"sick"``) or answers; default: always sick."""

    @tool
    async def svc(n: int = 0) -> str:
        """A flaky service."""
        index = calls.count("svc")
        calls.log.append(("svc", {"n": n}))
        outcome = outcomes[index] if outcomes is not None and index < len(outcomes) else "sick"
        if outcome == "sick":
            raise RuntimeError("connection reset")
        if outcome == "slow-ok":
            await asyncio.sleep(0.05)
        return f"ok {index}"

    return svc


def forever(name: str, args: dict[str, Any] | None = None) -> Callable[[ModelRequest], Any]:
    """A model that calls ``name(args)`` on every request."""
    return lambda request: call(name, args or {})


def acting(
    name: str, args: dict[str, Any], usage: Usage, id: str = "c", text: str = ""
) -> ModelResponse:
    """A tool-calling reply with the given usage."""
    message = Message.assistant(text, [ToolCallPart(id, name, args)])
    return ModelResponse(message, usage=usage, stop_reason="tool_use")


@tool
def noop(n: int = 0) -> str:
    """Do nothing useful, with a changing answer."""
    return f"noop {n}"


# --------------------------------------------------------------- statement 9: tool breaker


async def test_three_sick_failures_open_the_breaker_and_the_fourth_call_never_runs(
    recorder: RecordingObserver,
) -> None:
    calls = Calls()
    model = ScriptedModel([call("svc", {"n": i}) for i in range(5)] + [reply("gave up")])
    agent = Agent(model, tools=[sick_tool(calls)], observers=[recorder])
    run = await agent.run("go")
    assert run.output == "gave up" and run.stop_reason is None
    assert calls.count() == 3
    texts = read_texts(model)
    assert texts[:3] == ['Tool "svc" panicked: RuntimeError: connection reset'] * 3
    assert texts[3:] == [BREAKER_TEXT, BREAKER_TEXT]
    refused = recorder.of("on_tool_post")[3]
    assert refused[2].is_error and refused[2].content == BREAKER_TEXT and refused[4] == 0.0
    assert agent.safety.breakers.health("svc").state == "open"


@pytest.mark.looptime
async def test_timeouts_count_as_sick_failures() -> None:
    runs = 0

    @tool(timeout=0.01)
    async def slow(n: int = 0) -> str:
        """Hang."""
        nonlocal runs
        runs += 1
        await asyncio.sleep(1)
        return "never"

    model = ScriptedModel([call("slow", {"n": i}) for i in range(4)] + [reply("done")])
    await Agent(model, tools=[slow]).run("go")
    assert runs == 3
    assert read_texts(model)[3] == BREAKER_TEXT
    assert read_texts(model)[0].startswith("Tool 'slow' timed out after ")


async def test_tool_errors_never_open_the_breaker_the_seed_000_typo_story() -> None:
    runs: list[str] = []

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        runs.append(path)
        if path != "src/main.rs":
            raise ToolError(f"file not found: {path}")
        return "fn main() {}"

    typos = ["src/mian.rs", "src/mai.rs", "src/man.rs", "scr/main.rs", "src/main.r", "main.rs"]
    model = ScriptedModel(
        [call("read_file", {"path": p}) for p in typos]
        + [call("read_file", {"path": "src/main.rs"}), reply("done")]
    )
    agent = Agent(model, tools=[read_file])
    run = await agent.run("Summarise src/main.rs")
    assert run.output == "done"
    assert runs == [*typos, "src/main.rs"]
    texts = read_texts(model)
    assert texts[:6] == [f"file not found: {p}" for p in typos]
    assert texts[6] == "fn main() {}"
    assert BREAKER_TEXT not in texts
    assert agent.safety.breakers.health("read_file").state == "closed"


async def test_error_outputs_and_validation_failures_never_open_the_breaker() -> None:
    runs = 0

    @tool
    def lookup(key: int) -> ToolOutput:
        """Look a key up."""
        nonlocal runs
        runs += 1
        return ToolOutput(f"no such key {key}", is_error=True)

    steps = [call("lookup", {"key": "not a number"}) for _ in range(4)]
    steps += [call("lookup", {"key": i}) for i in range(4)]
    model = ScriptedModel([*steps, reply("done")])
    await Agent(model, tools=[lookup]).run("go")
    texts = read_texts(model)
    assert all(t.startswith("Invalid arguments for tool 'lookup'") for t in texts[:4])
    assert texts[4:] == [f"no such key {i}" for i in range(4)]
    assert runs == 4


async def test_a_neutral_failure_breaks_the_consecutive_sick_count() -> None:
    calls = Calls()

    @tool
    def svc(n: int) -> str:
        """Sick unless n is odd, where it rejects its input."""
        calls.log.append(("svc", {"n": n}))
        if n % 2:
            raise ToolError("bad input")
        raise RuntimeError("boom")

    # sick, sick, neutral, sick, sick, neutral, sick, sick: never three sick in a row
    ns = [0, 2, 1, 4, 6, 3, 8, 10]
    model = ScriptedModel([call("svc", {"n": n}) for n in ns] + [reply("done")])
    await Agent(model, tools=[svc]).run("go")
    assert calls.count() == len(ns)
    assert BREAKER_TEXT not in read_texts(model)


def _after(clock: FakeClock, seconds: float, step: Any) -> Callable[[ModelRequest], Any]:
    """``step``, played once ``clock`` has moved ``seconds`` on."""

    def later(request: ModelRequest) -> Any:
        clock.advance(seconds)
        return step

    return later


@pytest.mark.looptime  # the "slow-ok" probe
async def test_after_the_cooldown_exactly_one_probe_runs_and_its_success_closes() -> None:
    calls = Calls()
    clock = FakeClock()
    outcomes = ["sick", "sick", "sick", "slow-ok", "ok", "ok"]
    model = ScriptedModel(
        [
            call("svc", {"n": 0}),
            call("svc", {"n": 1}),
            call("svc", {"n": 2}),
            call("svc", {"n": 3}),  # refused: open
            _after(clock, 0.08, [call("svc", {"n": 4}), call("svc", {"n": 5})]),  # one probe
            call("svc", {"n": 6}),  # closed again
            call("svc", {"n": 7}),
            reply("done"),
        ]
    )
    config = RunConfig(tool_breaker=ToolBreaker(recovery_seconds=0.05), parallel_tool_calls=True)
    agent = Agent(model, tools=[sick_tool(calls, outcomes)], config=config, clock=clock)
    run = await agent.run("go")
    assert run.output == "done"
    executed = [args["n"] for _, args in calls.log]
    assert executed == [0, 1, 2, 4, 6, 7]
    texts = read_texts(model)
    assert texts[3] == BREAKER_TEXT
    assert texts[4:6] == ["ok 3", BREAKER_TEXT]  # the probe ran, its sibling was refused
    assert texts[6:] == ["ok 4", "ok 5"]
    assert agent.safety.breakers.health("svc").state == "closed"


class DelayCall(Hook):
    """Holds one call (by argument) in the pre-tool hook, i.e. before the breaker gate, until
    ``ready`` is set, then moves ``clock`` on by ``seconds``."""

    def __init__(self, n: int, clock: FakeClock, seconds: float, ready: asyncio.Event) -> None:
        self.n, self.clock, self.seconds, self.ready = n, clock, seconds, ready

    async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> None:
        if call.arguments.get("n") == self.n:
            await self.ready.wait()
            self.clock.advance(self.seconds)


class OnPost(Observer):
    """Sets ``event`` when one call (by argument) has its result, run or refused."""

    def __init__(self, n: int, event: asyncio.Event) -> None:
        self.n, self.event = n, event

    def on_tool_post(
        self, run: Run, call: ToolCallPart, result: ToolResultPart, attempt: int, duration: float
    ) -> None:
        if call.arguments.get("n") == self.n:
            self.event.set()


@pytest.mark.parametrize(("probe_timeout", "second_runs"), [(0.05, True), (0.0, False)])
async def test_a_lost_probe_is_released_after_its_lease(
    probe_timeout: float, second_runs: bool
) -> None:
    executed: list[int] = []
    clock = FakeClock()
    probing, call_4_done = asyncio.Event(), asyncio.Event()

    @tool
    async def svc(n: int) -> str:
        """Sick three times; call 3 hangs past the probe lease (until call 4 is through)."""
        executed.append(n)
        if n < 3:
            raise RuntimeError("boom")
        if n == 3:
            probing.set()
            await call_4_done.wait()
        return f"ok {n}"

    model = ScriptedModel(
        [call("svc", {"n": i}) for i in range(3)]
        + [_after(clock, 0.03, [call("svc", {"n": 3}), call("svc", {"n": 4})]), reply("done")]
    )
    config = RunConfig(
        tool_breaker=ToolBreaker(recovery_seconds=0.02, probe_timeout=probe_timeout),
        parallel_tool_calls=True,
    )
    agent = Agent(
        model,
        tools=[svc],
        config=config,
        hooks=[DelayCall(4, clock, 0.1, probing)],
        observers=[OnPost(4, call_4_done)],
        clock=clock,
    )
    await agent.run("go")
    texts = read_texts(model)
    assert texts[3] == "ok 3"
    if second_runs:  # the lease of the hanging probe ended: call 4 became the new probe
        assert executed == [0, 1, 2, 3, 4] and texts[4] == "ok 4"
    else:  # no lease: the probe slot is held until the probe answers
        assert executed == [0, 1, 2, 3] and texts[4] == BREAKER_TEXT


class FailingPostHook(Hook):
    """A post-tool hook that raises for one call (by argument)."""

    def __init__(self, n: int) -> None:
        self.n = n

    async def post_tool(self, call: ToolCallPart, result: ToolResultPart, ctx: ToolContext) -> None:
        if call.arguments.get("n") == self.n:
            raise RuntimeError("post hook bug")


async def test_a_probe_whose_post_hook_raises_still_settles_the_breaker() -> None:
    """Without a lease (probe_timeout=0) a probe never settled would wedge the tool forever."""
    executed: list[int] = []

    @tool
    def svc(n: int) -> str:
        """Sick three times, then fine."""
        executed.append(n)
        if n < 3:
            raise RuntimeError("boom")
        return f"ok {n}"

    clock = FakeClock()
    model = ScriptedModel(
        [call("svc", {"n": i}) for i in range(3)]
        + [_after(clock, 0.03, call("svc", {"n": 3}))]
        + [call("svc", {"n": 4}), reply("done")]
    )
    config = RunConfig(tool_breaker=ToolBreaker(recovery_seconds=0.01, probe_timeout=0))
    agent = Agent(model, tools=[svc], config=config, hooks=[FailingPostHook(3)], clock=clock)
    with pytest.raises(AgentLoopError):
        await agent.run("go")
    assert executed == [0, 1, 2, 3]
    # the probe ran and succeeded: its result closed the breaker despite the hook's failure
    assert agent.safety.breakers.health("svc").state == "closed"
    run = await agent.run("again")
    assert run.output == "done" and executed == [0, 1, 2, 3, 4]
    assert read_texts(model)[-1] == "ok 4"


async def test_a_probe_cancelled_in_its_post_hook_still_settles_the_breaker() -> None:
    entered = asyncio.Event()
    executed: list[int] = []

    class SlowPostHook(Hook):
        async def post_tool(
            self, call: ToolCallPart, result: ToolResultPart, ctx: ToolContext
        ) -> None:
            if call.arguments.get("n") == 3:
                entered.set()
                await asyncio.Event().wait()

    @tool
    def svc(n: int) -> str:
        """Sick three times, then fine."""
        executed.append(n)
        if n < 3:
            raise RuntimeError("boom")
        return f"ok {n}"

    clock = FakeClock()
    model = ScriptedModel(
        [call("svc", {"n": i}) for i in range(3)]
        + [reply("opened"), _after(clock, 0.03, call("svc", {"n": 3}))]
        + [call("svc", {"n": 4}), reply("done")]
    )
    config = RunConfig(tool_breaker=ToolBreaker(recovery_seconds=0.01, probe_timeout=0))
    agent = Agent(model, tools=[svc], config=config, hooks=[SlowPostHook()], clock=clock)
    assert (await agent.run("a")).output == "opened"
    task = asyncio.ensure_future(agent.run("probe"))
    await asyncio.wait_for(entered.wait(), 2)
    agent.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 2)
    run = await agent.run("again")
    assert run.output == "done" and executed == [0, 1, 2, 3, 4]


async def test_a_failed_probe_reopens_the_breaker_with_a_fresh_cooldown() -> None:
    calls = Calls()
    clock = FakeClock()
    model = ScriptedModel(
        [call("svc", {"n": i}) for i in range(3)]
        + [
            _after(clock, 0.08, call("svc", {"n": 3})),  # probe: sick again
            call("svc", {"n": 4}),  # refused: re-opened
            _after(clock, 0.08, call("svc", {"n": 5})),  # next probe succeeds
            call("svc", {"n": 6}),
            reply("done"),
        ]
    )
    config = RunConfig(tool_breaker=ToolBreaker(recovery_seconds=0.05))
    outcomes = ["sick", "sick", "sick", "sick", "ok", "ok"]
    await Agent(model, tools=[sick_tool(calls, outcomes)], config=config, clock=clock).run("go")
    assert [args["n"] for _, args in calls.log] == [0, 1, 2, 3, 5, 6]
    texts = read_texts(model)
    assert texts[3].startswith('Tool "svc" panicked') and texts[4] == BREAKER_TEXT
    assert texts[5:] == ["ok 4", "ok 5"]


@pytest.mark.looptime
async def test_a_success_arriving_while_open_does_not_close_the_breaker() -> None:
    calls = Calls()
    # one batch: a slow success admitted before the trip, three fast sick failures
    outcomes = ["slow-ok", "sick", "sick", "sick"]
    model = ScriptedModel(
        [[call("svc", {"n": i}) for i in range(4)], call("svc", {"n": 9}), reply("done")]
    )
    config = RunConfig(parallel_tool_calls=True)
    agent = Agent(model, tools=[sick_tool(calls, outcomes)], config=config)
    await agent.run("go")
    assert calls.count() == 4
    texts = read_texts(model)
    assert texts[0] == "ok 0"
    assert texts[-1] == BREAKER_TEXT


async def test_failure_threshold_zero_never_opens() -> None:
    calls = Calls()
    model = ScriptedModel([call("svc", {"n": i}) for i in range(12)] + [reply("done")])
    config = RunConfig(tool_breaker=ToolBreaker(failure_threshold=0))
    agent = Agent(model, tools=[sick_tool(calls)], config=config)
    await agent.run("go")
    assert calls.count() == 12
    assert BREAKER_TEXT not in read_texts(model)
    health = agent.safety.breakers.health("svc")
    assert health.state == "closed" and health.consecutive_failures == 12


async def test_breakers_are_per_tool() -> None:
    calls = Calls()
    model = ScriptedModel(
        [call("svc", {"n": i}) for i in range(4)] + [call("noop", {"n": 1}), reply("done")]
    )
    await Agent(model, tools=[sick_tool(calls), noop]).run("go")
    assert read_texts(model)[3:] == [BREAKER_TEXT, "noop 1"]


# ---------------------------------------------------------------- statement 10: loop stop


async def test_identical_call_and_result_stop_before_the_eleventh_execution(
    recorder: RecordingObserver,
) -> None:
    calls = Calls()
    model = FunctionModel(forever("read", HOSTS))
    agent = Agent(model, tools=[read_tool(calls)], observers=[recorder])
    with pytest.raises(LoopDetected) as info:
        await agent.run("go")
    error = info.value
    assert str(error) == f"Loop detected: {HOSTS_PATTERN} repeated 10 times"
    assert error.message == f"{HOSTS_PATTERN} repeated 10 times"
    assert calls.count() == 10
    assert len(model.requests) == 11
    # observers saw the 11th attempt start and end with the refusal text
    assert len(recorder.of("on_tool_pre")) == 11
    posts = recorder.of("on_tool_post")
    assert len(posts) == 11
    refused = posts[-1][2]
    assert refused.is_error
    assert refused.content == f"dispatch refused before execution: {error}"
    # the model never reads the refusal; completed turns are salvaged
    run = agent.current_run
    assert run is not None and run.stop_reason is error
    assert len(agent.history) == 1 + 2 * 10
    assert all("dispatch refused" not in m.text for m in agent.history)
    assert [args[1:] for args in recorder.of("on_loop_detected")] == [(HOSTS_PATTERN, 3)]


async def test_identical_calls_within_one_sequential_turn_stop_at_the_eleventh() -> None:
    calls = Calls()
    model = ScriptedModel([[call("read", HOSTS) for _ in range(12)], reply("never")])
    with pytest.raises(LoopDetected, match=r"repeated 10 times$"):
        await Agent(model, tools=[read_tool(calls)]).run("go")
    assert calls.count() == 10 and len(model.requests) == 1


async def test_stop_threshold_zero_never_stops() -> None:
    calls = Calls()
    model = FunctionModel(forever("read", HOSTS))
    config = RunConfig(loop_detection=LoopDetection(stop_threshold=0), max_turns=25)
    with pytest.raises(MaxTurnsExceeded):
        await Agent(model, tools=[read_tool(calls)], config=config).run("go")
    assert calls.count() == 25


async def test_a_custom_stop_threshold_is_honoured_exactly() -> None:
    calls = Calls()
    config = RunConfig(loop_detection=LoopDetection(warn_threshold=2, stop_threshold=4))
    with pytest.raises(LoopDetected, match=r"repeated 4 times$"):
        await Agent(
            FunctionModel(forever("read", HOSTS)), tools=[read_tool(calls)], config=config
        ).run("go")
    assert calls.count() == 4


# ------------------------------------------------------- statement 11: progress is not a loop


async def test_the_same_call_with_changing_results_is_progress() -> None:
    polls = 0

    @tool
    def status(job: str) -> str:
        """Job status."""
        nonlocal polls
        polls += 1
        return f"running ({polls * 3}%)"

    def decide(request: ModelRequest) -> Any:
        return call("status", {"job": "j1"}) if polls < 30 else reply("finished")

    run = await Agent(FunctionModel(decide), tools=[status]).run("go")
    assert run.output == "finished" and polls == 30


async def test_different_inputs_with_identical_outputs_are_not_repetitions(
    recorder: RecordingObserver,
) -> None:
    calls = Calls()
    model = ScriptedModel(
        [call("read", {"path": f"/tmp/f{i}"}) for i in range(20)] + [reply("done")]
    )
    agent = Agent(model, tools=[read_tool(calls, "")], observers=[recorder])
    run = await agent.run("go")
    assert run.output == "done" and calls.count() == 20
    assert recorder.of("on_loop_detected") == []


# -------------------------------------------- statement 12: warning and cross-run hygiene


async def test_warning_at_three_fires_once_per_pattern_and_the_run_continues(
    recorder: RecordingObserver,
) -> None:
    calls = Calls()
    steps: list[Any] = [call("read", HOSTS) for _ in range(6)]
    steps += [call("read", {"path": "/etc/passwd"}) for _ in range(4)]
    model = ScriptedModel([*steps, reply("done")])
    agent = Agent(model, tools=[read_tool(calls)], observers=[recorder])
    run = await agent.run("go")
    assert run.output == "done" and calls.count() == 10
    warnings = [args[1:] for args in recorder.of("on_loop_detected")]
    assert warnings == [(HOSTS_PATTERN, 3), ('read({"path":"/etc/passwd"})', 3)]
    # the warning fires when the third identical result is recorded (the pipeline records
    # before on_tool_post), not before the third call ran
    names = recorder.names()
    first_warning = names.index("on_loop_detected")
    assert names[:first_warning].count("on_tool_pre") == 3
    assert names[:first_warning].count("on_tool_post") == 2


async def test_two_below_the_warning_line_is_silent(recorder: RecordingObserver) -> None:
    model = ScriptedModel([call("read", HOSTS), call("read", HOSTS), reply("done")])
    await Agent(model, tools=[read_tool(Calls())], observers=[recorder]).run("go")
    assert recorder.of("on_loop_detected") == []


async def test_a_stop_level_pattern_that_never_fired_does_not_refuse_the_next_run() -> None:
    calls = Calls()
    model = ScriptedModel(
        [call("read", HOSTS) for _ in range(10)]
        + [reply("done once")]
        + [call("read", HOSTS), reply("done twice")]
    )
    agent = Agent(model, tools=[read_tool(calls)])
    first = await agent.run("go")
    assert first.output == "done once" and calls.count() == 10
    second = await agent.run("again")
    assert second.output == "done twice" and second.stop_reason is None
    assert calls.count() == 11
    assert read_texts(model)[-1] == "127.0.0.1 localhost"


async def test_after_a_loop_stop_the_next_run_can_dispatch_again() -> None:
    calls = Calls()
    steps: list[Any] = [call("read", HOSTS) for _ in range(11)]
    model = ScriptedModel([*steps, call("read", HOSTS), reply("recovered")])
    agent = Agent(model, tools=[read_tool(calls)])
    with pytest.raises(LoopDetected):
        await agent.run("go")
    assert calls.count() == 10
    run = await agent.run("again")
    assert run.output == "recovered" and calls.count() == 11


async def test_unknown_tool_names_are_one_pattern_per_name_whatever_the_arguments(
    recorder: RecordingObserver,
) -> None:
    model = FunctionModel(lambda request: call("frobnicate", {"x": len(request.messages)}))
    agent = Agent(model, tools=[noop], observers=[recorder])
    with pytest.raises(LoopDetected) as info:
        await agent.run("go")
    assert str(info.value) == "Loop detected: frobnicate(*) repeated 10 times"
    assert len(model.requests) == 11
    assert read_texts(model) == ["tool 'frobnicate' is not available"] * 10
    assert [args[1:] for args in recorder.of("on_loop_detected")] == [("frobnicate(*)", 3)]


async def test_breaker_refusals_count_toward_the_loop_detector() -> None:
    calls = Calls()
    model = FunctionModel(forever("svc", {"n": 1}))
    agent = Agent(model, tools=[sick_tool(calls)])
    with pytest.raises(LoopDetected) as info:
        await agent.run("go")
    assert str(info.value) == 'Loop detected: svc({"n":1}) repeated 10 times'
    assert calls.count() == 3
    texts = read_texts(model)
    assert texts[3:] == [BREAKER_TEXT] * 10
    assert len(model.requests) == 3 + 10 + 1


# -------------------------------------------------------------- statement 13: convergence

ANSWER = "The answer is 42 and nothing else matters here."
REPHRASED = "the ANSWER is 42, and nothing else matters here!"
OTHER = "I could not find the configuration file anywhere in the repository."


async def test_default_convergence_warns_and_every_run_succeeds(
    recorder: RecordingObserver,
) -> None:
    model = ScriptedModel([reply(ANSWER), reply(REPHRASED), reply(ANSWER)])
    agent = Agent(model, observers=[recorder])
    outputs = [(await agent.run(f"q{i}")).output for i in range(3)]
    assert outputs == [ANSWER, REPHRASED, ANSWER]
    assert all(run.stop_reason is None for run in agent.runs)
    detected = recorder.of("on_convergence_detected")
    assert len(detected) == 1
    assert detected[0][0] is agent.runs[2]
    assert detected[0][1].streak == 3


async def test_convergence_stop_ends_the_third_run() -> None:
    model = ScriptedModel([reply(ANSWER)] * 3)
    agent = Agent(model, config=RunConfig(convergence=Convergence(action="stop")))
    await agent.run("a")
    await agent.run("b")
    with pytest.raises(LoopDetected) as info:
        await agent.run("c")
    assert info.value.message == "agent stopped: convergence detected"
    assert str(info.value) == "Loop detected: agent stopped: convergence detected"
    # the stopped reply is not committed: only the first two runs are in history
    assert [m.text for m in agent.history if m.role == "assistant"] == [ANSWER, ANSWER]


async def test_convergence_ask_user_raises_user_input_required() -> None:
    model = ScriptedModel([reply(ANSWER)] * 3)
    agent = Agent(model, config=RunConfig(convergence=Convergence(action="ask_user")))
    await agent.run("a")
    await agent.run("b")
    with pytest.raises(UserInputRequired) as info:
        await agent.run("c")
    assert str(info.value) == "convergence detected, user input needed"
    assert not info.value.is_recoverable()


@pytest.mark.parametrize(
    ("texts", "stops_at"),
    [
        ([ANSWER, ANSWER, "", ANSWER, ANSWER], None),
        ([ANSWER, ANSWER, "...", ANSWER, ANSWER], None),
        ([ANSWER, ANSWER, OTHER, ANSWER, ANSWER], None),
        ([ANSWER, ANSWER, OTHER, OTHER, OTHER], 4),
        ([ANSWER, "", ANSWER, ANSWER, ANSWER], 4),
    ],
    ids=["empty-resets", "punctuation-only-resets", "dissimilar-resets", "restreak", "after-empty"],
)
async def test_an_empty_or_dissimilar_reply_resets_the_streak(
    texts: list[str], stops_at: int | None
) -> None:
    model = ScriptedModel([reply(t) for t in texts])
    agent = Agent(model, config=RunConfig(convergence=Convergence(action="stop")))
    stopped: int | None = None
    for index in range(len(texts)):
        try:
            await agent.run(f"q{index}")
        except LoopDetected:
            stopped = index
            break
    assert stopped == stops_at


async def test_acting_turn_preambles_never_count_toward_convergence() -> None:
    def preamble(i: int) -> list[Any]:
        return [ANSWER, call("noop", {"n": i})]

    model = ScriptedModel(
        [
            *(preamble(i) for i in range(3)),
            reply(ANSWER),
            *(preamble(i) for i in range(3, 5)),
            reply(ANSWER),
        ]
    )
    agent = Agent(model, tools=[noop], config=RunConfig(convergence=Convergence(action="stop")))
    assert (await agent.run("a")).output == ANSWER
    assert (await agent.run("b")).output == ANSWER


async def test_a_convergence_detector_that_is_off_never_stops() -> None:
    model = ScriptedModel([reply(ANSWER)] * 5)
    agent = Agent(model, config=RunConfig(convergence=Convergence(count=0, action="stop")))
    for i in range(5):
        await agent.run(f"q{i}")


# ---------------------------------------------------------- statements 14-16: recovery


class FlakyCounter:
    def __init__(self, *, sick: bool = False) -> None:
        self.runs = 0
        self.sick = sick

    def make(self) -> Any:
        counter = self

        @tool
        async def flaky(n: int = 0) -> str:
            """Always fails."""
            counter.runs += 1
            if counter.sick:
                raise RuntimeError("disk on fire")
            raise ToolError(f"flaky failed (attempt {counter.runs})")

        return flaky


class Recoverable:
    def __init__(self) -> None:
        self.seen: list[ToolFailure] = []

    async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
        self.seen.append(failure)
        return FailureAnalysis(True, "ROOT CAUSE: transient")


class AlwaysRetry:
    def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> Retry:
        return Retry(0.0)


class CountingHook(Hook):
    def __init__(self) -> None:
        self.pre = 0
        self.post = 0

    async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> None:
        self.pre += 1

    async def post_tool(self, call: ToolCallPart, result: ToolResultPart, ctx: ToolContext) -> None:
        self.post += 1


@pytest.mark.parametrize("sick", [False, True])
async def test_default_recovery_is_one_attempt(sick: bool) -> None:
    flaky = FlakyCounter(sick=sick)
    model = ScriptedModel([call("flaky", {"n": 1}), reply("ok")])
    run = await Agent(model, tools=[flaky.make()]).run("go")
    assert run.output == "ok" and flaky.runs == 1
    expected = (
        'Tool "flaky" panicked: RuntimeError: disk on fire' if sick else "flaky failed (attempt 1)"
    )
    assert read_texts(model) == [expected]


async def test_recovery_ceiling_six_executions_and_the_whole_pipeline_fires_six_times(
    recorder: RecordingObserver,
) -> None:
    runs = 0

    @tool
    def same(n: int = 0) -> str:
        """Always the same failure."""
        nonlocal runs
        runs += 1
        raise ToolError("same failure")

    hook = CountingHook()
    reflector = Recoverable()
    config = RunConfig(
        reflector=reflector,
        recovery=AlwaysRetry(),
        # a warn line of 6 is reached exactly when the detector recorded six attempts
        loop_detection=LoopDetection(warn_threshold=6),
    )
    model = ScriptedModel([call("same", {"n": 1}), reply("never")])
    agent = Agent(model, tools=[same], config=config, hooks=[hook], observers=[recorder])
    with pytest.raises(ToolRecoveryExhausted) as info:
        await agent.run("go")
    assert (info.value.tool, info.value.attempts) == ("same", 6)
    assert info.value.args == ("same", 6)
    assert runs == 6
    assert (hook.pre, hook.post) == (6, 6)
    assert [args[2] for args in recorder.of("on_tool_pre")] == [0, 1, 2, 3, 4, 5]
    assert [args[3] for args in recorder.of("on_tool_post")] == [0, 1, 2, 3, 4, 5]
    assert [f.attempt for f in reflector.seen] == [0, 1, 2, 3, 4, 5]
    assert all(f.max_attempts == 5 for f in reflector.seen)
    assert [args[1:] for args in recorder.of("on_loop_detected")] == [('same({"n":1})', 6)]
    assert agent.safety.breakers.health("same").total_calls == 6
    assert len(model.requests) == 1 and agent.history == []


async def test_the_ceiling_names_the_requested_tool_after_a_tool_change() -> None:
    calls = Calls()

    class SwitchTool:
        async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
            return FailureAnalysis(True, correction=Correction("tool_change", tool="svc"))

    @tool
    def first(n: int = 0) -> str:
        """Fails."""
        raise ToolError("first failed")

    config = RunConfig(
        reflector=SwitchTool(),
        recovery=AlwaysRetry(),
        tool_breaker=ToolBreaker(failure_threshold=0),
    )
    model = ScriptedModel([call("first"), reply("never")])
    with pytest.raises(ToolRecoveryExhausted) as info:
        await Agent(model, tools=[first, sick_tool(calls)], config=config).run("go")
    assert (info.value.tool, info.value.attempts) == ("first", 6)
    assert calls.count("svc") == 5


async def test_retry_forever_on_a_sick_tool_is_cut_short_by_the_breaker() -> None:
    flaky = FlakyCounter(sick=True)
    config = RunConfig(reflector=Recoverable(), recovery=AlwaysRetry())
    model = ScriptedModel([call("flaky", {"n": 1}), reply("ok")])
    run = await Agent(model, tools=[flaky.make()], config=config).run("go")
    assert run.output == "ok"
    assert flaky.runs == 3
    assert read_texts(model) == [BREAKER_TEXT]


async def test_recovery_gives_up_softly_with_the_latest_attempts_text() -> None:
    flaky = FlakyCounter()
    reflector = Recoverable()
    config = RunConfig(
        reflector=reflector, recovery=ExponentialBackoffRecovery(max_retries=3, base_delay=0.01)
    )
    model = ScriptedModel([call("flaky", {"n": 1}), reply("ok")])
    clock = FakeClock()
    started = clock.monotonic()
    run = await Agent(model, tools=[flaky.make()], config=config, clock=clock).run("go")
    elapsed = clock.monotonic() - started
    assert run.output == "ok" and flaky.runs == 4
    assert elapsed >= 0.07  # 10 + 20 + 40 ms of backoff
    assert read_texts(model) == ["flaky failed (attempt 4)"]
    assert "ROOT CAUSE" not in read_texts(model)[0]


class RecoverableNoop(NoopReflector):
    """A user's reflector built on the stock one."""

    async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
        return FailureAnalysis(True, "transient")


class RetryTwice(ExponentialBackoffRecovery):
    """A user's strategy built on the stock one: two retries whatever the analysis says."""

    def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> Any:
        return Retry(0.0) if attempt < 2 else Fail("enough")


@pytest.mark.parametrize(
    ("reflector", "recovery", "executions"),
    [
        (RecoverableNoop(), ExponentialBackoffRecovery(max_retries=3, base_delay=0.0), 4),
        (RecoverableNoop(), RetryTwice(), 3),
        (NoopReflector(), RetryTwice(), 3),
        (NoopReflector(), ExponentialBackoffRecovery(max_retries=3, base_delay=0.0), 1),
    ],
    ids=["reflector-subclass", "both-subclassed", "strategy-subclass", "stock"],
)
async def test_subclasses_of_the_stock_recovery_parts_are_consulted(
    reflector: Any, recovery: Any, executions: int
) -> None:
    flaky = FlakyCounter()
    config = RunConfig(reflector=reflector, recovery=recovery)
    model = ScriptedModel([call("flaky"), reply("ok")])
    run = await Agent(model, tools=[flaky.make()], config=config).run("go")
    assert run.output == "ok" and flaky.runs == executions
    assert read_texts(model) == [f"flaky failed (attempt {executions})"]


async def test_a_reflector_that_raises_means_no_retry() -> None:
    class Broken:
        async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
            raise RuntimeError("reflector bug")

    flaky = FlakyCounter()
    config = RunConfig(reflector=Broken(), recovery=AlwaysRetry())
    model = ScriptedModel([call("flaky"), reply("ok")])
    run = await Agent(model, tools=[flaky.make()], config=config).run("go")
    assert run.output == "ok" and flaky.runs == 1
    assert read_texts(model) == ["flaky failed (attempt 1)"]


# ------------------------------------------------------------------------ budget pins


def usage_model(usage: Usage, *, calls_per_turn: int = 1, model: str = "function") -> FunctionModel:
    """A model that keeps calling ``noop`` and reports ``usage`` per reply."""

    def respond(request: ModelRequest) -> ModelResponse:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        parts = [ToolCallPart(f"c{turn}_{i}", "noop", {"n": turn}) for i in range(calls_per_turn)]
        return ModelResponse(Message.assistant("", parts), usage=usage, stop_reason="tool_use")

    return FunctionModel(respond, model=model)


def warns(recorder: RecordingObserver) -> list[tuple[str, float, float]]:
    return [args[1:] for args in recorder.of("on_budget_warn")]


async def test_token_budget_warns_once_and_refuses_the_next_request(
    recorder: RecordingObserver,
) -> None:
    model = usage_model(Usage(20, 10))
    agent = Agent(
        model, tools=[noop], config=RunConfig(budget=Budget(tokens=100)), observers=[recorder]
    )
    with pytest.raises(BudgetExhausted) as info:
        await agent.run("go")
    error = info.value
    assert (error.dimension, error.spent, error.limit) == ("tokens", 120, 100)
    assert error.args == ("tokens", 120, 100)
    assert not error.is_recoverable()
    # 30, 60, 90 (soft line 80 crossed), 120 (hard line crossed): the fifth request is refused
    assert len(model.requests) == 4
    assert warns(recorder) == [("tokens", 90, 100)]
    # completed turns are salvaged into history
    assert len(agent.history) == 1 + 2 * 4
    run = agent.current_run
    assert run is not None and len(run.turns) == 4 and run.stop_reason is error


async def test_output_token_budget(recorder: RecordingObserver) -> None:
    model = usage_model(Usage(1000, 25))
    config = RunConfig(budget=Budget(output_tokens=100))
    agent = Agent(model, tools=[noop], config=config, observers=[recorder])
    with pytest.raises(BudgetExhausted) as info:
        await agent.run("go")
    assert (info.value.dimension, info.value.spent, info.value.limit) == ("output_tokens", 100, 100)
    assert len(model.requests) == 4
    assert warns(recorder) == [("output_tokens", 100, 100)]


async def test_output_token_budget_soft_line_before_hard(recorder: RecordingObserver) -> None:
    model = usage_model(Usage(1000, 40))
    config = RunConfig(budget=Budget(output_tokens=100))
    agent = Agent(model, tools=[noop], config=config, observers=[recorder])
    with pytest.raises(BudgetExhausted) as info:
        await agent.run("go")
    # 40 → sent, 80 (soft line) → warn and sent, 120 → refused
    assert (info.value.dimension, info.value.spent) == ("output_tokens", 120)
    assert len(model.requests) == 3
    assert warns(recorder) == [("output_tokens", 80, 100)]


async def test_turn_budget_refuses_the_request_after_the_last_allowed_turn(
    recorder: RecordingObserver,
) -> None:
    model = usage_model(Usage())
    agent = Agent(
        model, tools=[noop], config=RunConfig(budget=Budget(turns=3)), observers=[recorder]
    )
    with pytest.raises(BudgetExhausted) as info:
        await agent.run("go")
    assert (info.value.dimension, info.value.spent, info.value.limit) == ("turns", 3, 3)
    assert len(model.requests) == 3
    assert warns(recorder) == [("turns", 2, 3)]
    assert len(agent.history) == 1 + 2 * 3


async def test_a_run_that_finishes_on_the_last_allowed_turn_succeeds() -> None:
    model = ScriptedModel([call("noop"), call("noop", {"n": 1}), reply("done")])
    run = await Agent(model, tools=[noop], config=RunConfig(budget=Budget(turns=3))).run("go")
    assert run.output == "done"


async def test_tool_call_budget(recorder: RecordingObserver) -> None:
    model = usage_model(Usage(), calls_per_turn=2)
    config = RunConfig(budget=Budget(tool_calls=5))
    agent = Agent(model, tools=[noop], config=config, observers=[recorder])
    with pytest.raises(BudgetExhausted) as info:
        await agent.run("go")
    assert (info.value.dimension, info.value.spent, info.value.limit) == ("tool_calls", 6, 5)
    assert len(model.requests) == 3
    assert warns(recorder) == [("tool_calls", 4, 5)]


async def test_cost_budget_uses_the_price_table(recorder: RecordingObserver) -> None:
    # 100 input tokens at $1000/M + 50 output at $2000/M = $0.20 per reply
    prices = {"priced": Price(input_per_million=1000.0, output_per_million=2000.0)}
    model = usage_model(Usage(100, 50), model="priced")
    config = RunConfig(budget=Budget(cost_usd=0.5, prices=prices))
    agent = Agent(model, tools=[noop], config=config, observers=[recorder])
    with pytest.raises(BudgetExhausted) as info:
        await agent.run("go")
    assert info.value.dimension == "cost_usd"
    assert info.value.spent == pytest.approx(0.6) and info.value.limit == 0.5
    # 0.2 → sent, 0.4 (soft line 0.4) → warn and sent, 0.6 → refused
    assert len(model.requests) == 3
    [(dimension, spent, limit)] = warns(recorder)
    assert dimension == "cost_usd" and spent == pytest.approx(0.4) and limit == 0.5


async def test_wall_clock_budget_refuses_the_next_request(recorder: RecordingObserver) -> None:
    executed = 0
    clock = FakeClock()

    @tool
    async def work(n: int = 0) -> str:
        """Takes a while."""
        nonlocal executed
        executed += 1
        await clock.sleep(0.2)
        return f"step {n}"

    def decide(request: ModelRequest) -> Any:
        return call("work", {"n": len(request.messages)})

    config = RunConfig(budget=Budget(wall_clock=0.5))
    agent = Agent(
        FunctionModel(decide), tools=[work], config=config, observers=[recorder], clock=clock
    )
    model = agent.client
    assert isinstance(model, FunctionModel)
    with pytest.raises(BudgetExhausted) as info:
        await asyncio.wait_for(agent.run("go"), 5)
    error = info.value
    assert error.dimension == "wall_clock" and error.limit == 0.5
    assert error.spent >= 0.5
    # every request that was sent was answered by an executed call: the refused one never left
    assert len(model.requests) == executed >= 2
    assert [w[0] for w in warns(recorder)] == ["wall_clock"]


async def test_warnings_are_once_per_dimension_per_run_and_re_arm_for_the_next_run(
    recorder: RecordingObserver,
) -> None:
    # turns: soft line 8 of 10; a run of 9 tool turns and a reply checks the gate past the
    # soft line twice (spent 8 and 9) and never reaches the hard line
    steps: list[Any] = [call("noop", {"n": i}) for i in range(9)] + [reply("done")]
    model = ScriptedModel(steps * 2)
    agent = Agent(
        model, tools=[noop], config=RunConfig(budget=Budget(turns=10)), observers=[recorder]
    )
    first = await agent.run("a")
    assert first.output == "done"
    assert warns(recorder) == [("turns", 8, 10)]
    second = await agent.run("b")
    assert second.output == "done"
    assert warns(recorder) == [("turns", 8, 10), ("turns", 8, 10)]
    assert recorder.of("on_budget_warn")[1][0] is second


async def test_two_dimensions_warn_once_each(recorder: RecordingObserver) -> None:
    model = usage_model(Usage(10, 10))
    config = RunConfig(budget=Budget(tokens=200, turns=10))
    agent = Agent(model, tools=[noop], config=config, observers=[recorder])
    with pytest.raises(BudgetExhausted) as info:
        await agent.run("go")
    # tokens: 20 per turn, soft 160 after 8 turns; turns: soft 8 after 8 turns;
    # tokens hits 200 after 10 turns, as do turns: tokens is reported first
    assert info.value.dimension == "tokens"
    assert len(model.requests) == 10
    assert sorted(w[0] for w in warns(recorder)) == ["tokens", "turns"]


# --------------------------------------------------------------- output limit and secrets


def big_tool(text: str) -> Any:
    @tool
    def dump() -> str:
        """Dump a big file."""
        return text

    return dump


@pytest.mark.parametrize("limit", [13, 50, 100])
async def test_output_limit_keeps_the_head_and_the_marker_inside_the_budget(limit: int) -> None:
    text = "".join(f"line {i}\n" for i in range(100))
    model = ScriptedModel([call("dump"), reply("ok")])
    config = RunConfig(max_tool_output_chars=limit)
    await Agent(model, tools=[big_tool(text)], config=config).run("go")
    [result] = read_texts(model)
    assert len(result) == limit
    assert result.endswith(TRUNCATION_MARKER)
    assert text.startswith(result[: -len(TRUNCATION_MARKER)])


async def test_output_limit_leaves_short_results_and_zero_keeps_everything() -> None:
    text = "x" * 50
    model = ScriptedModel([call("dump"), reply("ok")])
    await Agent(model, tools=[big_tool(text)], config=RunConfig(max_tool_output_chars=50)).run("go")
    assert read_texts(model) == [text]
    long_text = "y" * 100_000
    model = ScriptedModel([call("dump"), reply("ok")])
    await Agent(model, tools=[big_tool(long_text)], config=RunConfig(max_tool_output_chars=0)).run(
        "go"
    )
    assert read_texts(model) == [long_text]


async def test_output_limit_never_splits_a_character() -> None:
    text = "héllo wörld 🎉 " * 20
    model = ScriptedModel([call("dump"), reply("ok")])
    await Agent(model, tools=[big_tool(text)], config=RunConfig(max_tool_output_chars=40)).run("go")
    [result] = read_texts(model)
    assert len(result) <= 40
    result.encode("utf-8")  # no lone surrogates
    assert text.startswith(result[: -len(TRUNCATION_MARKER)])


KEY = "sk-live-abcdefghijklmnopqrstuvwxyz123456"


async def test_a_panic_message_is_redacted_before_the_model_reads_it(
    recorder: RecordingObserver,
) -> None:
    @tool
    def login() -> str:
        """Log in."""
        raise RuntimeError(f"auth failed for {KEY}")

    model = ScriptedModel([call("login"), reply("ok")])
    agent = Agent(model, tools=[login], observers=[recorder])
    await agent.run("go")
    [text] = read_texts(model)
    assert text == 'Tool "login" panicked: RuntimeError: auth failed for [REDACTED]'
    assert KEY not in recorder.of("on_tool_post")[0][2].content
    assert all(
        KEY not in m.text and all(KEY not in getattr(p, "content", "") for p in m.parts)
        for m in agent.history
    )


async def test_an_exception_that_cannot_be_printed_is_still_a_soft_result() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise ValueError("no text")

    @tool
    def weird() -> str:
        """Raise something odd."""
        raise Unprintable()

    model = ScriptedModel([call("weird"), reply("ok")])
    run = await Agent(model, tools=[weird]).run("go")
    assert run.output == "ok"
    assert read_texts(model) == ['Tool "weird" panicked: Unprintable: <exception str() failed>']


async def test_a_tool_error_text_stays_verbatim() -> None:
    @tool
    def login() -> str:
        """Log in."""
        raise ToolError(f"auth failed for {KEY}")

    model = ScriptedModel([call("login"), reply("ok")])
    await Agent(model, tools=[login]).run("go")
    assert read_texts(model) == [f"auth failed for {KEY}"]


# ----------------------------------------------------------------------------- poisoning


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("detector bug")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and "detection is off" in r.getMessage()
    ]


@pytest.mark.parametrize("method", ["record", "check"])
async def test_a_raising_loop_detector_switches_detection_off_and_the_run_continues(
    method: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls()
    model = ScriptedModel([call("read", HOSTS) for _ in range(15)] + [reply("done")])
    agent = Agent(model, tools=[read_tool(calls)])
    monkeypatch.setattr(agent.safety.loops, method, _boom)
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        run = await agent.run("go")
    assert run.output == "done" and run.stop_reason is None
    assert calls.count() == 15  # no stop at 10: detection is off
    assert len(_warnings(caplog)) == 1


async def test_a_raising_convergence_detector_switches_detection_off(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel([reply(ANSWER)] * 4)
    agent = Agent(model, config=RunConfig(convergence=Convergence(action="stop")))
    monkeypatch.setattr(agent.safety.convergence, "record", _boom)
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        for i in range(4):
            run = await agent.run(f"q{i}")
            assert run.output == ANSWER
    assert len(_warnings(caplog)) == 1


@pytest.mark.parametrize("method", ["record", "admit"])
async def test_a_raising_breaker_is_lock_poisoned(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel([call("noop"), reply("never")])
    agent = Agent(model, tools=[noop])
    monkeypatch.setattr(agent.safety.breakers, method, _boom)
    with pytest.raises(LockPoisoned) as info:
        await agent.run("go")
    assert info.value.what == "tool_breaker"
    assert isinstance(info.value.__cause__, RuntimeError)


async def test_a_raising_budget_gate_fails_closed_as_lock_poisoned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = ScriptedModel([call("noop", {"n": i}) for i in range(5)] + [reply("done")])
    agent = Agent(model, tools=[noop], config=RunConfig(budget=Budget(turns=2)))
    monkeypatch.setattr(agent.safety.limits.budget, "pre_request", _boom)
    with pytest.raises(LockPoisoned) as info:
        await agent.run("go")
    assert info.value.what == "budget"
    assert str(info.value) == "Lock poisoned: budget state is no longer trustworthy"
    assert isinstance(info.value.__cause__, RuntimeError)
    assert model.requests == []  # refused before the first request was sent


# ------------------------------------------------------- alternation and cancellation


async def test_alternating_identical_failures_stop_like_a_plain_loop(
    recorder: RecordingObserver,
) -> None:
    @tool
    def fetch(url: str) -> str:
        """Fetch."""
        raise ToolError("403 forbidden")

    @tool
    def login(user: str) -> str:
        """Log in."""
        raise ToolError("bad password")

    def decide(request: ModelRequest) -> Any:
        turns = sum(1 for m in request.messages if m.role == "assistant")
        return call("fetch", {"url": "u"}) if turns % 2 == 0 else call("login", {"user": "me"})

    model = FunctionModel(decide)
    agent = Agent(model, tools=[fetch, login], observers=[recorder])
    with pytest.raises(LoopDetected) as info:
        await agent.run("go")
    assert str(info.value) == (
        'Loop detected: fetch({"url":"u"}) and login({"user":"me"}) alternating 5 times'
    )
    assert len(read_texts(model)) == 10 and len(model.requests) == 11
    patterns = [args[1] for args in recorder.of("on_loop_detected")]
    assert patterns[-1] == 'fetch({"url":"u"}) and login({"user":"me"}) alternating'


async def test_cancelled_calls_are_not_sick_failures() -> None:
    started = asyncio.Event()
    runs = 0

    @tool
    async def hang(n: int = 0) -> str:
        """Hang until cancelled."""
        nonlocal runs
        runs += 1
        started.set()
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel([call("hang", {"n": i}) for i in range(4)] + [call("hang"), reply("x")])
    agent = Agent(model, tools=[hang])
    for _ in range(4):
        started.clear()
        task = asyncio.ensure_future(agent.run("go"))
        await asyncio.wait_for(started.wait(), 2)
        agent.cancel()
        with pytest.raises(Cancelled):
            await asyncio.wait_for(task, 2)
    assert runs == 4
    assert agent.safety.breakers.health("hang").state == "closed"
    assert agent.safety.breakers.health("hang").failures == 0


async def test_a_cancelled_probe_hands_its_slot_back() -> None:
    calls = Calls()
    started = asyncio.Event()
    outcomes = ["sick", "sick", "sick"]

    @tool
    async def svc(n: int = 0) -> str:
        """Sick three times, then hangs."""
        index = calls.count()
        calls.log.append(("svc", {"n": n}))
        if index < len(outcomes):
            raise RuntimeError("boom")
        if n == 99:
            return "recovered"
        started.set()
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel(
        [call("svc", {"n": i}) for i in range(3)]
        + [reply("opened"), call("svc", {"n": 3}), call("svc", {"n": 99}), reply("done")]
    )
    config = RunConfig(tool_breaker=ToolBreaker(recovery_seconds=0.05))
    clock = FakeClock()
    agent = Agent(model, tools=[svc], config=config, clock=clock)
    assert (await agent.run("a")).output == "opened"
    clock.advance(0.08)
    task = asyncio.ensure_future(agent.run("probe"))
    await asyncio.wait_for(started.wait(), 2)  # the probe is running
    agent.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 2)
    # the released probe slot lets the next call probe at once (no second cooldown)
    run = await agent.run("again")
    assert run.output == "done"
    assert read_texts(model)[-1] == "recovered"
    assert agent.safety.breakers.health("svc").state == "closed"
