"""A reply's usage when its client reported none: the token counter's estimate, never free.

Some OpenAI-compatible servers send no usage (in streams especially). When a budget line is
spent by tokens, the engine counts this estimate instead, so a token budget still trips;
``run.usage`` keeps what was reported, and a run's first estimate is logged: the substitution is
never silent.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentloop.messages import Usage

if TYPE_CHECKING:
    from agentloop.engine.state import RunState
    from agentloop.model import ModelRequest, ModelResponse
    from agentloop.tokens import TokenCounter

__all__ = ["estimated_usage"]

logger = logging.getLogger("agentloop")


def estimated_usage(
    counter: TokenCounter, state: RunState, request: ModelRequest, response: ModelResponse
) -> Usage:
    """What ``request`` and ``response`` cost by ``counter``; the run's first one is logged."""
    sent = sum(counter.count_message(m) for m in request.messages)
    if request.system:
        sent += counter.count_text(request.system)
    usage = Usage(sent, counter.count_message(response.message))
    if not state.usage_estimated:
        state.usage_estimated = True
        logger.warning(
            "the model client reported no token usage; the budget counts the token "
            "counter's estimate (%d in, %d out) for run %s",
            usage.input_tokens,
            usage.output_tokens,
            state.run.id,
        )
    return usage
