"""The engine end to end: soft texts, turns, limits, finalize retention, cancellation."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agentloop import (
    Agent,
    CancelToken,
    Message,
    ModelRequest,
    Run,
    RunConfig,
    ToolError,
    ToolOutput,
    ToolResultPart,
    tool,
)
from agentloop.errors import (
    AgentLoopError,
    Cancelled,
    ConfigurationError,
    ContextExceeded,
    ContextLengthExceeded,
    InvalidInput,
    MaxTurnsExceeded,
    ProviderUnavailable,
    ToolLimitReached,
)
from agentloop.testing import FunctionModel, RecordingObserver, ScriptedModel, call, reply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@tool
def read_file(path: str) -> str:
    """Read a UTF-8 text file."""
    files = {"src/main.rs": "fn main() {}"}
    if path not in files:
        raise ToolError(f"file {path} not found")
    return files[path]


@tool
def write_file(path: str, text: str) -> str:
    """Write a file."""
    return "ok"


def last_results(model: ScriptedModel, request: int = -1) -> list[ToolResultPart]:
    message = model.requests[request].messages[-1]
    assert message.role == "tool"
    return list(message.tool_results_parts)


def assert_valid_transcript(messages: list[Message]) -> None:
    open_calls: list[str] = []
    for message in messages:
        if message.role == "tool":
            assert [r.call_id for r in message.tool_results_parts] == open_calls
            open_calls = []
        else:
            assert not open_calls, "a tool call was left without its result"
            open_calls = [c.id for c in message.tool_calls]
    assert not open_calls


async def test_seed_000_typo_path_story() -> None:
    model = ScriptedModel(
        [
            call("read_file", {"path": "src/mian.rs"}),
            call("read_file", {"path": "src/main.rs"}),
            reply("done"),
        ]
    )
    agent = Agent(model, tools=[read_file], system="You are careful.")
    run = await agent.run("Summarise src/main.rs")
    assert run.output == "done" and run.stop_reason is None
    first = last_results(model, 1)[0]
    assert first.is_error and first.content == "file src/mian.rs not found"
    second = last_results(model, 2)[0]
    assert not second.is_error and second.content == "fn main() {}"
    assert model.requests[0].system == "You are careful."
    assert [s.name for s in model.requests[0].tools] == ["read_file"]
    assert len(agent.history) == 6
    assert_valid_transcript(agent.history)


def test_run_sync_is_the_sync_facade() -> None:
    model = ScriptedModel([reply("hi")])
    run = Agent(model).run_sync("hello")
    assert run.output == "hi"


async def test_run_sync_inside_a_loop_is_a_clear_error() -> None:
    with pytest.raises(InvalidInput, match="await run"):
        Agent(ScriptedModel([reply("x")])).run_sync("hello")


async def test_never_advertised_tool_is_pre_answered(recorder: RecordingObserver) -> None:
    model = ScriptedModel([call("frobnicate", {"x": 1}), reply("ok")])
    agent = Agent(model, tools=[read_file], observers=[recorder])
    await agent.run("go")
    result = last_results(model)[0]
    assert result.is_error and result.content == "tool 'frobnicate' is not available"
    assert len(recorder.of("on_tool_call_received")) == 1
    # nothing ran, but the call still ends for observers (SPEC 12: every call ends)
    assert len(recorder.of("on_tool_pre")) == 1
    assert [args[2].content for args in recorder.of("on_tool_post")] == [result.content]


async def test_never_advertised_tool_gets_did_you_mean() -> None:
    model = ScriptedModel([call("read_fille", {"path": "a"}), reply("ok")])
    await Agent(model, tools=[read_file, write_file]).run("go")
    assert last_results(model)[0].content == (
        "tool 'read_fille' is not available. Did you mean 'read_file'?"
    )


async def test_suggestions_can_be_switched_off() -> None:
    model = ScriptedModel([call("read_fille", {"path": "a"}), reply("ok")])
    await Agent(model, tools=[read_file], config=RunConfig(suggest_tools=False)).run("go")
    assert last_results(model)[0].content == "tool 'read_fille' is not available"


async def test_registry_miss_at_dispatch_lists_sorted_names() -> None:
    @tool
    def b() -> str:
        """B."""
        return "b"

    @tool
    def a() -> str:
        """A."""
        agent.registry.unregister("x")
        return "a"

    @tool
    def x() -> str:
        """X."""
        return "x"

    model = ScriptedModel([call("a"), call("x"), reply("ok")])
    agent = Agent(model, tools=[b, a, x], config=RunConfig(suggest_tools=False))
    await agent.run("go")
    assert last_results(model)[0].content == "Tool not found: x. Available: a, b"


async def test_registry_miss_with_many_tools_truncates_and_suggests() -> None:
    tools = []
    for i in range(13):

        def fn() -> str:
            """T."""
            return "t"

        tools.append(tool(name=f"tool_{i:02d}")(fn))

    @tool
    def remover() -> str:
        """Remove."""
        agent.registry.unregister("tool_12")
        return "gone"

    model = ScriptedModel([call("remover"), call("tool_12"), reply("ok")])
    agent = Agent(model, tools=[*tools, remover])
    await agent.run("go")
    text = last_results(model)[0].content
    names = sorted([f"tool_{i:02d}" for i in range(12)] + ["remover"])
    assert text.startswith("Tool not found: tool_12. Available: " + ", ".join(names[:10]))
    assert "... (and 3 more). Did you mean 'tool_1" in text


async def test_tool_error_and_error_output_are_verbatim() -> None:
    @tool
    def failing(kind: str) -> Any:
        """Fail softly."""
        if kind == "raise":
            raise ToolError("upstream returned 404 for /users/7")
        return ToolOutput({"error": "empty result"}, is_error=True)

    model = ScriptedModel(
        [call("failing", {"kind": "raise"}), call("failing", {"kind": "output"}), reply("ok")]
    )
    run = await Agent(model, tools=[failing]).run("go")
    assert run.output == "ok"
    first, second = last_results(model, 1)[0], last_results(model, 2)[0]
    assert (first.content, first.is_error) == ("upstream returned 404 for /users/7", True)
    assert (second.content, second.is_error) == ('{"error": "empty result"}', True)


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (RuntimeError("boom"), 'Tool "crash" panicked: RuntimeError: boom'),
        (ValueError(), 'Tool "crash" panicked: ValueError'),
        (KeyError("k"), "Tool \"crash\" panicked: KeyError: 'k'"),
        (Cancelled(), 'Tool "crash" panicked: Cancelled: Agent cancelled'),
    ],
)
async def test_tool_panic_is_soft(exc: Exception, text: str) -> None:
    @tool
    async def crash() -> str:
        """Crash."""
        raise exc

    model = ScriptedModel([call("crash"), reply("recovered")])
    run = await Agent(model, tools=[crash]).run("go")
    assert run.output == "recovered" and run.stop_reason is None
    result = last_results(model)[0]
    assert result.is_error and result.content == text


async def test_sync_tool_panic_is_soft_and_runs_in_a_thread() -> None:
    seen: list[bool] = []

    @tool
    def crash() -> str:
        """Crash in a thread."""
        seen.append(threading.current_thread() is threading.main_thread())
        raise OSError("disk on fire")

    model = ScriptedModel([call("crash"), reply("ok")])
    await Agent(model, tools=[crash]).run("go")
    assert seen == [False]
    assert last_results(model)[0].content == 'Tool "crash" panicked: OSError: disk on fire'


def test_keyboard_interrupt_escapes_run() -> None:
    @tool
    async def interrupt() -> str:
        """Ctrl-C."""
        raise KeyboardInterrupt

    agent = Agent(ScriptedModel([call("interrupt"), reply("never")]), tools=[interrupt])
    with pytest.raises(KeyboardInterrupt):
        agent.run_sync("go")
    assert agent.current_run is not None and isinstance(agent.current_run.stop_reason, Cancelled)
    assert agent.history == []


async def test_invalid_arguments_are_soft_and_name_fields() -> None:
    @tool
    def add(a: int, b: int = 2) -> int:
        """Add."""
        return a + b

    model = ScriptedModel(
        [call("add", {"a": "x", "c": 1}), call("add", {}), call("add", {"a": 1}), reply("ok")]
    )
    await Agent(model, tools=[add]).run("go")
    assert last_results(model, 1)[0].content == (
        "Invalid arguments for tool 'add': a: Input should be a valid integer, unable to parse "
        "string as an integer; c: Extra inputs are not permitted"
    )
    assert (
        last_results(model, 2)[0].content == "Invalid arguments for tool 'add': a: Field required"
    )
    assert last_results(model, 3)[0].content == "3"


async def test_non_json_arguments_are_a_soft_invalid_arguments_result() -> None:
    model = ScriptedModel([call("read_file", {"__invalid_json__": "{path: oops"}), reply("ok")])
    run = await Agent(model, tools=[read_file]).run("go")
    assert run.stop_reason is None
    text = last_results(model)[0].content
    assert text.startswith("Invalid arguments for tool 'read_file': arguments: not valid JSON")


@pytest.mark.looptime
async def test_tool_timeout_text_uses_whole_seconds() -> None:
    @tool(timeout=1)
    async def slow() -> str:
        """Sleep."""
        await asyncio.sleep(5)
        return "late"

    model = ScriptedModel([call("slow"), reply("ok")])
    run = await Agent(model, tools=[slow]).run("go")
    assert run.output == "ok"
    assert last_results(model)[0].content == "Tool 'slow' timed out after 1s"


@pytest.mark.looptime
async def test_run_config_tool_timeout_applies_and_tool_raised_timeout_is_a_panic() -> None:
    @tool
    async def slow() -> str:
        """Sleep."""
        await asyncio.sleep(5)
        return "late"

    @tool
    async def raises_timeout() -> str:
        """Raise TimeoutError itself."""
        raise TimeoutError("socket")

    model = ScriptedModel([call("slow"), call("raises_timeout"), reply("ok")])
    await Agent(model, tools=[slow, raises_timeout], config=RunConfig(tool_timeout=0.05)).run("x")
    assert last_results(model, 1)[0].content == "Tool 'slow' timed out after 0s"
    assert (
        last_results(model, 2)[0].content == 'Tool "raises_timeout" panicked: TimeoutError: socket'
    )


async def test_results_of_one_turn_travel_in_one_tool_message_in_order() -> None:
    model = ScriptedModel(
        [
            [
                call("write_file", {"path": "a", "text": "1"}),
                call("nope"),
                call("read_file", {"path": "src/main.rs"}),
            ],
            reply("ok"),
        ]
    )
    await Agent(model, tools=[read_file, write_file]).run("go")
    results = last_results(model)
    calls = model.requests[1].messages[-2].tool_calls
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert [r.is_error for r in results] == [False, True, False]
    assert len({c.id for c in calls}) == 3


async def test_non_string_results_are_serialised_not_repr_dumped() -> None:
    from dataclasses import dataclass

    from pydantic import BaseModel

    class Point(BaseModel):
        x: int

    @dataclass
    class Box:
        w: int

    @tool
    def produce(kind: str) -> Any:
        """Produce."""
        return {
            "dict": {"a": [1, "é"]},
            "list": [1, 2],
            "model": Point(x=1),
            "dc": Box(3),
            "none": None,
            "int": 7,
        }[kind]

    kinds = ["dict", "list", "model", "dc", "none", "int"]
    model = ScriptedModel([call("produce", {"kind": k}) for k in kinds] + [reply("ok")])
    await Agent(model, tools=[produce]).run("go")
    contents = [last_results(model, i + 1)[0].content for i in range(len(kinds))]
    assert contents == ['{"a": [1, "é"]}', "[1, 2]", '{"x":1}', '{"w": 3}', "", "7"]


async def test_max_turns_stops_before_the_next_model_call() -> None:
    model = FunctionModel(lambda request: call("read_file", {"path": "src/main.rs"}))
    agent = Agent(model, tools=[read_file], config=RunConfig(max_turns=2))
    with pytest.raises(MaxTurnsExceeded) as info:
        await agent.run("loop forever")
    assert info.value.max == 2 and len(model.requests) == 2
    assert info.value.summary is not None and info.value.summary.turns_completed == 2
    assert len(agent.history) == 5  # input + two complete turns (salvaged)


async def test_tool_call_caps() -> None:
    per_turn = ScriptedModel([[call("read_file", {"path": "a"})] * 3, reply("x")])
    agent = Agent(per_turn, tools=[read_file], config=RunConfig(max_tool_calls_per_turn=2))
    with pytest.raises(ToolLimitReached, match="turn tool-call limit of 2"):
        await agent.run("go")
    total = FunctionModel(lambda r: call("read_file", {"path": "a"}))
    agent = Agent(total, tools=[read_file], config=RunConfig(max_tool_calls=3))
    with pytest.raises(ToolLimitReached, match="run tool-call limit of 3"):
        await agent.run("go")
    assert len(total.requests) == 4


async def test_finalize_salvages_completed_turns_on_a_provider_error() -> None:
    model = ScriptedModel(
        [
            call("read_file", {"path": "src/main.rs"}),
            call("read_file", {"path": "src/main.rs"}),
            ProviderUnavailable("502 from upstream", status_code=502),
        ]
    )
    agent = Agent(model, tools=[read_file])
    with pytest.raises(ProviderUnavailable) as info:
        await agent.run("go")
    run = agent.current_run
    assert run is not None and run.stop_reason is info.value and run.output is None
    assert len(agent.history) == 5 and agent.history[0].text == "go"
    assert_valid_transcript(agent.history)
    assert info.value.attempt_log and info.value.attempt_log[0].error_type == "ProviderUnavailable"
    assert info.value.summary is not None and info.value.summary.run_id == run.id


async def test_finalize_drops_the_in_flight_turn_on_a_hard_error_mid_dispatch() -> None:
    token = CancelToken()

    @tool
    async def cancel_me() -> str:
        """Fire the cancel signal mid-tool."""
        token.cancel()
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel(
        [call("read_file", {"path": "src/main.rs"}), call("cancel_me"), reply("x")]
    )
    agent = Agent(model, tools=[read_file, cancel_me])
    with pytest.raises(Cancelled):
        await agent.run("go", cancel=token)
    assert len(agent.history) == 3
    assert_valid_transcript(agent.history)
    run = agent.current_run
    assert run is not None and len(run.messages) == 5
    assert_valid_transcript(run.messages)
    interrupted = run.messages[-1].tool_results_parts[0]
    assert interrupted.is_error
    assert interrupted.content == "The tool call was interrupted before a result was produced."


async def test_nothing_commits_when_no_turn_completed() -> None:
    agent = Agent(ScriptedModel([ProviderUnavailable("down")]))
    with pytest.raises(ProviderUnavailable):
        await agent.run("go")
    assert agent.history == []


async def test_cannot_fit_family_commits_nothing_and_keeps_unfinished_input() -> None:
    for error in (ContextLengthExceeded("prompt is too long"), ContextExceeded(9, 8)):
        model = ScriptedModel([call("read_file", {"path": "src/main.rs"}), error])
        agent = Agent(model, tools=[read_file], config=RunConfig(context_window=0))
        with pytest.raises(type(error)):
            await agent.run("a very long task")
        assert agent.history == []
        assert agent.current_run is not None
        assert agent.current_run.unfinished_input == "a very long task"


async def test_a_hard_failed_run_recovers_on_the_next_run() -> None:
    model = ScriptedModel([ProviderUnavailable("down"), reply("fine")])
    agent = Agent(model)
    with pytest.raises(ProviderUnavailable):
        await agent.run("first")
    run = await agent.run("second")
    assert run.output == "fine"
    assert [m.text for m in agent.history] == ["second", "fine"]
    assert len(agent.runs) == 2 and agent.runs[0].stop_reason is not None


async def test_history_carries_into_the_next_run() -> None:
    model = ScriptedModel([reply("one"), reply("two")])
    agent = Agent(model)
    await agent.run("a")
    await agent.run("b")
    assert [m.text for m in model.requests[1].messages] == ["a", "one", "b"]


async def test_cancel_before_run_cancels_exactly_the_next_run() -> None:
    model = ScriptedModel([reply("ok")])
    agent = Agent(model)
    agent.cancel()
    with pytest.raises(Cancelled) as info:
        await agent.run("go")
    assert info.value.is_cancelled() and model.requests == []
    assert agent.current_run is not None and isinstance(agent.current_run.stop_reason, Cancelled)
    assert (await agent.run("again")).output == "ok"


async def test_cancel_during_a_tool_call_is_prompt_and_agent_is_reusable() -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel([call("hang"), reply("after")])
    agent = Agent(model, tools=[hang])
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    agent.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 2)
    assert (await agent.run("next")).output == "after"


async def test_cancel_during_a_streaming_reply() -> None:
    class Stalled(ScriptedModel):
        async def stream(self, request: ModelRequest) -> Any:
            from agentloop import StreamEvent

            yield StreamEvent("text_delta", text="partial")
            await asyncio.Event().wait()

    model = Stalled([])
    recorder = RecordingObserver()

    class Canceller(RecordingObserver):
        def on_text_delta(self, run: Run, text: str) -> None:
            agent.cancel()

    agent = Agent(model, config=RunConfig(stream=True), observers=[recorder, Canceller()])
    with pytest.raises(Cancelled):
        await asyncio.wait_for(agent.run("go"), 2)
    assert agent.history == []
    assert recorder.of("on_text_delta")[0][1] == "partial"


async def test_cancel_from_another_thread() -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    token = CancelToken()
    agent = Agent(ScriptedModel([call("hang")]), tools=[hang])
    task = asyncio.ensure_future(agent.run("go", cancel=token))
    await started.wait()
    threading.Thread(target=token.cancel).start()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 2)


async def test_task_cancellation_finalizes_and_is_re_raised(recorder: RecordingObserver) -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    agent = Agent(ScriptedModel([call("hang")]), tools=[hang], observers=[recorder])
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert agent.current_run is not None
    assert isinstance(agent.current_run.stop_reason, Cancelled)
    assert recorder.names()[-1] == "on_run_end"


async def test_observer_that_raises_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(RecordingObserver):
        def on_tool_post(self, *args: Any) -> None:
            raise RuntimeError("observer bug")

    model = ScriptedModel([call("read_file", {"path": "src/main.rs"}), reply("ok")])
    run = await Agent(model, tools=[read_file], observers=[Broken()]).run("go")
    assert run.output == "ok"
    assert "observer bug" in caplog.text


async def test_observer_event_order(recorder: RecordingObserver) -> None:
    model = ScriptedModel([call("read_file", {"path": "src/main.rs"}), reply("ok")])
    await Agent(model, tools=[read_file], observers=[recorder]).run("go")
    assert recorder.names() == [
        "on_run_start",
        "on_turn_start",
        "on_response",
        "on_tool_call_received",
        "on_tool_pre",
        "on_tool_post",
        "on_turn_end",
        "on_turn_start",
        "on_response",
        "on_turn_end",
        "on_run_end",
    ]
    call_part = recorder.of("on_tool_pre")[0][1]
    post = recorder.of("on_tool_post")[0]
    assert post[1] is call_part and post[2].call_id == call_part.id and post[3] == 0


async def test_turn_records(recorder: RecordingObserver) -> None:
    from agentloop import Usage

    model = ScriptedModel(
        [call("read_file", {"path": "src/main.rs"}), reply("ok", usage=Usage(10, 3))],
        model="m-1",
    )
    run = await Agent(model, tools=[read_file]).run("go")
    assert [t.index for t in run.turns] == [0, 1]
    assert run.turns[0].model == "m-1" and run.turns[0].tool_results[0].content == "fn main() {}"
    assert run.usage.input_tokens == 10 and run.usage.output_tokens == 3
    assert run.started_at is not None and run.ended_at is not None


async def test_run_round_trips_through_to_dict() -> None:
    model = ScriptedModel(
        [
            call("read_file", {"path": "src/main.rs"}),
            ProviderUnavailable("x", status_code=503, phase="status", request_sent=True),
        ]
    )
    agent = Agent(model, tools=[read_file])
    with pytest.raises(ProviderUnavailable):
        await agent.run("go")
    run = agent.current_run
    assert run is not None
    import json

    data = json.loads(json.dumps(run.to_dict()))
    assert "started_at" not in data and "ended_at" not in data
    again = Run.from_dict(data)
    assert again == run
    assert isinstance(again.stop_reason, ProviderUnavailable)
    assert again.stop_reason.status_code == 503 and again.stop_reason.phase == "status"
    assert data["stop_reason"]["type"] == "ProviderUnavailable"


def test_construction_errors_name_the_field() -> None:
    with pytest.raises(ConfigurationError) as info:
        Agent(None)  # type: ignore[call-overload]
    assert info.value.field == "client"
    with pytest.raises(ConfigurationError) as info:
        Agent(ScriptedModel([]), tools=[read_file, read_file])
    assert info.value.field == "tools"
    with pytest.raises(ConfigurationError) as info:
        Agent(ScriptedModel([]), approver="yes")  # type: ignore[call-overload]
    assert info.value.field == "approver"
    Agent(ScriptedModel([]), config=RunConfig(headless=False))  # no approver: Ask pauses (SPEC 17)


async def test_model_returning_garbage_is_response_invalid() -> None:
    from agentloop import ModelResponse
    from agentloop.errors import ResponseInvalid

    class Garbage(ScriptedModel):
        async def complete(self, request: ModelRequest) -> Any:
            return "not a response"

    user_reply = FunctionModel(lambda r: ModelResponse(Message.user("not an assistant")))
    for client in (user_reply, Garbage([])):
        agent = Agent(client)
        with pytest.raises(ResponseInvalid, match="not an assistant reply"):
            await agent.run("go")
        assert agent.history == []


async def test_every_error_from_run_is_an_agentloop_error() -> None:
    def broken(request: ModelRequest) -> Any:
        raise ZeroDivisionError("client bug")

    with pytest.raises(AgentLoopError) as info:
        await Agent(FunctionModel(broken)).run("go")
    assert isinstance(info.value.__cause__, ZeroDivisionError)


async def test_scripted_model_runs_out_with_a_clear_error() -> None:
    from agentloop.testing import ScriptExhausted

    with pytest.raises(ScriptExhausted, match="has 1 step but received request #2"):
        await Agent(ScriptedModel([call("nope")])).run("go")


async def test_a_result_that_cannot_be_rendered_is_a_panic() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise ValueError("no text")

        __repr__ = __str__

    @tool
    def weird() -> Any:
        """Return something unrenderable."""
        return Unprintable()

    model = ScriptedModel([call("weird"), reply("ok")])
    run = await Agent(model, tools=[weird]).run("go")
    assert run.output == "ok"
    result = last_results(model)[0]
    assert result.is_error and result.content.startswith('Tool "weird" panicked: ')


async def test_one_agent_runs_one_conversation_at_a_time() -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait."""
        started.set()
        await release.wait()
        return "done"

    agent = Agent(ScriptedModel([call("wait"), reply("first"), reply("second")]), tools=[wait])
    first = asyncio.create_task(agent.run("one"))
    await started.wait()
    with pytest.raises(InvalidInput, match="already running"):
        await agent.run("two")
    release.set()
    assert (await first).output == "first"
    assert (await agent.run("two")).output == "second"


async def test_a_run_whose_caller_is_cancelled_is_finalized_and_the_cancel_goes_on() -> None:
    # the run has no task of its own: it is awaited in the caller's, whose cancel it records
    waiting = asyncio.Event()

    async def slow(request: object) -> object:
        waiting.set()
        await asyncio.Event().wait()
        return reply("never")

    agent = Agent(FunctionModel(slow))
    task = asyncio.create_task(agent.run("go"))
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert agent.current_run is not None
    assert isinstance(agent.current_run.stop_reason, Cancelled)
    assert agent.history == []


async def test_a_cancel_token_never_reaches_the_callers_task() -> None:
    # the token cancels the caller's task while the run waits; the run takes it back
    token = CancelToken()

    async def slow(request: object) -> object:
        token.cancel()
        await asyncio.Event().wait()
        return reply("never")

    agent = Agent(FunctionModel(slow))
    with pytest.raises(Cancelled):
        await agent.run("go", cancel=token)
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    await asyncio.sleep(0)  # no cancellation left pending for the caller
    agent2 = Agent(ScriptedModel([reply("x")]))
    assert (await agent2.run("again")).output == "x"
