"""Shared fixtures."""

from __future__ import annotations

import pytest

from agentloop.testing import RecordingObserver


@pytest.fixture
def recorder() -> RecordingObserver:
    return RecordingObserver()
