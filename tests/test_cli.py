"""The command line: the demo runs end to end; bad fault names are rejected."""

import argparse

import pytest

from agentloop.cli import _fault_list, main


def test_demo_runs_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "src/main.rs prints hello." in out
    assert "tool 'read_fille' is not available. Did you mean 'read_file'?" in out
    assert "contains '..'" in out
    assert "LoopDetected" in out
    assert "backup model answered." in out
    assert "run records" in out


def test_fault_names() -> None:
    assert _fault_list("rate-limit, reset") == ["rate_limit", "reset"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown fault"):
        _fault_list("explode")
