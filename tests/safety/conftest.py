"""Every safety test runs under the real-sleep guard (``no_real_sleep`` in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_real_sleep(no_real_sleep: list[str]) -> list[str]:
    return no_real_sleep
