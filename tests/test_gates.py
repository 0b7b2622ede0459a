"""Gates fail closed and tool bugs are visible (SPEC 12)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agentloop import Agent, Ask, Hook, RunConfig, ToolContext, tool
from agentloop.messages import ToolCallPart
from agentloop.model import ModelRequest
from agentloop.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def result_text(request: ModelRequest) -> str:
    return request.messages[-1].tool_results_parts[0].content


class AskFirst(Hook):
    async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> Ask:
        return Ask("allow rm?")


def dangerous_agent(ran: list[str], **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    @tool
    def rm(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    model = ScriptedModel([call("rm", {"path": "/"}), reply("ok")])
    return Agent(model, tools=[rm], **kwargs), model


@pytest.mark.parametrize("answer", ["n", "no", "yes", 1, None, [], object()])
async def test_an_approver_answer_other_than_true_denies(answer: object) -> None:
    ran: list[str] = []

    async def approver(call: ToolCallPart, message: str) -> Any:
        return answer

    agent, model = dangerous_agent(ran, hooks=[AskFirst()], approver=approver)
    await agent.run("clean up")
    assert ran == []
    assert result_text(model.requests[1]) == "User denied permission"


async def test_an_approver_given_without_headless_false_is_asked() -> None:
    ran: list[str] = []
    asked: list[str] = []

    def approver(call: ToolCallPart, message: str) -> bool:  # a sync approver works too
        asked.append(message)
        return True

    agent, _ = dangerous_agent(ran, hooks=[AskFirst()], approver=approver)
    assert agent.config.headless
    await agent.run("clean up")
    assert asked == ["allow rm?"] and ran == ["/"]


async def test_an_approver_that_raises_denies_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    async def approver(call: ToolCallPart, message: str) -> bool:
        raise EOFError("no terminal")

    agent, model = dangerous_agent(
        ran, hooks=[AskFirst()], approver=approver, config=RunConfig(headless=False)
    )
    with caplog.at_level(logging.ERROR, logger="agentloop"):
        run = await agent.run("clean up")
    assert run.stop_reason is None and ran == []
    assert result_text(model.requests[1]) == "approval failed: EOFError: no terminal"
    assert "approver raised for tool 'rm'" in caplog.text and "EOFError" in caplog.text


@pytest.mark.parametrize("answer", [False, True, "allow", 0, {"ok": True}])
async def test_a_pre_tool_answer_that_is_not_a_decision_blocks(
    answer: object, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    class Sloppy(Hook):
        async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> Any:
            return answer

    agent, model = dangerous_agent(ran, hooks=[Sloppy()])
    with caplog.at_level(logging.ERROR, logger="agentloop"):
        await agent.run("clean up")
    assert ran == []
    assert result_text(model.requests[1]) == (
        f"blocked: hook Sloppy returned {answer!r}, not a decision"
    )
    assert any(r.levelno == logging.ERROR and "Sloppy" in r.getMessage() for r in caplog.records)


async def test_headless_ask_without_approver_blocks_with_its_message() -> None:
    ran: list[str] = []
    agent, model = dangerous_agent(ran, hooks=[AskFirst()])
    await agent.run("clean up")
    assert ran == [] and result_text(model.requests[1]) == "allow rm?"


async def test_a_panicking_tool_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    def buggy(n: int) -> str:
        """Has a bug."""
        return "x" + n  # type: ignore[operator, no-any-return]

    model = ScriptedModel([call("buggy", {"n": 1}, id="c-7"), reply("ok")])
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        run = await Agent(model, tools=[buggy]).run("go")
    assert run.output == "ok"
    assert result_text(model.requests[1]).startswith('Tool "buggy" panicked: TypeError:')
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "buggy" in record.getMessage() and "c-7" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is TypeError


@pytest.mark.looptime
async def test_a_timeout_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    @tool(timeout=0.05)
    async def stuck() -> str:
        """Never returns."""
        await asyncio.sleep(10)
        return "never"

    model = ScriptedModel([call("stuck", id="c-9"), reply("ok")])
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        await Agent(model, tools=[stuck]).run("go")
    assert result_text(model.requests[1]) == "Tool 'stuck' timed out after 0s"
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "stuck" in record.getMessage() and "c-9" in record.getMessage()
    assert record.exc_info is not None


async def test_a_tool_error_is_not_logged_as_a_bug(caplog: pytest.LogCaptureFixture) -> None:
    from agentloop import ToolError

    @tool
    def picky(path: str) -> str:
        """Refuses."""
        raise ToolError("file not found")

    with caplog.at_level(logging.WARNING, logger="agentloop"):
        await Agent(ScriptedModel([call("picky", {"path": "x"}), reply("ok")]), tools=[picky]).run(
            "go"
        )
    assert caplog.records == []
