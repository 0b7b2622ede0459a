"""Secret redaction: API keys, bearer tokens, secret assignments, high-entropy tokens."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop.safety.redact import REDACTED, redact_secrets, shannon_entropy

RANDOM_32 = "9XFC0AOhBVODxDd9GVYJtsIZf2TP6XOu"  # 4.60 bits per character


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "sk-abcdefghij0123456789",
        "sk-ant-api03-abcdefghijklmnop_qrstuv-wxyz",
        "AIzaSyA1234567890abcdefghijklmnopqrstu",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "xoxb-123456789012-abcdefghijklmnop",
        "AKIAIOSFODNN7EXAMPLE",
    ],
)
def test_prefixed_api_keys_are_redacted(secret: str) -> None:
    assert redact_secrets(f"key {secret} here") == f"key {REDACTED} here"


def test_bearer_tokens_keep_the_scheme() -> None:
    text = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc123"
    assert redact_secrets(text) == f"Authorization: Bearer {REDACTED}"
    assert redact_secrets("basic dXNlcjpwYXNzd29yZA==") == f"basic {REDACTED}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2", f"password={REDACTED}"),
        ("OPENAI_API_KEY=abc123", f"OPENAI_API_KEY={REDACTED}"),
        ('{"api_key": "abc123", "n": 1}', f'{{"api_key": "{REDACTED}", "n": 1}}'),
        ("https://x.test/?token=abc&page=2", f"https://x.test/?token={REDACTED}&page=2"),
        ("client_secret: s3cr3t", f"client_secret: {REDACTED}"),
        ("X-Api-Key: abc", f"X-Api-Key: {REDACTED}"),
    ],
)
def test_secret_assignments_keep_the_key(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "could not connect to postgresql://app:hunter2@db.internal:5432/prod",
            f"could not connect to postgresql://app:{REDACTED}@db.internal:5432/prod",
        ),
        ("redis://:s3cret@cache:6379/0", f"redis://:{REDACTED}@cache:6379/0"),
        ("https://example.com:443/a@b", "https://example.com:443/a@b"),  # a port, no password
        ("see https://user@host/x", "see https://user@host/x"),
    ],
)
def test_a_urls_password_is_redacted_and_its_user_and_host_kept(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


def test_high_entropy_tokens_are_redacted_at_32_characters_not_31() -> None:
    assert shannon_entropy(RANDOM_32) >= 4.5
    assert redact_secrets(f"id {RANDOM_32}.") == f"id {REDACTED}."
    assert redact_secrets(f"id {RANDOM_32[:31]}.") == f"id {RANDOM_32[:31]}."


def test_long_tokens_below_the_entropy_line_are_kept() -> None:
    low = "aaaaaaaaaabbbbbbbbbbccccccccccdd"  # 32 characters, ~1.7 bits
    assert redact_secrets(low) == low


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox jumps over the lazy dog, again and again.",
        "/usr/local/lib/python3.11/site-packages/agentloop/safety/redact.py",
        "C:/Windows/System32/drivers/etc/hosts_file_backup",
        "/Users/Alice/Projects/app2/src/components/Button.tsx",
        "commit 0513393bd7ae706ae489ed0707a3873f9f030ad4 (sha1)",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "id 550e8400-e29b-41d4-a716-446655440000",
        "test_the_soft_line_never_exceeds_the_hard_one",
        "max_tokens: 100, input_tokens=5, tokens=7",
        "Bearer tokens are described in RFC 6750.",
        "basic knowledge of the tool",
        "skip the sk- prefix: sk-short",
        "a task-aaaabbbbccccdddd1111 inside a word",
        "sk-learn-compatible-estimators-and-pipelines",
        "İstanbul has no password here",
        "",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact_secrets(text) == text


def test_text_whose_lowercase_is_longer_is_still_redacted() -> None:
    assert redact_secrets("İİ Password=abc") == f"İİ Password={REDACTED}"


def test_redaction_is_idempotent() -> None:
    once = redact_secrets(f"password=x token={RANDOM_32} Bearer abc.def.ghi1")
    assert redact_secrets(once) == once


def test_entropy() -> None:
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == 2.0


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=200))
def test_redaction_never_grows_text_without_a_marker(text: str) -> None:
    out = redact_secrets(text)
    assert REDACTED in out or out == text


def test_provider_key_shapes_and_explicit_secrets() -> None:
    text = redact_secrets(
        "a sk-abc123456 b Bearer tok.en c AIzaSyA1234567890abcdef ?key=zzz&x=1", ["zz"]
    )
    assert "sk-abc" not in text and "tok.en" not in text and "AIzaSy" not in text
    assert "zzz" not in text and "x=1" in text
