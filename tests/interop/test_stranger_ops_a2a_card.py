"""An A2A app built without a description serves a card that A2A 1.0 accepts.

Found by building an ops service from the docs alone: ``A2AApp(agent, name="ops")`` (the docs'
own approval example has no description either) served a card whose ``description`` and
skill ``description`` were empty, which A2A 1.0 marks REQUIRED: the official server logged
"AgentCard is not spec-compliant" on every card request, and a stricter SDK may refuse it. An
empty description now reads ``Ask the agent '<name>'.``, the words ``MCPApp`` gives its tool.

Real parts: uvicorn on 127.0.0.1 and the official a2a-sdk card resolver.
"""

from __future__ import annotations

import logging

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.utils.proto_utils import warn_on_missing_required_fields

from agentloop import Agent
from agentloop.a2a import A2AApp
from agentloop.testing import ScriptedModel, reply

from ._serve import serving


async def test_a_card_without_a_description_is_spec_compliant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = A2AApp(Agent(ScriptedModel([reply("hi")])), name="ops")
    async with serving(app) as url:
        with caplog.at_level(logging.WARNING):
            async with httpx.AsyncClient() as http:
                card = await A2ACardResolver(http, url).get_agent_card()
    assert card.description == "Ask the agent 'ops'."
    assert card.skills[0].description == "Ask the agent 'ops'."
    assert warn_on_missing_required_fields(card, "test")
    assert "not spec-compliant" not in caplog.text
    described = A2AApp(Agent(ScriptedModel([])), name="ops", description="Runs ops.")
    assert described.description == "Runs ops."
