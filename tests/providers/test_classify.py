"""The pure classification of provider replies: status table, error bodies, Retry-After."""

from __future__ import annotations

import email.utils
import json

import pytest

from agentloop.errors import (
    AuthError,
    BadRequestError,
    ContextLengthExceeded,
    FailurePhase,
    InsufficientCredits,
    ProviderUnavailable,
    RateLimited,
)
from agentloop.providers._classify import (
    class_for_error_type,
    embedded_error,
    error_for_status,
    parse_error_body,
    parse_retry_after,
)


def test_parse_retry_after_pure() -> None:
    date = email.utils.formatdate(1_000_000, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=999_990) == 10.0
    assert parse_retry_after({"retry-after": date}, now=2_000_000) == 0.0
    assert parse_retry_after({"retry-after": "-3"}) is None
    assert parse_retry_after({"retry-after-ms": "nan", "retry-after": "2"}) == 2.0


def test_parse_error_body_shapes() -> None:
    assert parse_error_body('{"error": "plain"}').message == "plain"
    gemini = parse_error_body('[{"error": {"code": 400, "message": "m", "status": "INVALID"}}]')
    assert (gemini.message, gemini.type, gemini.code) == ("m", "INVALID", "400")
    assert parse_error_body("<html>").message is None
    assert parse_error_body("3").message is None


def test_error_for_status_anthropic_credit_400() -> None:
    body = json.dumps({"error": {"message": "Your credit balance is too low"}})
    err = error_for_status(400, {}, body, provider="anthropic")
    assert isinstance(err, InsufficientCredits)


def google(code: int, status: str, message: str, *details: object) -> str:
    return json.dumps({"error": {"code": code, "status": status, "message": message,
                                 "details": list(details)}})  # fmt: skip


RETRY_INFO = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"}
BILLING = "You exceeded your current quota, please check your plan and billing details"


@pytest.mark.parametrize(
    ("status", "body", "cls", "retry_after"),
    [
        (400, json.dumps({"type": "error", "error": {"type": "billing_error", "message": "b"}}),
         InsufficientCredits, None),
        (403, json.dumps({"error": {"type": "billing_error", "message": "b"}}),
         InsufficientCredits, None),
        (400, google(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
         AuthError, None),
        (429, google(429, "RESOURCE_EXHAUSTED", "quota", RETRY_INFO), RateLimited, 13.0),
        (429, google(429, "RESOURCE_EXHAUSTED", BILLING, RETRY_INFO), RateLimited, 13.0),
        (429, google(429, "RESOURCE_EXHAUSTED", BILLING), InsufficientCredits, None),
        (429, json.dumps({"error": {"message": "add a payment method at /account/billing",
                                    "type": "requests"}}), RateLimited, None),
    ],
)  # fmt: skip
def test_error_for_status_reads_what_the_body_says(
    status: int, body: str, cls: type, retry_after: float | None
) -> None:
    err = error_for_status(status, {}, body, provider="p")
    assert type(err) is cls and err.retry_after == retry_after


def test_a_retry_after_header_wins_over_a_retry_delay_in_the_body() -> None:
    body = google(429, "RESOURCE_EXHAUSTED", "quota", RETRY_INFO)
    err = error_for_status(429, {"retry-after": "2"}, body, provider="p")
    assert type(err) is RateLimited and err.retry_after == 2.0


@pytest.mark.parametrize(
    ("error", "cls"),
    [
        ({"code": 429, "message": "slow down"}, RateLimited),
        ({"code": 401, "message": "bad key"}, AuthError),
        ({"code": "oops", "message": "m"}, ProviderUnavailable),  # no numeric code: a 500
        ("plain text", ProviderUnavailable),
    ],
)
def test_an_error_object_in_a_2xx_body_is_classified_by_its_code(error: object, cls: type) -> None:
    body = json.dumps({"error": error})
    err = embedded_error(error, body, provider="openrouter", request_id="req-1")
    assert type(err) is cls
    assert (err.provider, err.request_id, err.phase) == ("openrouter", "req-1", FailurePhase.STATUS)


@pytest.mark.parametrize(
    ("kind", "message", "cls"),
    [
        ("overloaded_error", "busy", ProviderUnavailable),
        ("rate_limit_error", "slow", RateLimited),
        ("invalid_request_error", "bad field", BadRequestError),
        ("invalid_request_error", "prompt is too long: 200000 tokens", ContextLengthExceeded),
        ("billing_error", "pay", InsufficientCredits),
        ("something_new", "?", ProviderUnavailable),
    ],
)
def test_anthropic_error_types(kind: str, message: str, cls: type) -> None:
    assert class_for_error_type(kind, message) is cls
