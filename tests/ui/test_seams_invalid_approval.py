"""A UI page is never asked to approve a call whose arguments do not validate (SPEC 17).

The Vercel AI SDK has no ``Edit``: an approval request for ``delete_file(path=7)`` could only be
approved into ``Invalid arguments for tool ...`` or denied. The engine now validates before a
call becomes pending, so the page sees the soft error as the call's ``output-error`` and the
model's corrected call as the approval request. Real parts: the ``ai`` package's chat in node,
uvicorn on 127.0.0.1, the fake OpenAI-compatible server behind the real adapter; for AG-UI,
the interrupt lists only the fixed call (the recorded stream passes ``ag-ui-validate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")

from agentloop.testing import FakeReply, FakeToolCall

from .test_vercel import app_over, assistant_parts, chat, delete_file, ran


async def test_the_page_sees_an_invalid_call_fail_and_approves_the_fixed_one() -> None:
    ran.clear()
    script = [
        FakeReply(tool_calls=[FakeToolCall("delete_file", {"path": ["a.txt"]})]),
        FakeReply(tool_calls=[FakeToolCall("delete_file", {"path": "a.txt"})]),
        FakeReply("Deleted a.txt."),
    ]
    async with app_over(script, [delete_file]) as (url, fake, sessions):
        result = await chat(url, [{"send": "delete a.txt"}, {"approve": True}])
        run = sessions["chat-1"].current_run
    bad, good, text = assistant_parts(result)
    assert bad["state"] == "output-error" and "approval" not in bad  # nobody was asked
    assert bad["errorText"].startswith("Invalid arguments for tool 'delete_file': path")
    assert bad["errorText"] == fake.requests[1]["messages"][-1]["content"]  # the model read it
    assert good["state"] == "output-available" and good["input"] == {"path": "a.txt"}
    assert good["approval"]["approved"] is True and good["output"] == "deleted a.txt"
    assert text["text"] == "Deleted a.txt." and ran == ["a.txt"]
    assert run is not None and [d["decisions"] for d in run.decisions] == [
        {good["toolCallId"]: {"kind": "approve"}}
    ]
    assert len(fake.requests) == 3 and result["statuses"] == ["ready", "ready"]


async def test_ag_ui_interrupts_only_for_the_call_that_validates(tmp_path: Path) -> None:
    from agentloop.testing import ScriptedModel, call
    from agentloop.ui.ag_ui import AGUIApp

    from .test_ag_ui import approval_agent, post, run_input, serving, validate

    done: list[dict[str, Any]] = []
    steps = [
        call("delete", {"path": ["a.txt"]}, id="c_bad"),
        call("delete", {"path": "a.txt"}, id="c_good"),
        "done",
    ]
    model = ScriptedModel(steps)
    async with serving(AGUIApp(approval_agent(done, model))) as served:
        _, first = await post(served.url, run_input("delete a.txt"))
    [result] = [e for e in first if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "c_bad" and result["content"].startswith(
        "Invalid arguments for tool 'delete': path"
    )
    finished = first[-1]
    assert finished["outcome"]["type"] == "interrupt"
    assert [i["id"] for i in finished["outcome"]["interrupts"]] == ["c_good"]
    assert done == []
    validate(served.tap.bodies[0], tmp_path, "invalid-approval")
