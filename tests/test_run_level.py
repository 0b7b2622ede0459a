"""``Session.run`` returns the run's own coroutine: it behaves as the coroutine it was.

``Session.run`` used to be a coroutine around ``RunLoop.drive``, one more object alive across
each run's waits (issue 39). It now makes the loop and returns ``drive`` itself, which checks
the arguments and begins the run at its first step. These tests hold it to what the coroutine
did: nothing is checked, begun or changed until the ``await``; every mistake raises there, as
before; a coroutine never awaited leaves the session as it was.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import warnings
from typing import Any, cast

import pytest

from agentloop import Agent, Budget, CancelToken
from agentloop.errors import Cancelled, InvalidInput
from agentloop.messages import Message
from agentloop.model import ModelRequest, ModelSettings
from agentloop.testing import FunctionModel, ScriptedModel

pytestmark = pytest.mark.usefixtures("no_real_sleep")


async def test_a_run_is_one_coroutine_begun_at_its_first_step() -> None:
    agent = Agent(ScriptedModel(["one", "two"]))
    session = agent.session()
    work = session.run("go")
    assert inspect.iscoroutine(work) and work.cr_code.co_name == "drive"  # no level around it
    assert session.runs == [] and session._active is None  # nothing begun before the await
    run = await work
    assert run.output == "one" and session.runs == [run]
    assert (await session.run("again")).output == "two"


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"input": 42}, "input"),
        ({"input": "go", "model_settings": cast(Any, {"temperature": 0})}, "ModelSettings"),
        ({"input": "go", "usage_limits": cast(Any, 3)}, "Budget"),
    ],
)
async def test_a_mistake_raises_at_the_await_not_at_the_call(
    bad: dict[str, Any], says: str
) -> None:
    session = Agent(ScriptedModel(["ok"])).session()
    work = session.run(**bad)  # the call itself raises nothing, as the coroutine did
    with pytest.raises(InvalidInput, match=says):
        await work
    assert session.runs == [] and session._active is None
    assert (await session.run("go")).output == "ok"  # the session is unharmed


async def test_a_second_run_of_a_running_session_raises_at_its_await() -> None:
    open_ = asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        await open_.wait()
        return "first"

    session = Agent(FunctionModel(answer)).session()
    first = asyncio.ensure_future(session.run("go"))
    await asyncio.sleep(0)
    assert session._active is not None
    second = session.run("again")  # made while the first runs: raises only when awaited
    with pytest.raises(InvalidInput, match="already running"):
        await second
    open_.set()
    assert (await first).output == "first" and len(session.runs) == 1


async def test_a_run_never_awaited_changes_nothing() -> None:
    session = Agent(ScriptedModel(["ok"])).session()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "never awaited", as before
        work = session.run("go", cancel=CancelToken())
        del work
        gc.collect()
    assert session.runs == [] and session._active is None and session.history == []
    run = await session.run("go")
    assert run.output == "ok" and session.history[-1] == Message.assistant("ok")


async def test_per_run_options_reach_the_run_as_before() -> None:
    model = ScriptedModel(["ok"])
    session = Agent(model).session()
    settings = ModelSettings(temperature=0.25)
    token = CancelToken()
    run = await session.run(
        "go", model_settings=settings, usage_limits=Budget(turns=3), cancel=token
    )
    assert run.output == "ok" and model.requests[-1].settings.temperature == 0.25
    token.cancel()
    with pytest.raises(Cancelled):
        await session.run("go", cancel=token)
