"""TruncatingCompactor(head_share=...): a stable head so the prompt cache survives compaction."""

from __future__ import annotations

import pytest

from agentloop.context import HeuristicTokenCounter, TruncatingCompactor
from agentloop.errors import ConfigurationError
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.transcript import validate_transcript

COUNTER = HeuristicTokenCounter()


def _turns(start: int, count: int) -> list[Message]:
    out: list[Message] = []
    for i in range(start, start + count):
        out.append(Message.assistant("", [ToolCallPart(f"c{i}", "read", {"page": i})]))
        out.append(Message.tool_results([ToolResultPart(f"c{i}", "read", "x" * 400)]))
    return out


def test_the_head_is_kept_byte_for_byte_pass_after_pass() -> None:
    compactor = TruncatingCompactor(preserve_recent=2, head_share=0.5)
    transcript = [Message.user("task"), *_turns(0, 20)]
    first = compactor.truncate(transcript, 1000, COUNTER)
    assert len(first) < len(transcript)
    grown = [*first, *_turns(100, 10)]
    second = compactor.truncate(grown, 1000, COUNTER)
    common = 0
    while common < min(len(first), len(second)) and first[common] == second[common]:
        common += 1
    assert common >= len(first) - 2  # everything but the old tail is the same prefix
    assert second[-2:] == grown[-2:]
    validate_transcript(second)


def test_the_head_never_ends_between_a_call_and_its_results() -> None:
    transcript = [Message.user("task"), *_turns(0, 10)]
    for target in range(100, 2000, 37):
        out = TruncatingCompactor(preserve_recent=2, head_share=0.6).truncate(
            transcript, target, COUNTER
        )
        validate_transcript(out)
        assert out[0] == transcript[0] and out[-2:] == transcript[-2:]


def test_head_share_zero_is_the_classic_cut() -> None:
    transcript = [Message.user("task"), *_turns(0, 10)]
    classic = TruncatingCompactor().truncate(transcript)
    assert TruncatingCompactor(head_share=0.0).truncate(transcript, 10**6, COUNTER) == classic


@pytest.mark.parametrize("share", [-0.1, 1.0, 2.0])
def test_head_share_is_validated(share: float) -> None:
    with pytest.raises(ConfigurationError) as info:
        TruncatingCompactor(head_share=share)
    assert info.value.field == "head_share"
