"""The pure SSE decoder: line endings, fields, limits, fixtures and arbitrary chunk splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.errors import FailurePhase, ResponseInvalid
from agentloop.providers._sse import SSEDecoder, SSEEvent

FIXTURES = Path("/work/shared/fixtures/openai-python/chat-completions-sse")
FIXTURE_FILES = sorted(FIXTURES.glob("*.sse"))


def decode(*chunks: bytes, max_line: int = 1024 * 1024) -> list[SSEEvent]:
    decoder = SSEDecoder(max_line=max_line)
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events


def test_basic_event_with_type_id_and_retry() -> None:
    events = decode(b"event: delta\nid: 7\nretry: 1500\ndata: hello\n\n")
    assert events == [SSEEvent(event="delta", data="hello", id="7", retry=1500)]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(eol: bytes) -> None:
    raw = eol.join([b"data: a", b"data: b", b"", b"data: c", b"", b""])
    assert [e.data for e in decode(raw)] == ["a\nb", "c"]


def test_crlf_split_across_chunks_is_one_line_ending() -> None:
    events = decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")
    assert [e.data for e in events] == ["a\nb"]


def test_comments_unknown_fields_and_colonless_lines() -> None:
    events = decode(b": keep-alive\n\nfoo: bar\ndata\ndata:x\ndata:  y\n\n")
    assert [e.data for e in events] == ["\nx\n y"]


def test_event_without_data_is_dispatched_and_type_resets() -> None:
    events = decode(b"event: ping\n\ndata: 1\n\n")
    assert events == [SSEEvent(event="ping"), SSEEvent(data="1")]


def test_id_persists_and_invalid_retry_is_ignored() -> None:
    events = decode(b"id: a\ndata: 1\n\nretry: x1\ndata: 2\n\nid: b\0c\ndata: 3\n\n")
    assert [(e.id, e.retry) for e in events] == [("a", None), ("a", None), ("a", None)]


def test_unterminated_last_event_is_flushed_on_close() -> None:
    assert [e.data for e in decode(b"data: [DONE]")] == ["[DONE]"]


def test_invalid_utf8_is_replaced() -> None:
    assert decode(b"data: \xff\n\n")[0].data == "\ufffd"


def test_line_limit_on_a_complete_line() -> None:
    with pytest.raises(ResponseInvalid) as info:
        decode(b"data: " + b"x" * 100 + b"\n\n", max_line=50)
    assert info.value.phase is FailurePhase.BODY and info.value.request_sent is True


def test_line_limit_while_buffering_an_incomplete_line() -> None:
    decoder = SSEDecoder(max_line=50)
    decoder.feed(b"data: " + b"x" * 40)
    with pytest.raises(ResponseInvalid):
        decoder.feed(b"x" * 40)


def test_empty_chunk_is_harmless() -> None:
    assert decode(b"data: a\r", b"", b"\n\n") == [SSEEvent(data="a")]


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_files_decode_to_json_chunks_then_done(path: Path) -> None:
    raw = path.read_bytes()
    events = decode(raw)
    assert events[-1].data == "[DONE]"
    for event in events[:-1]:
        assert json.loads(event.data)["object"] == "chat.completion.chunk"
    assert len(events) == raw.count(b"data:")


@settings(max_examples=60, deadline=None)
@given(
    path=st.sampled_from(FIXTURE_FILES),
    cuts=st.lists(st.integers(min_value=0, max_value=50_000), max_size=40),
    crlf=st.booleans(),
)
def test_any_chunk_split_gives_the_same_events(path: Path, cuts: list[int], crlf: bool) -> None:
    raw = path.read_bytes()
    if crlf:
        raw = raw.replace(b"\n", b"\r\n")
    points = sorted({c % (len(raw) + 1) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert decode(*chunks) == decode(raw)


@settings(max_examples=100, deadline=None)
@given(
    lines=st.lists(
        st.text(
            alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"),
            max_size=20,
        )
    ),
    eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    data=st.data(),
)
def test_arbitrary_streams_split_anywhere(
    lines: list[str], eol: bytes, data: st.DataObject
) -> None:
    raw = eol.join(line.encode() for line in lines) + eol
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)))
    assert decode(raw[:cut], raw[cut:]) == decode(raw)
    assert decode(*[raw[i : i + 1] for i in range(len(raw))]) == decode(raw)
