"""Micro-benchmark: the per-call safety pipeline must cost O(1) whatever the loop window.

Runs 10,000 tool calls through LoopDetector.check/record, ToolBreakers.admit/record,
BudgetGate.pre_request/record_tool_calls, limit_output and redact_secrets, with a mix of
repeated calls (which warn, flush on progress and get consumed at the stop) and changing ones.
Prints microseconds per call for window 50 and window 500; the two must be close.

    .venv/bin/python bench/safety_pipeline.py
"""

from __future__ import annotations

import time

from agentloop.safety import (
    Budget,
    BudgetGate,
    LoopDetection,
    LoopDetector,
    ToolBreaker,
    ToolBreakers,
    limit_output,
    redact_secrets,
)

CALLS = 10_000
OUTPUT = "line of ordinary tool output with /usr/lib/path and numbers 12345\n" * 30
SECRET_OUTPUT = OUTPUT + "token=abc123 sk-proj-abcdefghijklmnopqrstuvwxyz012345\n"


def workload(i: int) -> tuple[str, dict[str, object], str, bool]:
    """40% identical reads, 20% a poll making progress, 20% alternating failures, 20% new."""
    kind = i % 10
    if kind < 4:
        return "read", {"path": "/etc/hosts"}, OUTPUT, False
    if kind < 6:
        return "poll", {"job": 7}, f"{OUTPUT}progress {i}", False
    if kind < 8:
        name = "fetch_a" if kind == 6 else "fetch_b"
        return name, {"url": "https://x.test"}, f"{name} failed", True
    return "search", {"q": f"query {i}"}, SECRET_OUTPUT, False


def run(window: int) -> float:
    """Microseconds per call through the whole pipeline."""
    detector = LoopDetector(LoopDetection(warn_threshold=3, stop_threshold=10, window=window))
    breakers = ToolBreakers(ToolBreaker())
    gate = BudgetGate(Budget(tool_calls=10**9, turns=10**9, wall_clock=10**9))
    calls = [workload(i) for i in range(CALLS)]
    start = time.perf_counter()
    for tool, arguments, output, is_error in calls:
        if detector.check() is not None:
            detector.consume_stop()
        gate.pre_request()
        admission = breakers.admit(tool)
        text = redact_secrets(limit_output(output, 4_000))
        detector.record(tool, arguments, text, is_error=is_error)
        if admission is not None:
            breakers.record(admission, "neutral" if is_error else "success")
        gate.record_tool_calls(1)
    return (time.perf_counter() - start) / CALLS * 1e6


def main() -> None:
    """Print the per-call cost for both windows (best of three)."""
    for window in (50, 500):
        best = min(run(window) for _ in range(3))
        print(f"window {window:>3}: {best:6.1f} us per call ({CALLS} calls)")


if __name__ == "__main__":
    main()
