"""One agent, many conversations (SPEC 20): ``agent.session()``, the default session, the
stateless ``run(history=)``, restore from a store, concurrency rules, and what is shared.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import pytest

from agentloop import Agent, CancelToken, RunConfig, Session, ToolError, tool
from agentloop.errors import Cancelled, InvalidInput, TranscriptError
from agentloop.events import Event
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.observers import Observer
from agentloop.providers import OpenAIClient
from agentloop.safety import ToolBreaker
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import (
    FakeProviderServer,
    FakeReply,
    FunctionModel,
    ScriptedModel,
    call,
    reply,
)


def echo_model() -> FunctionModel:
    """Replies with the number of user messages it was sent (so history is visible)."""

    def answer(request: ModelRequest) -> Any:
        users = [m for m in request.messages if m.role == "user"]
        return reply(f"{len(users)}: {users[-1].text}")

    return FunctionModel(answer)


def user_texts(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if m.role == "user"]


# -- the shape ---------------------------------------------------------------------------------


async def test_a_session_is_its_own_conversation_and_the_default_stays_apart() -> None:
    agent = Agent(echo_model())
    alice, bob = agent.session(), agent.session()
    assert isinstance(alice, Session) and alice.id != bob.id
    assert (await alice.run("a1")).output == "1: a1"
    assert (await alice.run("a2")).output == "2: a2"
    assert (await bob.run("b1")).output == "1: b1"
    assert (await agent.run("d1")).output == "1: d1"
    assert [m.text for m in alice.history if m.role == "user"] == ["a1", "a2"]
    assert [r.input for r in alice.runs] == ["a1", "a2"]
    assert [r.input for r in agent.runs] == ["d1"]  # the default session only
    assert agent.session_id == agent.default_session.id


async def test_agent_run_twice_continues_one_conversation() -> None:
    agent = Agent(echo_model())
    await agent.run("one")
    assert (await agent.run("two")).output == "2: two"


async def test_the_same_id_gives_the_same_live_session() -> None:
    agent = Agent(echo_model())
    s = agent.session("user-1")
    assert agent.session("user-1") is s
    assert agent.session(s.id) is s


async def test_a_session_runs_sync_and_streams_like_the_agent() -> None:
    agent = Agent(echo_model())
    s = agent.session()
    async with s.stream("x") as events:
        kinds = [type(e).__name__ async for e in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    assert events.run.output == "1: x"
    assert s.runs[-1] is events.run


def test_session_run_sync() -> None:
    with Agent(echo_model()) as agent:
        s = agent.session()
        s.run_sync("a")
        assert s.run_sync("b").output == "2: b"
        assert agent.history == []


def test_history_seeds_a_new_session_and_is_checked() -> None:
    agent = Agent(echo_model())
    seed = [Message.user("earlier"), Message.assistant("noted")]
    s = agent.session(history=seed)
    assert s.history == seed
    with pytest.raises(TranscriptError):
        agent.session(history=[Message.tool_results([])] * 0 + ["not a message"])  # type: ignore[list-item]


def test_history_for_a_live_session_is_invalid_input() -> None:
    agent = Agent(echo_model())
    live = agent.session("s1")  # held: a session without a store lives while referenced
    with pytest.raises(InvalidInput, match="already exists"):
        agent.session("s1", history=[Message.user("x")])
    assert agent.session("s1") is live


async def test_every_run_and_event_carries_its_session_id() -> None:
    seen: list[Event] = []

    class Collect(Observer):
        def on_event(self, event: Event) -> None:
            seen.append(event)

    agent = Agent(echo_model(), observers=[Collect()])
    s = agent.session()
    run = await s.run("hi")
    assert run.session_id == s.id
    assert seen and {e.session_id for e in seen} == {s.id}
    seen.clear()
    default_run = await agent.run("hi")
    assert default_run.session_id == agent.session_id
    assert {e.session_id for e in seen} == {agent.session_id}
    assert run.to_dict()["session_id"] == s.id
    assert type(run).from_dict(run.to_dict()).session_id == s.id


# -- the stateless call ----------------------------------------------------------------------


async def test_run_with_history_is_stateless() -> None:
    agent = Agent(echo_model())
    await agent.run("default")
    seed = [Message.user("u0"), Message.assistant("a0")]
    run = await agent.run("u1", history=seed)
    assert run.output == "2: u1"
    assert [r.input for r in agent.runs] == ["default"]  # not in agent.runs
    assert [m.text for m in agent.history if m.role == "user"] == ["default"]
    assert run.conversation[:2] == seed and run.conversation[-1].text == "2: u1"
    again = await agent.run("u2", history=run.conversation)
    assert again.output == "3: u2"
    assert run.session_id not in (agent.session_id, again.session_id)


async def test_a_stateless_run_may_run_while_the_default_session_is_busy() -> None:
    gate = asyncio.Event()

    async def answer(request: ModelRequest) -> Any:
        if user_texts(request)[-1] == "slow":
            await gate.wait()
        return reply("done")

    agent = Agent(FunctionModel(answer))
    slow = asyncio.create_task(agent.run("slow"))
    await asyncio.sleep(0)
    with pytest.raises(InvalidInput, match=r"agent\.session\(\)"):
        await agent.run("second")
    quick = await agent.run("quick", history=[])
    assert quick.output == "done"
    gate.set()
    await slow
    assert [r.input for r in agent.runs] == ["slow"]


def test_stream_takes_history_too() -> None:
    async def main() -> list[str]:
        agent = Agent(echo_model())
        async with agent.stream("x", history=[Message.user("u0"), Message.assistant("a")]) as ev:
            async for _ in ev:
                pass
        assert agent.runs == []
        return [ev.run.output or ""]

    assert asyncio.run(main()) == ["2: x"]


# -- concurrency -------------------------------------------------------------------------------


async def test_distinct_sessions_run_concurrently_one_session_one_run_at_a_time() -> None:
    started = 0
    both = asyncio.Event()

    async def answer(request: ModelRequest) -> Any:
        nonlocal started
        started += 1
        if started == 2:
            both.set()
        await both.wait()  # only returns once two runs are in flight together
        return reply("ok")

    agent = Agent(FunctionModel(answer))
    a, b = agent.session(), agent.session()
    first = asyncio.create_task(a.run("1"))
    await asyncio.sleep(0)
    with pytest.raises(InvalidInput, match=r"agent\.session\(\)"):
        await a.run("again")
    runs = await asyncio.gather(first, b.run("2"))
    assert [r.output for r in runs] == ["ok", "ok"]


def test_run_sync_serves_one_thread_at_a_time() -> None:
    entered, release = threading.Event(), threading.Event()

    def answer(request: ModelRequest) -> Any:
        entered.set()
        release.wait(5)
        return reply("ok")

    agent = Agent(FunctionModel(answer))
    worker = threading.Thread(target=agent.run_sync, args=("one",))
    worker.start()
    assert entered.wait(5)
    try:
        with pytest.raises(InvalidInput, match="another thread"):
            agent.session().run_sync("two")
    finally:
        release.set()
        worker.join()
        agent.close()


async def test_agent_cancel_acts_on_the_default_session_a_token_on_its_run() -> None:
    agent = Agent(echo_model())
    s = agent.session()
    agent.cancel()  # idle: cancels exactly the default session's next run
    assert (await s.run("not cancelled")).output == "1: not cancelled"
    with pytest.raises(Cancelled):
        await agent.run("cancelled")
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        await s.run("with a token", cancel=token)
    assert (await agent.run("next")).output == "1: next"


# -- what is shared ----------------------------------------------------------------------------


async def test_a_sick_tool_opened_by_one_session_is_open_for_the_others() -> None:
    calls = 0

    @tool
    def svc() -> str:
        """A service that is down."""
        nonlocal calls
        calls += 1
        raise RuntimeError("down")

    script = (
        [call("svc", {}) for _ in range(3)] + [reply("gave up")] + [call("svc", {}), reply("x")]
    )
    agent = Agent(
        ScriptedModel(script),
        tools=[svc],
        config=RunConfig(tool_breaker=ToolBreaker(failure_threshold=3)),
    )
    await agent.session().run("break it")
    assert calls == 3 and agent.breakers.health("svc").state == "open"
    other = agent.session()
    run = await other.run("try it")
    assert calls == 3  # never ran: the breaker is the agent's
    assert (
        run.turns[0].tool_results[0].content == "tool temporarily unavailable: circuit breaker open"
    )
    assert other.safety.breakers is agent.breakers is agent.safety.breakers


async def test_loop_windows_are_the_sessions_own() -> None:
    @tool
    def look(q: str) -> str:
        """Look something up."""
        raise ToolError("nothing found")

    # two identical failing calls per session: the third in one session would warn; split
    # over two sessions, neither window sees a repetition beyond two
    agent = Agent(
        ScriptedModel([call("look", {"q": "x"}), call("look", {"q": "x"}), reply("no")] * 2),
        tools=[look],
    )
    a, b = agent.session(), agent.session()
    await a.run("1")
    await b.run("2")
    assert a.safety.loops is not b.safety.loops
    assert a.safety.loops.snapshot() == b.safety.loops.snapshot()


# -- restore from a store ----------------------------------------------------------------------


async def test_a_stored_session_is_restored_by_id_without_touching_shared_state(
    tmp_path: Any,
) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        first = Agent(echo_model(), store=store)
        s = first.session("user-7")
        await s.run("a")
        await s.run("b")

    with SQLiteStore(path) as store:
        agent = Agent(echo_model(), store=store)
        agent.breakers.restore(agent.breakers.snapshot())  # a live agent with its own state
        before = agent.breakers.snapshot()
        again = agent.session("user-7")
        assert [r.input for r in again.runs] == ["a", "b"]
        assert (await again.run("c")).output == "3: c"
        assert agent.breakers.snapshot() == before
        with pytest.raises(InvalidInput, match="already exists"):
            Agent(echo_model(), store=store).session("user-7", history=[Message.user("x")])
        resumed = Agent.resume("user-7", store=store, client=echo_model())
        assert [r.input for r in resumed.runs] == ["a", "b", "c"]


async def test_restoring_a_session_stored_with_an_open_breaker_leaves_the_live_breakers(
    tmp_path: Any,
) -> None:
    @tool
    def svc() -> str:
        """A service that is down."""
        raise RuntimeError("down")

    config = RunConfig(tool_breaker=ToolBreaker(failure_threshold=1))
    with SQLiteStore(tmp_path / "s.db") as store:
        script = ScriptedModel([call("svc", {}), reply("gave up")])
        first = Agent(script, tools=[svc], store=store, config=config)
        await first.session("user-7").run("break it")
        assert first.breakers.health("svc").state == "open"  # stored with the session

        agent = Agent(echo_model(), tools=[svc], store=store, config=config)
        live = agent.breakers
        assert live.health("svc").state == "closed"
        restored = agent.session("user-7")
        assert [r.input for r in restored.runs] == ["break it"]
        assert agent.breakers is live and live.health("svc").state == "closed"
        assert restored.safety.breakers is live


async def test_a_session_may_name_its_own_store(tmp_path: Any) -> None:
    with SQLiteStore(tmp_path / "own.db") as store:
        agent = Agent(echo_model())
        s = agent.session("mine", store=store)
        await s.run("kept")
        assert store.has_session("mine")
        assert Agent(echo_model()).session("mine", store=store).runs[0].input == "kept"


# -- isolation at scale ------------------------------------------------------------------------

AGENT_FOR_EVERYONE: Agent[str | None] | None = None  # the module-level habit


async def test_a_thousand_concurrent_sessions_never_see_each_others_words() -> None:
    global AGENT_FOR_EVERYONE
    async with FakeProviderServer(default=FakeReply("noted")) as server:
        client = OpenAIClient("fake-model", base_url=server.base_url, api_key="k")
        AGENT_FOR_EVERYONE = Agent(client, system="You keep secrets.")
        agent = AGENT_FOR_EVERYONE
        words = [f"secret{i:04d}x" for i in range(1000)]

        async def conversation(word: str) -> None:
            s = agent.session()
            await s.run(f"my word is {word}")
            await s.run("what was my word?")

        async with agent:
            await asyncio.gather(*(conversation(w) for w in words))
        assert len(server.received) == 2000
        for request in server.received:
            text = str(request.body["messages"])
            present = [w for w in words if w in text]
            assert len(present) == 1, present
        assert agent.runs == []  # the default session was never used
    AGENT_FOR_EVERYONE = None


def test_an_unreferenced_session_without_a_store_is_collected() -> None:
    agent = Agent(echo_model())
    sid = agent.session().id
    gc.collect()
    assert agent.session(sid).runs == []


async def test_a_session_continues_only_a_run_a_crash_cut_off(tmp_path: Any) -> None:
    agent = Agent(echo_model())
    with pytest.raises(InvalidInput, match="store"):
        await agent.session().continue_run()
    with SQLiteStore(tmp_path / "c.db") as store:
        s = Agent(echo_model(), store=store).session("done")
        await s.run("finished")
        with pytest.raises(InvalidInput, match="no run to continue"):
            await s.continue_run()


async def test_a_restored_session_gets_its_own_loop_windows_back(tmp_path: Any) -> None:
    @tool
    def look(q: str) -> str:
        """Look something up."""
        raise ToolError("nothing found")

    steps = [call("look", {"q": "x"}), call("look", {"q": "x"}), reply("no")]
    with SQLiteStore(tmp_path / "w.db") as store:
        first = Agent(ScriptedModel(steps), tools=[look], store=store).session("w")
        await first.run("1")
        windows = first.safety.loops.snapshot()
        assert windows != Agent(echo_model()).safety.loops.snapshot()  # it saw two failures
    with SQLiteStore(tmp_path / "w.db") as store:
        again = Agent(echo_model(), tools=[look], store=store).session("w")
        assert again.safety.loops.snapshot() == windows
