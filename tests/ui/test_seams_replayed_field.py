"""``replayed`` in the UI apps' ``agentloop`` data events: said only when it is True.

A durable run's recovery marks the calls it answered from its record (``replayed=True``, for a
dashboard that counts each call once). An end user's page has no use for ``replayed: false``
on every exposed event, so both apps leave the field out unless it is True. The real clients'
view of a live run is pinned in ``test_seams_guardrails`` (no ``replayed`` key at all); this
pins the other half, pure logic: a marked event keeps it.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")

from agentloop import events as ev
from agentloop.ui._ag_ui_events import AGUIEvents
from agentloop.ui._vercel_chunks import Chunks


def checked(*, replayed: bool) -> ev.GuardrailChecked:
    return ev.GuardrailChecked("r1", 0, "no_card_numbers", False, 0.0, replayed=replayed)


@pytest.mark.parametrize("replayed", [False, True])
def test_vercel_data_event_says_replayed_only_when_true(replayed: bool) -> None:
    [chunk] = Chunks("m1").feed(checked(replayed=replayed))
    assert chunk["type"] == "data-agentloop" and chunk["data"]["kind"] == "GuardrailChecked"
    assert ("replayed" in chunk["data"]) is replayed
    if replayed:
        assert chunk["data"]["replayed"] is True


@pytest.mark.parametrize("replayed", [False, True])
def test_ag_ui_custom_event_says_replayed_only_when_true(replayed: bool) -> None:
    frames = AGUIEvents("t1", "r1").feed(checked(replayed=replayed))
    [event] = [json.loads(line[len("data: ") :]) for line in frames.splitlines() if line]
    assert event["name"] == "agentloop:GuardrailChecked"
    assert ("replayed" in event["value"]) is replayed
