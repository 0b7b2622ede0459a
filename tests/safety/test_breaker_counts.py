"""``ToolBreakers.record`` counts a closed success inline (issue 39): the same statistics.

The property: for any sequence of outcomes (the breaker opening, probing and closing on the
way), a tool's successes, failures, neutral calls and EWMA are exactly what ``count`` folds.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.safety.breaker import Outcome, ToolBreaker, ToolBreakers

_outcomes = st.lists(st.sampled_from(["success", "sick", "neutral"]), max_size=40)


@settings(max_examples=200, deadline=None)
@given(outcomes=_outcomes, advance=st.lists(st.booleans(), max_size=40))
def test_statistics_are_the_fold_of_every_outcome(
    outcomes: list[Outcome], advance: list[bool]
) -> None:
    now = [0.0]
    breakers = ToolBreakers(ToolBreaker(failure_threshold=3, recovery_seconds=1.0), lambda: now[0])
    ewma, counts = 1.0, {"success": 0, "sick": 0, "neutral": 0}
    for index, outcome in enumerate(outcomes):
        if index < len(advance) and advance[index]:
            now[0] += 2.0  # past the cooldown: the next admission may probe
        admission = breakers.admit("t")
        if admission is None:
            continue  # refused: nothing recorded
        breakers.record(admission, outcome)
        counts[outcome] += 1
        if outcome != "neutral":
            sample = 1.0 if outcome == "success" else 0.0
            ewma = 0.7 * ewma + (1.0 - 0.7) * sample
    health = breakers.health("t")
    assert (health.successes, health.failures) == (counts["success"], counts["sick"])
    assert health.total_calls == sum(counts.values())
    assert health.ewma_success == ewma  # the same float, bit for bit
