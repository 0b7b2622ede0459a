"""A typed agent's turn (``Agent(output_type=...)``): a valid answer ends the run.

``RunLoop._answer`` (``agentloop.engine.loop``) hands a typed agent's reply here. The answer
comes as a ``final_result`` call or in the reply's text (``"native"``/``"text"`` mode); past
the output guardrails it is the run's output. An invalid or rejected answer is soft feedback
the model reads (``output_retries`` more tries, then ``OutputValidationFailed``); the turn's
other calls run as in an untyped turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from agentloop.engine.output import (
    ACCEPTED_TEXT,
    CALL_FINAL_RESULT_TEXT,
    FINAL_RESULT,
    NOT_EXECUTED_TEXT,
    TRUNCATED_TEXT,
    InvalidOutput,
    cut_calls,
)
from agentloop.engine.state import RunState
from agentloop.errors import OutputValidationFailed
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ModelResponse
from agentloop.run import TRUNCATION_REASONS, Turn

__all__ = ["typed_turn"]


class RunLoop(Protocol):
    """What a typed turn uses of its run's ``agentloop.engine.loop.RunLoop``."""

    agent: Any

    @property
    def state(self) -> RunState:
        """The run's state (the loop itself)."""

    async def _dispatch(
        self,
        turn: Turn,
        calls: Sequence[ToolCallPart],
        *,
        answered: Mapping[str, str] = ...,
        finals: Mapping[str, str] = ...,
    ) -> None: ...

    async def _guard_output(self, turn: Turn, response: ModelResponse, value: Any) -> str | None:
        """The output guardrails' verdict on ``value`` (None: accepted)."""


async def typed_turn(loop: RunLoop, turn: Turn, response: ModelResponse) -> bool:
    """A typed turn: a valid answer ends the run (True); an invalid one is soft feedback."""
    calls = response.tool_calls
    offered = FINAL_RESULT in loop.state.offer.names
    finals = [c for c in calls if c.name == FINAL_RESULT and offered]
    if finals:
        return await _final_call(loop, turn, response, finals)
    if calls:
        await loop._dispatch(turn, calls, answered=cut_calls(response))
        return False
    return await _text_answer(loop, turn, response, offered)


async def _final_call(
    loop: RunLoop, turn: Turn, response: ModelResponse, finals: Sequence[ToolCallPart]
) -> bool:
    """An answer by ``final_result``: valid and past the output guardrails, it is the output."""
    state, output = loop.state, loop.agent.output
    assert output is not None
    try:
        if response.stop_reason in TRUNCATION_REASONS:
            raise InvalidOutput(TRUNCATED_TEXT)
        value = output.from_arguments(finals[0].arguments)
    except InvalidOutput as invalid:
        _invalid_output(loop, invalid.text)
        return await _answer_again(loop, turn, response, finals, invalid.text)
    rejected = await loop._guard_output(turn, response, value)
    if rejected is not None:
        return await _answer_again(loop, turn, response, finals, rejected)
    accepted = finals[0]
    turn.tool_results = [
        ToolResultPart(c.id, c.name, ACCEPTED_TEXT if c is accepted else NOT_EXECUTED_TEXT)
        for c in response.tool_calls
    ]
    state.append(Message.tool_results(turn.tool_results))
    state.run.output = value
    return True


async def _answer_again(
    loop: RunLoop, turn: Turn, response: ModelResponse, finals: Sequence[ToolCallPart], text: str
) -> bool:
    """The ``final_result`` calls get ``text`` (soft); the turn's other calls run."""
    answers = {c.id: text for c in finals}
    answered = {c: t for c, t in cut_calls(response).items() if c not in answers}
    await loop._dispatch(turn, response.tool_calls, answered=answered, finals=answers)
    return False


async def _text_answer(loop: RunLoop, turn: Turn, response: ModelResponse, offered: bool) -> bool:
    """A typed answer in the reply's text (``"native"``/``"text"`` mode, or a missed tool)."""
    state, output = loop.state, loop.agent.output
    assert output is not None
    try:
        if offered:
            raise InvalidOutput(CALL_FINAL_RESULT_TEXT)
        if response.stop_reason in TRUNCATION_REASONS:
            raise InvalidOutput(TRUNCATED_TEXT)
        value = output.from_text(response.text)
    except InvalidOutput as invalid:
        _invalid_output(loop, invalid.text)
        state.append(Message.user(invalid.text))
        return False
    rejected = await loop._guard_output(turn, response, value)
    if rejected is not None:
        state.append(Message.user(rejected))
        return False
    state.run.output = value
    return True


def _invalid_output(loop: RunLoop, text: str) -> None:
    """Count an invalid answer; past ``output_retries`` more tries the run ends."""
    state = loop.state
    state.invalid_outputs += 1
    if state.invalid_outputs > loop.agent.config.output_retries:
        raise OutputValidationFailed(state.invalid_outputs, text)
