"""A run's state as the engine starts it (``started_state``) is what ``RunState(...)`` builds.

``started_state`` sets each slot itself (no keyword matching per run): these tests hold it to
``RunState(...)`` field by field, so a field added to ``RunState`` and forgotten there fails
here, and show that two runs' states share no mutable part.
"""

from __future__ import annotations

import dataclasses

from agentloop import Agent
from agentloop.cancel import CancelToken
from agentloop.engine.state import NO_CALL_IDS, Measured, RunState, started_state
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ModelSettings
from agentloop.run import started_run
from agentloop.testing import FunctionModel, reply

_HISTORY = [
    Message.user("hi"),
    Message("assistant", (ToolCallPart("c1", "lookup", {}),)),
    Message("tool", (ToolResultPart("c1", "lookup", "found"),)),
    Message.assistant("done"),
]


def _fields(known: Measured | None) -> dict[str, object]:
    agent = Agent(FunctionModel(lambda request: reply("done")))
    transcript = [*_HISTORY, Message.user("again")]
    return {
        "run": started_run("r1", "again", 1.0, "s1"),
        "tokens": (CancelToken(),),
        "transcript": transcript,
        "base": len(_HISTORY),
        "offer": agent._offer(agent.client),
        "client": agent.client,
        "deps": {"user": 42},
        "system": "be brief",
        "settings": ModelSettings(temperature=0.5),
        "registry": None,
        "measured": known,
    }


def _same(made: RunState, started: RunState) -> None:
    for field in dataclasses.fields(RunState):
        assert getattr(started, field.name) == getattr(made, field.name), field.name


def test_every_field_is_what_the_dataclass_builds() -> None:
    values = _fields(None)
    made = RunState(**values)  # type: ignore[arg-type]
    started = started_state(**values)  # type: ignore[arg-type]
    _same(made, started)
    assert started.call_ids == {"c1"}
    assert started.audit == [values["transcript"][-1]]  # type: ignore[index]
    assert started.boundary == started.base == 4


def test_a_known_history_counts_its_call_ids_once() -> None:
    known = Measured(_HISTORY[:2], (0, (), 0, False), 7, None, None, {"c0", "c1"})
    values = _fields(known)
    _same(RunState(**values), started_state(**values))  # type: ignore[arg-type]
    assert started_state(**values).call_ids == {"c0", "c1"}  # type: ignore[arg-type]


def test_two_states_share_no_mutable_part() -> None:
    first, second = started_state(**_fields(None)), started_state(**_fields(None))  # type: ignore[arg-type]
    assert isinstance(first.call_ids, set)  # its transcript has a call: its own set
    first.call_ids.add("x")
    first.audit.append(Message.user("more"))
    assert second.call_ids == {"c1"}
    assert len(second.audit) == 1
    assert first.audit is not first.transcript


def test_a_transcript_without_calls_shares_the_empty_ids_until_the_first_call() -> None:
    values = _fields(None)
    values["transcript"] = [Message.user("hi")]
    values["base"] = 0
    assert started_state(**values).call_ids is NO_CALL_IDS  # type: ignore[arg-type]
    known = Measured(_HISTORY[:1], (1, (), 0, True), 7, None, None, NO_CALL_IDS)
    values = {**_fields(known), "transcript": [*_HISTORY[:1], Message.user("again")], "base": 1}
    assert started_state(**values).call_ids is NO_CALL_IDS  # type: ignore[arg-type]
