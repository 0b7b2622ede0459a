"""``RateLimit`` and ``RateGovernor`` at construction, and the window arithmetic (pure)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from agentloop.errors import ConfigurationError
from agentloop.fleet import RateGovernor, RateLimit
from agentloop.fleet._limits import Sent, wait_for


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rpm": 0},
        {"rpm": -1},
        {"rpm": 1.5},
        {"rpm": True},
        {"tpm": "100"},
        {"concurrent": 0},
        {"rpm": 1, "window": 0},
        {"rpm": 1, "window": -3},
        {"rpm": 1, "window": float("nan")},
        {"rpm": 1, "window": True},
        {},
        {"rpm": 1, "rps": 2},
    ],
)
def test_a_bad_limit_is_a_configuration_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        RateLimit("openai", **kwargs)


def test_a_limit_names_its_key_and_matches_its_models() -> None:
    shared, one = RateLimit("openai", rpm=10), RateLimit("openai", "gpt-5-mini", tpm=1000)
    assert (shared.key, one.key) == ("openai:*", "openai:gpt-5-mini")
    assert shared.matches("openai", "any") and not shared.matches("anthropic", "any")
    assert one.matches("openai", "gpt-5-mini") and not one.matches("openai", "gpt-5")
    assert one.window == 60.0
    assert repr(RateLimit("openai", rpm=5, window=2)) == "RateLimit('openai', rpm=5, window=2)"


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((RateLimit("openai", rpm=1),), {"backend": "redis://x"}),
        ((RateLimit("openai", rpm=1),), {"backend": "sqlite:///"}),
        ((RateLimit("openai", rpm=1),), {"backend": 3}),
        ((RateLimit("openai", rpm=1),), {"store": "x"}),
        (([],), {}),
        ((["openai"],), {}),
        (("openai",), {}),
        (([RateLimit("openai", rpm=1), RateLimit("openai", tpm=5)],), {}),
    ],
)
def test_a_bad_governor_is_a_configuration_error(args: Any, kwargs: Any) -> None:
    with pytest.raises(ConfigurationError):
        RateGovernor(*args, **kwargs)


def test_a_bad_backend_message_never_shows_a_password() -> None:
    with pytest.raises(ConfigurationError) as caught:
        RateGovernor(RateLimit("openai", rpm=1), backend="mysql://u:hunter2@h/db")
    assert "hunter2" not in str(caught.value)


def test_rpm_waits_until_the_oldest_request_leaves_the_window() -> None:
    limit = RateLimit("openai", rpm=2, window=60)
    sent = [Sent(100.0, 0), Sent(110.0, 0)]
    assert wait_for(limit, 111.0, sent[:1], 0) is None
    seconds, line = wait_for(limit, 111.0, sent, 0) or (0, "")
    assert line == "rpm" and seconds == pytest.approx(49.25)  # + the guard
    assert wait_for(limit, 160.25 + 1e-3, sent, 0) is None  # the first one left


def test_tpm_counts_the_estimate_and_frees_the_oldest_tokens_first() -> None:
    limit = RateLimit("openai", tpm=100, window=10)
    sent = [Sent(0.0, 60), Sent(5.0, 30)]
    assert wait_for(limit, 6.0, sent, 10) is None  # 100 fits exactly
    seconds, line = wait_for(limit, 6.0, sent, 11) or (0, "")
    assert line == "tpm" and seconds == pytest.approx(4.25)  # the 60 leave at 10 + 0.25


def test_concurrent_counts_leases_that_have_not_expired() -> None:
    limit = RateLimit("openai", concurrent=1)
    assert wait_for(limit, 5.0, [Sent(0.0, 0, 4.0)], 0) is None  # an expired lease
    seconds, line = wait_for(limit, 5.0, [Sent(0.0, 0, 9.0)], 0) or (0, "")
    assert line == "concurrent" and seconds == pytest.approx(4.0)


def test_a_closed_key_waits_for_its_retry_after_whatever_the_counts() -> None:
    limit = RateLimit("openai", rpm=100)
    assert wait_for(limit, 10.0, [], 0, closed_until=17.0) == (7.0, "retry_after")
    assert wait_for(limit, 17.0, [], 0, closed_until=17.0) is None


def test_the_longest_line_decides() -> None:
    limit = RateLimit("openai", rpm=1, tpm=10, window=60)
    result = wait_for(limit, 30.0, [Sent(0.0, 5)], 6, closed_until=40.0)
    assert result is not None and result[1] in ("rpm", "tpm")
    assert result[0] == pytest.approx(30.25)  # not the retry_after's 10


def test_an_agent_without_a_governor_pays_nothing() -> None:
    code = (
        "import sys\n"
        "from agentloop import Agent\n"
        "from agentloop.testing import ScriptedModel, reply\n"
        "model = ScriptedModel([reply('ok')])\n"
        "agent = Agent(model)\n"
        "assert agent.client is model and agent.governor is None\n"
        "agent.run_sync('hi')\n"
        "assert 'agentloop.fleet' not in sys.modules, 'the fleet was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
