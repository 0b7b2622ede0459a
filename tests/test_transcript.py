"""Transcript rules: every violation named by index, role and call id; interrupted calls closed."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop.errors import TranscriptError
from agentloop.messages import Message, TextPart, ToolCallPart, ToolChangePart, ToolResultPart
from agentloop.transcript import (
    _NO_IDS,
    INTERRUPTED_TEXT,
    TranscriptChecker,
    close_interrupted,
    validate_transcript,
)

# --------------------------------------------------------------------------- strategies
# test_context.py loads this module by path to share the strategy (tests are not a package).

_TEXT = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=30)
_TOOL_NAMES = st.sampled_from(["read_file", "list_dir", "grep"])


@st.composite
def transcripts(draw: st.DrawFn, *, reuse_ids: bool = False, max_steps: int = 14) -> list[Message]:
    """Valid transcripts: a user message, then replies, user turns and tool-call pairs.

    With ``reuse_ids`` every turn numbers its calls ``call_0, call_1...`` again (ids unique only
    per turn, as some local servers do).
    """
    messages = [Message.user(draw(_TEXT))]
    next_id = 0
    for _ in range(draw(st.integers(0, max_steps))):
        kind = draw(st.sampled_from(["reply", "user", "calls", "calls"]))
        if kind == "reply":
            messages.append(Message.assistant(draw(_TEXT)))
        elif kind == "user":
            messages.append(Message.user(draw(_TEXT)))
        else:
            calls = []
            for j in range(draw(st.integers(1, 3))):
                call_id = f"call_{j}" if reuse_ids else f"call_{next_id}"
                next_id += 1
                calls.append(ToolCallPart(call_id, draw(_TOOL_NAMES), {"arg": draw(_TEXT)}))
            preamble = draw(st.one_of(st.just(""), _TEXT))
            messages.append(Message.assistant(preamble, calls))
            results = [
                ToolResultPart(c.id, c.name, draw(_TEXT), is_error=draw(st.booleans()))
                for c in calls
            ]
            messages.append(Message.tool_results(results))
    return messages


def with_calls(messages: list[Message]) -> bool:
    return any(m.tool_calls for m in messages)


# --------------------------------------------------------------------------- helpers


def user(text: str = "hi") -> Message:
    return Message.user(text)


def calls(*ids: str, text: str = "") -> Message:
    return Message.assistant(text, [ToolCallPart(i, "read_file", {"path": i}) for i in ids])


def results(*ids: str) -> Message:
    return Message.tool_results([ToolResultPart(i, "read_file", f"content of {i}") for i in ids])


def reply(text: str = "done") -> Message:
    return Message.assistant(text)


def rejected(messages: list[Message], **kwargs: bool) -> TranscriptError:
    with pytest.raises(TranscriptError) as info:
        validate_transcript(messages, **kwargs)
    return info.value


# --------------------------------------------------------------------------- accepted shapes


def test_a_plain_exchange_is_valid() -> None:
    validate_transcript([user(), reply(), user("again"), reply()])


def test_a_tool_round_trip_is_valid() -> None:
    validate_transcript([user(), calls("a", "b", text="let me look"), results("a", "b"), reply()])


def test_results_may_come_in_any_order() -> None:
    validate_transcript([user(), calls("a", "b"), results("b", "a")])


def test_a_user_message_may_follow_tool_results() -> None:
    validate_transcript([user(), calls("a"), results("a"), user("next question")])


def test_reused_ids_across_turns_pass_when_unique_ids_is_off() -> None:
    messages = [user(), calls("call_0"), results("call_0"), calls("call_0"), results("call_0")]
    validate_transcript(messages, unique_ids=False)
    error = rejected(messages)
    assert error.index == 3 and "'call_0'" in str(error) and "duplicate" in str(error)


# --------------------------------------------------------------------------- each rule, named


def test_an_empty_transcript_is_not_sendable() -> None:
    assert rejected([]).index is None
    assert rejected([], allow_pending=True).index is None


def test_a_system_message_is_valid_outside_a_tool_call_and_its_results() -> None:
    """SPEC 12 (amended): a ``system`` message elsewhere is valid (SPEC 28 sends it)."""
    validate_transcript([user(), Message.system("be nice"), reply()])
    validate_transcript([Message.system("be nice"), user(), reply(), Message.system("later")])
    validate_transcript([user(), calls("a"), results("a"), Message.system("x"), reply()])
    change = Message("system", (TextPart("x"), ToolChangePart(removed=("grep",))))
    validate_transcript([user(), change, reply()])


def test_a_system_message_between_a_tool_call_and_its_results_is_rejected() -> None:
    error = rejected([user(), calls("a"), Message.system("be nice"), results("a")])
    assert error.index == 2
    assert str(error) == (
        "message 2 (system): a system message cannot come between tool call 'a' (read_file) of "
        "message 1 and its results"
    )
    assert rejected([user(), calls("a"), Message.system("x")], allow_pending=True).index == 2


def test_a_tool_change_outside_a_system_message_is_rejected() -> None:
    for role in ("user", "assistant"):
        bad = Message(role, (TextPart("x"), ToolChangePart(removed=("grep",))))
        messages = [user(), bad] if role == "assistant" else [user(), reply(), bad]
        error = rejected(messages)
        assert error.index == len(messages) - 1
        assert f"a {role} message cannot carry a ToolChangePart" in str(error)
    alone = Message("user", (ToolChangePart(),))
    assert "cannot carry a ToolChangePart" in str(rejected([alone]))


def test_a_system_message_carries_text_and_tool_changes_only() -> None:
    bad = Message("system", (ToolCallPart("a", "read_file", {}),))
    error = rejected([user(), bad])
    assert error.index == 1 and "a system message cannot carry a tool call ('a')" in str(error)
    assert "empty" in str(rejected([user(), Message.system("")]))


def test_the_first_message_after_leading_system_messages_is_a_user_message() -> None:
    error = rejected([Message.system("x"), Message.system("y"), reply()])
    assert error.index == 2 and "the first message must be a user message" in str(error)


def test_a_message_without_parts_is_empty() -> None:
    error = rejected([user(), Message("assistant", ())])
    assert error.index == 1 and "empty" in str(error)


def test_a_message_with_only_empty_text_is_empty() -> None:
    error = rejected([user(), Message("assistant", (TextPart(""), TextPart("")))])
    assert error.index == 1 and "empty" in str(error)


def test_an_empty_first_message_is_reported_as_empty() -> None:
    error = rejected([Message.user("")])
    assert error.index == 0 and "empty" in str(error)


def test_the_first_message_must_be_a_user_message() -> None:
    error = rejected([reply(), user()])
    assert error.index == 0 and "first message must be a user message" in str(error)


def test_a_first_message_tool_call_is_rejected_as_the_first_message() -> None:
    error = rejected([calls("a"), results("a")])
    assert error.index == 0


def test_a_call_without_its_result_names_the_assistant_message_and_the_id() -> None:
    error = rejected([user(), calls("a"), user("never mind")])
    assert error.index == 1
    assert "message 1 (assistant)" in str(error)
    assert "'a'" in str(error) and "read_file" in str(error)


def test_a_call_missing_from_the_tool_message_names_the_assistant() -> None:
    error = rejected([user(), calls("a", "b"), results("a")])
    assert error.index == 1 and "'b'" in str(error)


def test_trailing_unanswered_calls_are_not_sendable_but_allowed_while_building() -> None:
    messages = [user(), calls("a")]
    assert rejected(messages).index == 1
    validate_transcript(messages, allow_pending=True)


def test_a_result_without_its_call_names_the_tool_message() -> None:
    error = rejected([user(), calls("a"), results("a", "zzz")])
    assert error.index == 2
    assert "message 2 (tool)" in str(error) and "'zzz'" in str(error)
    assert "no matching call" in str(error)


def test_two_results_for_one_call_are_a_duplicate() -> None:
    error = rejected([user(), calls("a"), results("a", "a")])
    assert error.index == 2 and "duplicate result" in str(error)


def test_duplicate_ids_within_one_message_are_rejected_even_when_reuse_is_allowed() -> None:
    error = rejected([user(), calls("a", "a"), results("a", "a")], unique_ids=False)
    assert error.index == 1 and "duplicate tool call id 'a'" in str(error)


def test_a_tool_message_after_a_user_message_is_rejected() -> None:
    error = rejected([user(), results("a")])
    assert error.index == 1 and "must follow" in str(error)


def test_a_tool_message_after_a_plain_reply_is_rejected() -> None:
    error = rejected([user(), reply(), results("a")])
    assert error.index == 2


def test_a_second_tool_message_for_the_same_calls_is_rejected() -> None:
    error = rejected([user(), calls("a"), results("a"), results("a")])
    assert error.index == 3 and "must follow" in str(error)


def test_a_result_inside_a_user_message_is_rejected() -> None:
    bad = Message("user", (ToolResultPart("a", "read_file", "x"),))
    error = rejected([user(), calls("a"), bad])
    assert error.index == 2 and "cannot carry a tool result" in str(error)


def test_a_call_inside_a_user_message_is_rejected() -> None:
    bad = Message("user", (ToolCallPart("a", "read_file", {}),))
    assert rejected([bad]).index == 0


def test_text_inside_a_tool_message_is_rejected() -> None:
    bad = Message("tool", (ToolResultPart("a", "read_file", "x"), TextPart("note")))
    error = rejected([user(), calls("a"), bad])
    assert error.index == 2 and "cannot carry text" in str(error)


def test_transcript_error_is_an_agentloop_error_with_an_index() -> None:
    error = rejected([user(), Message("assistant", ())])
    assert isinstance(error, TranscriptError)
    assert error.index == 1


# --------------------------------------------------------------------------- incremental checker


def test_the_checker_reports_the_index_in_the_whole_transcript() -> None:
    checker = TranscriptChecker()
    checker.extend([user(), calls("a"), results("a")])
    with pytest.raises(TranscriptError) as info:
        checker.extend([reply(), Message("assistant", ())])
    assert info.value.index == 4
    assert len(checker) == 4  # the valid prefix stays absorbed


def test_the_checker_allows_pending_calls_until_asked_if_sendable() -> None:
    checker = TranscriptChecker()
    checker.extend([user(), calls("a", "b")])
    assert [c.id for c in checker.pending_calls] == ["a", "b"]
    with pytest.raises(TranscriptError):
        checker.check_sendable()
    checker.append(results("a", "b"))
    assert checker.pending_calls == ()
    checker.check_sendable()


def test_the_checker_remembers_ids_across_turns() -> None:
    checker = TranscriptChecker()
    checker.extend([user(), calls("a"), results("a")])
    with pytest.raises(TranscriptError, match="duplicate tool call id 'a'"):
        checker.append(calls("a"))


def test_reset_forgets_the_old_history_after_compaction() -> None:
    checker = TranscriptChecker()
    checker.extend([user(), calls("a"), results("a")])
    checker.reset([user("summary"), reply()])
    assert len(checker) == 2
    checker.extend([user(), calls("a"), results("a")])  # "a" was compacted away
    checker.check_sendable()


def test_an_empty_checker_is_not_sendable() -> None:
    with pytest.raises(TranscriptError, match="empty"):
        TranscriptChecker().check_sendable()


def test_a_turn_costs_its_new_messages_not_the_history() -> None:
    history = [user()]
    for i in range(20_000):
        history += [calls(f"c{i}"), results(f"c{i}")]
    checker = TranscriptChecker()
    checker.extend(history)
    started = time.process_time()  # CPU time: a loaded machine's waits do not count
    for i in range(1_000):
        checker.extend([calls(f"n{i}"), results(f"n{i}")])
    per_turn = (time.process_time() - started) / 1_000
    assert per_turn < 0.001  # 40k messages of history; a re-walk would take far longer


def test_validation_is_linear() -> None:
    history = [user()]
    for i in range(50_000):
        history += [calls(f"c{i}"), results(f"c{i}")]
    started = time.process_time()  # CPU time: under 2-3 other jobs wall time went past 2 s
    validate_transcript(history)
    assert time.process_time() - started < 2.0


# --------------------------------------------------------------------------- close_interrupted


def test_the_interrupted_text_is_exact() -> None:
    assert INTERRUPTED_TEXT == "The tool call was interrupted before a result was produced."


def test_unanswered_calls_at_the_end_get_synthetic_results() -> None:
    messages = [user(), calls("a", "b")]
    closed = close_interrupted(messages)
    assert closed[:2] == messages
    assert closed[2] == Message.tool_results(
        [
            ToolResultPart("a", "read_file", INTERRUPTED_TEXT, is_error=True),
            ToolResultPart("b", "read_file", INTERRUPTED_TEXT, is_error=True),
        ]
    )
    validate_transcript(closed)


def test_a_partial_tool_message_is_completed_in_the_calls_order() -> None:
    done = ToolResultPart("b", "read_file", "content of b")
    closed = close_interrupted([user(), calls("a", "b", "c"), Message.tool_results([done])])
    parts = closed[2].tool_results_parts
    assert [p.call_id for p in parts] == ["a", "b", "c"]
    assert parts[1] is done
    assert parts[0].content == INTERRUPTED_TEXT and parts[0].is_error
    assert parts[2].content == INTERRUPTED_TEXT and parts[2].is_error
    validate_transcript(closed)


def test_results_are_inserted_before_a_message_that_followed_the_calls() -> None:
    closed = close_interrupted([user(), calls("a"), user("hello?")])
    assert [m.role for m in closed] == ["user", "assistant", "tool", "user"]
    validate_transcript(closed)


def test_a_complete_transcript_comes_back_unchanged() -> None:
    messages = [user(), calls("a"), results("a"), reply()]
    closed = close_interrupted(messages)
    assert closed == messages and closed is not messages


def test_a_transcript_without_calls_comes_back_unchanged() -> None:
    assert close_interrupted([user()]) == [user()]
    assert close_interrupted([]) == []


def test_results_answering_no_call_are_dropped_when_closing() -> None:
    stray = Message.tool_results([ToolResultPart("zzz", "read_file", "stray")])
    closed = close_interrupted([user(), calls("a"), stray])
    assert [p.call_id for p in closed[2].tool_results_parts] == ["a"]
    validate_transcript(closed)


def test_a_repeated_id_is_closed_per_occurrence() -> None:
    first = ToolResultPart("x", "read_file", "first")
    closed = close_interrupted([user(), calls("x", "x"), Message.tool_results([first])])
    parts = closed[2].tool_results_parts
    assert parts[0] is first
    assert parts[1].call_id == "x" and parts[1].content == INTERRUPTED_TEXT


# --------------------------------------------------------------------------- properties

_FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FAST
@given(transcripts())
def test_every_generated_transcript_is_valid(messages: list[Message]) -> None:
    validate_transcript(messages)


@_FAST
@given(transcripts(reuse_ids=True))
def test_per_turn_ids_are_valid_when_reuse_is_allowed(messages: list[Message]) -> None:
    validate_transcript(messages, unique_ids=False)


def _drop_a_result(messages: list[Message], data: st.DataObject) -> list[Message]:
    tool_indexes = [i for i, m in enumerate(messages) if m.role == "tool"]
    i = data.draw(st.sampled_from(tool_indexes))
    parts = list(messages[i].parts)
    del parts[data.draw(st.integers(0, len(parts) - 1))]
    out = list(messages)
    if parts:
        out[i] = Message("tool", tuple(parts))
    else:
        del out[i]
    return out


def _duplicate_an_id(messages: list[Message], data: st.DataObject) -> list[Message]:
    call_ids = [c.id for m in messages for c in m.tool_calls]
    target = data.draw(st.sampled_from(call_ids))
    others = [c for c in call_ids if c != target]
    source = data.draw(st.sampled_from(others)) if others else target
    out = []
    for m in messages:
        renamed = [
            ToolCallPart(source, p.name, p.arguments)
            if isinstance(p, ToolCallPart) and p.id == target
            else ToolResultPart(source, p.name, p.content, p.is_error)
            if isinstance(p, ToolResultPart) and p.call_id == target
            else p
            for p in m.parts
        ]
        out.append(Message(m.role, tuple(renamed)))
    if source == target:  # a single call: duplicate it inside its own message
        i = next(i for i, m in enumerate(out) if m.tool_calls)
        out[i] = Message("assistant", (*out[i].parts, out[i].tool_calls[0]))
    return out


def _empty_a_message(messages: list[Message], data: st.DataObject) -> list[Message]:
    i = data.draw(st.integers(0, len(messages) - 1))
    blank = data.draw(st.sampled_from([(), (TextPart(""),)]))
    out = list(messages)
    out[i] = Message(messages[i].role, blank)
    return out


def _drop_a_call(messages: list[Message], data: st.DataObject) -> list[Message]:
    indexes = [i for i, m in enumerate(messages) if m.tool_calls]
    i = data.draw(st.sampled_from(indexes))
    parts = list(messages[i].parts)
    call_positions = [k for k, p in enumerate(parts) if isinstance(p, ToolCallPart)]
    del parts[data.draw(st.sampled_from(call_positions))]
    out = list(messages)
    out[i] = Message("assistant", tuple(parts) or (TextPart("text left"),))
    return out


_CORRUPTIONS: dict[str, Callable[[list[Message], st.DataObject], list[Message]]] = {
    "drop a result": _drop_a_result,
    "duplicate an id": _duplicate_an_id,
    "empty a message": _empty_a_message,
    "drop a call": _drop_a_call,
}


@_FAST
@given(transcripts().filter(with_calls), st.sampled_from(sorted(_CORRUPTIONS)), st.data())
def test_every_single_corruption_is_rejected(
    messages: list[Message], corruption: str, data: st.DataObject
) -> None:
    corrupted = _CORRUPTIONS[corruption](messages, data)
    with pytest.raises(TranscriptError) as info:
        validate_transcript(corrupted)
    assert info.value.index is not None
    assert 0 <= info.value.index < len(corrupted)


@_FAST
@given(transcripts(), st.data())
def test_an_emptied_message_is_named_by_its_index(
    messages: list[Message], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(messages) - 1))
    corrupted = list(messages)
    corrupted[i] = Message(messages[i].role, ())
    with pytest.raises(TranscriptError) as info:
        validate_transcript(corrupted)
    assert info.value.index == i


@_FAST
@given(transcripts().filter(with_calls), st.data())
def test_a_transcript_cut_mid_tool_is_valid_once_closed(
    messages: list[Message], data: st.DataObject
) -> None:
    ends = [i for i, m in enumerate(messages) if m.tool_calls]
    end = data.draw(st.sampled_from(ends))
    keep_some = data.draw(st.booleans())
    cut = messages[: end + 1]
    if keep_some and len(messages[end + 1].parts) > 1:
        cut.append(Message("tool", messages[end + 1].parts[:1]))
    validate_transcript(close_interrupted(cut))


# --------------------------------------------------------------------------- seeded history


def test_agent_history_follows_spec_12_at_construction() -> None:
    from agentloop import Agent
    from agentloop.testing import ScriptedModel

    model = ScriptedModel([])
    Agent(model, history=[user(), Message.system("be nice"), reply()])
    between = [user(), calls("a"), Message.system("be nice"), results("a")]
    with pytest.raises(TranscriptError, match=r"message 2 \(system\): a system message cannot"):
        Agent(model, history=between)
    stray = Message("user", (TextPart("x"), ToolChangePart(removed=("grep",))))
    with pytest.raises(TranscriptError, match=r"message 1 \(user\): .* ToolChangePart") as info:
        Agent(model, history=[user(), stray])
    assert info.value.index == 1
    with pytest.raises(TranscriptError, match="has no result"):
        Agent(model, history=[user(), calls("a")])
    with pytest.raises(TranscriptError, match=r"has no matching call|must follow"):
        Agent(model, history=[user(), reply(), results("a")])


# --------------------------------------------------------------------------- the one-part path
# ``append`` takes the common turn's messages (one call, one result) in one step: any sequence,
# valid or not, must leave the checker as the general rules would, and fail the same way.


class _GeneralOnly(TranscriptChecker):
    """The checker without its one-part path."""

    __slots__ = ()

    def _one_part(self, index: int, role: str, part: object) -> bool:
        return False


_IDS = st.sampled_from(["a", "b", "c"])
_PARTS = st.one_of(
    st.builds(TextPart, st.sampled_from(["", "hi"])),
    st.builds(ToolCallPart, _IDS, st.just("t"), st.just({})),
    st.builds(ToolResultPart, _IDS, st.just("t"), st.just("r")),
)
_MESSAGES = st.builds(
    Message,
    st.sampled_from(["system", "user", "assistant", "tool"]),
    st.lists(_PARTS, min_size=1, max_size=3).map(tuple),
)
_TURN_MESSAGES = st.one_of(  # mostly the common turn's messages, with any id of the three
    st.builds(lambda i: Message("assistant", (ToolCallPart(i, "t", {}),)), _IDS),
    st.builds(lambda i: Message.tool_results([ToolResultPart(i, "t", "r")]), _IDS),
    st.just(Message.user("go")),
    _MESSAGES,
)


def _outcome(checker: TranscriptChecker, message: Message) -> tuple[object, ...]:
    try:
        checker.append(message)
        error: tuple[object, ...] = ()
    except TranscriptError as exc:
        error = (str(exc), exc.index)
    ids = None if checker._ids is _NO_IDS else set(checker._ids)
    kept = (checker._count, checker._pending, checker._pending_index, checker._started, ids)
    return (error, kept)


@settings(max_examples=400, deadline=None)
@given(st.lists(_TURN_MESSAGES, max_size=12), st.booleans())
def test_the_one_part_path_concludes_what_the_general_rules_do(
    messages: list[Message], unique_ids: bool
) -> None:
    fast, general = TranscriptChecker(unique_ids=unique_ids), _GeneralOnly(unique_ids=unique_ids)
    for message in [Message.user("go"), *messages]:
        assert _outcome(fast, message) == _outcome(general, message)
