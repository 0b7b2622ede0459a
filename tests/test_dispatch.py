"""The per-call pipeline: hooks, recovery and its ceiling, parallel dispatch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import Agent, Allow, Ask, Block, Hook, RunConfig, ToolError, tool
from agentloop.errors import Cancelled, ToolRecoveryExhausted
from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.safety import (
    AskUser,
    Correction,
    ExponentialBackoffRecovery,
    Fail,
    FailureAnalysis,
    Retry,
    Skip,
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

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def results(model: ScriptedModel, request: int = -1) -> list[ToolResultPart]:
    return list(model.requests[request].messages[-1].tool_results_parts)


class Counter:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def make(self, *, fail: bool = True) -> Any:
        counter = self

        @tool
        async def flaky(n: int = 0) -> str:
            """Fail."""
            counter.calls.append({"n": n})
            if fail:
                raise ToolError(f"flaky failed (n={n})")
            return "ok"

        return flaky


class Recorded(Hook):
    def __init__(self, decision: Any, log: list[str], name: str) -> None:
        self.decision, self.log, self.name = decision, log, name

    async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> Any:
        self.log.append(f"pre:{self.name}")
        return self.decision

    async def post_tool(self, call: ToolCallPart, result: ToolResultPart, ctx: ToolContext) -> None:
        self.log.append(f"post:{self.name}")


async def test_hook_block_is_soft_verbatim_and_skips_everything(
    recorder: RecordingObserver,
) -> None:
    counter = Counter()
    log: list[str] = []
    hooks = [
        Recorded(Allow(), log, "allow"),
        Recorded(Block("no rm"), log, "block"),
        Recorded(Block("later"), log, "later"),
    ]

    class Reflect:
        async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
            log.append("reflector")
            return FailureAnalysis(True)

    model = ScriptedModel([call("flaky"), reply("ok")])
    config = RunConfig(reflector=Reflect(), recovery=ExponentialBackoffRecovery(3))
    agent = Agent(model, tools=[counter.make()], hooks=hooks, observers=[recorder], config=config)
    await agent.run("go")
    assert counter.calls == []
    result = results(model)[0]
    assert (result.content, result.is_error) == ("no rm", True)
    assert log == ["pre:allow", "pre:block"]
    assert recorder.of("on_tool_post")[0][4] == 0.0


async def test_headless_ask_acts_as_block() -> None:
    counter = Counter()
    model = ScriptedModel([call("flaky"), reply("ok")])
    agent = Agent(model, tools=[counter.make()], hooks=[Recorded(Ask("confirm?"), [], "ask")])
    await agent.run("go")
    assert results(model)[0].content == "confirm?" and counter.calls == []


async def test_interactive_ask_goes_to_the_approver() -> None:
    counter = Counter()
    answers = [True, False]
    asked: list[str] = []

    async def approver(call_part: ToolCallPart, message: str) -> bool:
        asked.append(message)
        return answers.pop(0)

    model = ScriptedModel([call("flaky"), call("flaky"), reply("ok")])
    agent = Agent(
        model,
        tools=[counter.make(fail=False)],
        hooks=[Recorded(Ask("really?"), [], "ask")],
        approver=approver,
        config=RunConfig(headless=False),
    )
    await agent.run("go")
    assert asked == ["really?", "really?"]
    assert results(model, 1)[0].content == "ok"
    assert results(model, 2)[0].content == "User denied permission"
    assert len(counter.calls) == 1


async def test_post_hooks_run_after_a_real_attempt() -> None:
    log: list[str] = []
    counter = Counter()
    model = ScriptedModel([call("flaky"), reply("ok")])
    await Agent(model, tools=[counter.make(fail=False)], hooks=[Recorded(None, log, "h")]).run("go")
    assert log == ["pre:h", "post:h"]


async def test_default_recovery_is_one_attempt() -> None:
    counter = Counter()
    model = ScriptedModel([call("flaky", {"n": 1}), reply("ok")])
    await Agent(model, tools=[counter.make()]).run("go")
    assert len(counter.calls) == 1
    assert results(model)[0].content == "flaky failed (n=1)"


class AlwaysRetry:
    def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> Retry:
        return Retry(0.0)


class Recoverable:
    def __init__(self, correction: Correction | None = None) -> None:
        self.seen: list[ToolFailure] = []
        self.correction = correction

    async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
        self.seen.append(failure)
        return FailureAnalysis(True, "transient", correction=self.correction)


async def test_recovery_ceiling_ends_the_run_after_six_calls(recorder: RecordingObserver) -> None:
    counter = Counter()
    model = ScriptedModel([call("flaky"), reply("never")])
    reflector = Recoverable()
    config = RunConfig(reflector=reflector, recovery=AlwaysRetry())
    agent = Agent(model, tools=[counter.make()], config=config, observers=[recorder])
    with pytest.raises(ToolRecoveryExhausted) as info:
        await agent.run("go")
    assert (info.value.tool, info.value.attempts) == ("flaky", 6)
    assert len(counter.calls) == 6
    assert [args[2] for args in recorder.of("on_tool_pre")] == [0, 1, 2, 3, 4, 5]
    assert len(recorder.of("on_tool_post")) == 6
    assert [f.attempt for f in reflector.seen] == [0, 1, 2, 3, 4, 5]
    assert all(f.max_attempts == 5 for f in reflector.seen)
    assert agent.history == []


async def test_backoff_recovery_retries_three_times_then_model_reads_the_failure() -> None:
    counter = Counter()
    model = ScriptedModel([call("flaky", {"n": 4}), reply("ok")])
    config = RunConfig(reflector=Recoverable(), recovery=ExponentialBackoffRecovery(max_retries=3))
    clock = FakeClock()
    started = clock.monotonic()
    run = await Agent(model, tools=[counter.make()], config=config, clock=clock).run("go")
    elapsed = clock.monotonic() - started
    assert run.output == "ok" and len(counter.calls) == 4
    assert 0.65 <= elapsed < 2.0  # 100 + 200 + 400 ms
    assert results(model)[0].content == "flaky failed (n=4)"


async def test_a_raising_reflector_means_fail() -> None:
    class Broken:
        async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
            raise RuntimeError("reflector bug")

    counter = Counter()
    model = ScriptedModel([call("flaky"), reply("ok")])
    config = RunConfig(reflector=Broken(), recovery=AlwaysRetry())
    run = await Agent(model, tools=[counter.make()], config=config).run("go")
    assert run.output == "ok" and len(counter.calls) == 1


@pytest.mark.parametrize("action", [Skip("s"), AskUser("a"), Fail("f")])
async def test_giving_up_returns_the_original_result(action: Any) -> None:
    class Strategy:
        def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> Any:
            return action

    counter = Counter()
    model = ScriptedModel([call("flaky", {"n": 2}), reply("ok")])
    config = RunConfig(reflector=Recoverable(), recovery=Strategy())
    await Agent(model, tools=[counter.make()], config=config).run("go")
    assert results(model)[0].content == "flaky failed (n=2)"


async def test_corrections_apply_to_the_retry_never_to_history() -> None:
    counter = Counter()

    class OnceFix:
        def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> Any:
            return Retry() if attempt == 0 else Fail("no")

    model = ScriptedModel([call("flaky", {"n": 1}), reply("ok")])
    reflector = Recoverable(Correction("input_fix", arguments={"n": 42}))
    agent = Agent(
        model, tools=[counter.make()], config=RunConfig(reflector=reflector, recovery=OnceFix())
    )
    await agent.run("go")
    assert counter.calls == [{"n": 1}, {"n": 42}]
    assert agent.history[1].tool_calls[0].arguments == {"n": 1}
    assert results(model)[0].content == "flaky failed (n=42)"
    assert reflector.seen[0].validate is not None
    assert reflector.seen[0].validate({"n": "x"}) is not None
    assert reflector.seen[0].validate({"n": 3}) is None


async def test_cancel_during_backoff_sleep() -> None:
    class SlowRetry:
        def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> Retry:
            return Retry(30.0)

    counter = Counter()

    class CancelOnPre(RecordingObserver):
        def on_tool_post(self, *args: Any) -> None:
            agent.cancel()

    model = ScriptedModel([call("flaky"), reply("after")])
    config = RunConfig(reflector=Recoverable(), recovery=SlowRetry())
    clock = FakeClock()
    agent = Agent(
        model, tools=[counter.make()], config=config, observers=[CancelOnPre()], clock=clock
    )
    with pytest.raises(Cancelled):
        await asyncio.wait_for(agent.run("go"), 2)
    assert len(counter.calls) == 1
    assert clock.sleeps == [30.0]


@settings(max_examples=25, deadline=None)
@given(
    decisions=st.lists(st.sampled_from(["retry", "skip", "fail", "ask"]), min_size=1, max_size=12),
    recoverable=st.booleans(),
)
def test_no_strategy_runs_a_tool_more_than_six_times(
    decisions: list[str], recoverable: bool
) -> None:
    counter = Counter()
    actions = {"retry": Retry(), "skip": Skip(), "fail": Fail(), "ask": AskUser()}

    class Scripted:
        def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> Any:
            assert max_attempts == 5
            return actions[decisions[min(attempt, len(decisions) - 1)]]

    class Reflect:
        async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
            return FailureAnalysis(recoverable)

    model = ScriptedModel([call("flaky"), reply("ok")])
    agent = Agent(
        model, tools=[counter.make()], config=RunConfig(reflector=Reflect(), recovery=Scripted())
    )
    gives_up = [decisions[min(a, len(decisions) - 1)] != "retry" for a in range(6)]
    if any(gives_up):
        assert agent.run_sync("go").output == "ok"
        assert len(counter.calls) == gives_up.index(True) + 1
    else:
        with pytest.raises(ToolRecoveryExhausted) as info:
            agent.run_sync("go")
        assert info.value.attempts == 6 and len(counter.calls) == 6


@pytest.mark.looptime
async def test_parallel_dispatch_keeps_the_models_order() -> None:
    order: list[str] = []

    @tool
    async def sleepy(name: str, delay: float) -> str:
        """Sleep then answer."""
        await asyncio.sleep(delay)
        order.append(name)
        return name

    calls = [
        call("sleepy", {"name": n, "delay": d}) for n, d in [("a", 0.05), ("b", 0.0), ("c", 0.02)]
    ]
    model = ScriptedModel([calls, reply("ok")])
    loop = asyncio.get_running_loop()
    started = loop.time()
    await Agent(model, tools=[sleepy], config=RunConfig(parallel_tool_calls=True)).run("go")
    assert loop.time() - started < 0.07 + 0.05
    assert order == ["b", "c", "a"]
    assert [r.content for r in results(model)] == ["a", "b", "c"]


@pytest.mark.looptime
async def test_parallel_concurrency_is_bounded() -> None:
    active = 0
    peak = 0

    @tool
    async def busy() -> str:
        """Busy."""
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return "done"

    model = ScriptedModel([[call("busy") for _ in range(6)], reply("ok")])
    config = RunConfig(parallel_tool_calls=True, max_concurrency=2)
    await Agent(model, tools=[busy], config=config).run("go")
    assert peak == 2


async def test_parallel_hard_error_discards_finished_siblings() -> None:
    counter = Counter()

    @tool
    async def quick() -> str:
        """Quick."""
        return "fine"

    model = ScriptedModel([[call("quick"), call("flaky")], reply("never")])
    config = RunConfig(parallel_tool_calls=True, reflector=Recoverable(), recovery=AlwaysRetry())
    agent = Agent(model, tools=[quick, counter.make()], config=config)
    with pytest.raises(ToolRecoveryExhausted):
        await agent.run("go")
    assert agent.history == []
    assert len(counter.calls) == 6


@pytest.mark.looptime
async def test_sequential_is_the_default_dispatch_mode() -> None:
    order: list[str] = []

    @tool
    async def sleepy(name: str, delay: float) -> str:
        """Sleep."""
        await asyncio.sleep(delay)
        order.append(name)
        return name

    calls = [
        call("sleepy", {"name": "a", "delay": 0.02}),
        call("sleepy", {"name": "b", "delay": 0.0}),
    ]
    await Agent(ScriptedModel([calls, reply("ok")]), tools=[sleepy]).run("go")
    assert order == ["a", "b"]


async def test_tool_context_is_passed() -> None:
    seen: list[ToolContext] = []

    @tool
    def with_ctx(ctx: ToolContext, x: int) -> str:
        """Uses the context."""
        seen.append(ctx)
        (ctx.scratch_dir / "note.txt").write_text("hi")
        return str(x)

    model = ScriptedModel([call("with_ctx", {"x": 3}, id="c-1"), reply("ok")])
    agent = Agent(model, tools=[with_ctx], session_id="sess-test")
    run = await agent.run("go")
    ctx = seen[0]
    assert (ctx.run_id, ctx.turn, ctx.call_id, ctx.tool_name) == (run.id, 0, "c-1", "with_ctx")
    assert "sess-test" in str(ctx.scratch_dir) and not ctx.cancel.cancelled
    assert "ctx" not in with_ctx.parameters["properties"]


async def test_policy_hook_texts() -> None:
    from agentloop import PolicyHook

    counter = Counter()
    cases = [
        (PolicyHook.denying_everything(), "blocked by policy: every tool call is denied"),
        (PolicyHook(deny=["flaky"]), "blocked by policy: tool 'flaky' is denied"),
        (PolicyHook(allow=["other"]), "blocked by policy: tool 'flaky' is not in the allowlist"),
        (PolicyHook(deny=["flaky"], allow=["flaky"]), "blocked by policy: tool 'flaky' is denied"),
        (PolicyHook(ask=["flaky"]), "permission required: allow tool 'flaky'?"),
    ]
    for hook, text in cases:
        model = ScriptedModel([call("flaky"), reply("ok")])
        await Agent(model, tools=[counter.make()], hooks=[hook]).run("go")
        assert results(model)[0].content == text
    assert counter.calls == []
    model = ScriptedModel([call("flaky"), reply("ok")])
    await Agent(model, tools=[counter.make(fail=False)], hooks=[PolicyHook(allow=["flaky"])]).run(
        "go"
    )
    assert results(model)[0].content == "ok"


async def test_cancel_while_awaiting_approval_never_runs_the_tool() -> None:
    from agentloop import PolicyHook

    counter = Counter()

    async def approver(call_part: ToolCallPart, message: str) -> bool:
        agent.cancel()
        await asyncio.Event().wait()
        return True

    agent = Agent(
        ScriptedModel([call("flaky"), reply("never")]),
        tools=[counter.make(fail=False)],
        hooks=[PolicyHook(ask=["flaky"])],
        approver=approver,
        config=RunConfig(headless=False),
    )
    with pytest.raises(Cancelled):
        await asyncio.wait_for(agent.run("go"), 2)
    assert counter.calls == []


async def test_a_tools_own_not_found_text_is_never_decorated() -> None:
    @tool
    def read_file(path: str) -> str:
        """Read."""
        raise ToolError(f"file {path} not found")

    @tool
    def read_files(paths: list[str]) -> str:
        """Read many."""
        return ""

    model = ScriptedModel([call("read_file", {"path": "a"}), reply("ok")])
    await Agent(model, tools=[read_file, read_files]).run("go")
    assert results(model)[0].content == "file a not found"


async def test_parallel_first_hard_error_in_model_order_wins() -> None:
    @tool
    async def late() -> str:
        """Fails late."""
        return "late"

    class Strategy:
        def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> Any:
            return Retry()

    counter = Counter()
    model = ScriptedModel([[call("flaky"), call("late")], reply("never")])
    config = RunConfig(parallel_tool_calls=True, reflector=Recoverable(), recovery=Strategy())
    agent = Agent(model, tools=[counter.make(), late], config=config)
    breakers = agent.safety.breakers
    breakers.admit = _poison_for("late", breakers.admit)  # type: ignore[method-assign]
    # "late" fails first in time (a poisoned breaker), "flaky" first in the model's order
    with pytest.raises(ToolRecoveryExhausted):
        await agent.run("go")


def _poison_for(name: str, admit: Any) -> Any:
    from agentloop.errors import LockPoisoned

    def wrapped(tool_name: str) -> Any:
        if tool_name == name:
            raise LockPoisoned("tool_breaker")
        return admit(tool_name)

    return wrapped


async def test_a_model_that_keeps_calling_a_blocked_tool_is_stopped() -> None:
    from agentloop import PolicyHook
    from agentloop.errors import LoopDetected

    counter = Counter()
    model = FunctionModel(lambda request: call("flaky", {"n": 1}))
    agent = Agent(model, tools=[counter.make()], hooks=[PolicyHook(deny=["flaky"])])
    with pytest.raises(LoopDetected) as info:
        await agent.run("go")
    assert str(info.value) == 'Loop detected: flaky({"n":1}) repeated 10 times'
    assert len(model.requests) == 11 and counter.calls == []
