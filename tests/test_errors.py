"""The error tree: shapes, attributes, recoverability table, pickling."""

import pickle

import pytest

from agentloop import errors as e
from agentloop.run import ConversationSummary

RECOVERABLE = {
    e.ToolExecutionError("t", "m"): True,
    e.ContextExceeded(10, 5): True,
    e.CompactionFailed(10, 5, "boom"): True,
    e.ReflectionError("r"): True,
    e.StreamError("s"): True,
    e.FallbackExhausted(3.0): True,
    e.RateLimited("r"): True,
    e.RateLimitEscalation(4, 7.0): True,
    e.ProviderUnavailable("u"): True,
    e.ProviderTimeout("t"): True,
    e.ResponseInvalid("x"): True,
    e.ProviderUnreachable("dns"): False,
    e.UnexpectedRedirect("r"): False,
    e.AuthError("a"): False,
    e.BadRequestError("b"): False,
    e.ContextLengthExceeded("c"): False,
    e.ModelNotFound("m"): False,
    e.InsufficientCredits("i"): False,
    e.ProviderError("p"): False,
    e.TranscriptError("t"): False,
    e.ToolError("t"): False,
    e.ToolNotFound("x", ["a"]): False,
    e.InvalidInput("i"): False,
    e.ConfigurationError("c"): False,
    e.LoopBudgetExceeded("tokens", 1, 2): False,
    e.MaxTurnsExceeded(200): False,
    e.BudgetExhausted("tokens", 10, 10): False,
    e.CompactionStalled(10, 10): False,
    e.LoopDetected("x"): False,
    e.UserInputRequired("u"): False,
    e.ToolLimitReached("t"): False,
    e.ToolRecoveryExhausted("flaky", 6): False,
    e.OutputValidationFailed(4, "Invalid output: x: Field required"): False,
    e.ModelRefused("refusal", "I cannot help with that"): False,
    e.GuardrailTripped("no_secrets", "the answer contains a key"): False,
    e.RemoteAuthError("billing", 401): False,
    e.HandoffLimitExceeded(10): False,
    e.GovernorUnavailable("sqlite:///governor.db", "OSError"): False,
    e.Cancelled(): False,
    e.MemoryBackendError("m"): False,
    e.PhaseFailed("reflection", "m"): False,
    e.LockPoisoned("fallback"): False,
    e.InternalError("i"): False,
    e.CassetteMismatch("request 1: no recorded request left", path="c.yaml", index=0): False,
    e.DatasetError("missing 'inputs'", path="cases.yaml", case="a"): False,
}


@pytest.mark.parametrize(("error", "expected"), list(RECOVERABLE.items()), ids=repr)
def test_is_recoverable_is_the_explicit_table(error: e.AgentLoopError, expected: bool) -> None:
    assert error.is_recoverable() is expected


def test_every_error_class_is_covered_by_the_table() -> None:
    covered = {type(err) for err in RECOVERABLE}
    defined = {
        obj
        for obj in vars(e).values()
        if isinstance(obj, type) and issubclass(obj, e.AgentLoopError)
    }
    assert defined - covered == {e.AgentLoopError}


def test_retryable_class_attribute() -> None:
    assert e.RateLimited.retryable and e.ProviderUnavailable.retryable
    assert e.ProviderTimeout.retryable and e.ResponseInvalid.retryable
    assert not e.ProviderUnreachable.retryable
    assert not e.ProviderError.retryable and not e.AuthError.retryable


def test_is_cancelled_only_for_cancelled() -> None:
    assert e.Cancelled().is_cancelled()
    assert all(not err.is_cancelled() for err in RECOVERABLE if not isinstance(err, e.Cancelled))


@pytest.mark.parametrize(
    ("error", "word"),
    [
        (e.FallbackExhausted(1.0), "wait"),
        (e.MaxTurnsExceeded(3), "config"),
        (e.ToolLimitReached("x"), "config"),
        (e.ContextExceeded(1, 1), "yes"),
        (e.CompactionStalled(1, 1), "no"),
        (e.BudgetExhausted("turns", 1, 1), "no"),
        (e.PhaseFailed("p", "m"), "depends"),
        (e.MemoryBackendError("m"), "depends"),
        (e.Cancelled(), "n/a"),
        (e.UserInputRequired("u"), "human"),
        (e.InternalError("i"), "none"),
        (e.LoopDetected("l"), "no"),
        (e.OutputValidationFailed(4, "bad"), "no"),
        (e.GuardrailTripped("g", "r"), "human"),
        (e.RemoteAuthError("billing", 403), "config"),
        (e.HandoffLimitExceeded(10), "no"),
        (e.ToolRecoveryExhausted("t", 6), "no"),
        (e.ConfigurationError("c"), "no"),
        (e.ToolExecutionError("t", "m"), "yes"),
        (e.CassetteMismatch("m"), "config"),
        (e.DatasetError("m"), "no"),
    ],
)
def test_recoverability_words(error: e.AgentLoopError, word: str) -> None:
    assert error.recoverability == word


def test_hierarchy() -> None:
    assert issubclass(e.InvalidInput, ValueError)
    assert issubclass(e.ConfigurationError, ValueError)
    assert issubclass(e.MaxTurnsExceeded, e.LoopBudgetExceeded)
    assert issubclass(e.BudgetExhausted, e.LoopBudgetExceeded)
    assert issubclass(e.ContextLengthExceeded, e.BadRequestError)
    assert issubclass(e.RateLimitEscalation, e.RateLimited)
    assert issubclass(e.ProviderUnreachable, e.ProviderUnavailable)
    for cls in (e.AuthError, e.StreamError, e.ResponseInvalid, e.ProviderTimeout):
        assert issubclass(cls, e.ProviderError)
        assert issubclass(cls, e.AgentLoopError)


def test_docstring_draws_the_tree() -> None:
    doc = e.__doc__ or ""
    for name in ("AgentLoopError", "ProviderError", "RateLimitEscalation", "StreamError"):
        assert name in doc


def test_tool_not_found_shapes() -> None:
    assert str(e.ToolNotFound("redd_file", ["read_file", "write_file"])) == (
        "Tool not found: redd_file. Available: read_file, write_file"
    )
    assert str(e.ToolNotFound("x", [])) == "Tool not found: x. Available: none registered"
    names = [f"tool_{i}" for i in range(1, 14)]
    assert str(e.ToolNotFound("x", names)) == (
        "Tool not found: x. Available: " + ", ".join(names[:10]) + "... (and 3 more)"
    )
    ten = [f"t{i}" for i in range(10)]
    assert str(e.ToolNotFound("x", ten)).endswith(", ".join(ten))
    err = e.ToolNotFound("Read_File ", ["a", "b"])
    assert err.tool == "Read_File " and err.available == ["a", "b"]


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (e.MaxTurnsExceeded(200), "Max turns exceeded: 200"),
        (e.ContextExceeded(9, 8), "Context window exceeded: used 9 of 8 tokens"),
        (e.LoopDetected("read(x) repeated 10 times"), "Loop detected: read(x) repeated 10 times"),
        (e.Cancelled(), "Agent cancelled"),
        (e.ToolLimitReached("cap"), "Tool limit reached: cap"),
        (e.PhaseFailed("reflection", "m"), "Phase 'reflection' failed: m"),
        (e.ToolExecutionError("t", "m"), "Tool execution error: t: m"),
        (e.ReflectionError("x"), "Reflection error: x"),
        (e.MemoryBackendError("x"), "Memory error: x"),
        (e.AuthError("OPENAI_API_KEY is not set"), "OPENAI_API_KEY is not set"),
        (e.RateLimitEscalation(4, 12.0), "Rate-limit escalation after 4 retries (retry-after 12s)"),
    ],
)
def test_str_shapes(error: e.AgentLoopError, text: str) -> None:
    assert str(error) == text


def test_structural_attributes() -> None:
    m = e.MaxTurnsExceeded(7)
    assert (m.max, m.kind, m.limit) == (7, "iterations", 7)
    b = e.BudgetExhausted("tokens", 120, 100)
    assert (b.dimension, b.spent, b.limit) == ("tokens", 120, 100)
    r = e.ToolRecoveryExhausted("flaky", 6)
    assert (r.tool, r.attempts) == ("flaky", 6)
    f = e.FallbackExhausted(retry_after=12.5)
    assert f.retry_after == 12.5
    c = e.CompactionFailed(10, 8, cause=ValueError("x"))
    assert isinstance(c.cause, ValueError)


def test_provider_error_keywords_default_to_none() -> None:
    err = e.ProviderError("boom")
    assert err.provider is None and err.status_code is None and err.retry_after is None
    assert err.request_id is None and err.phase is None and err.request_sent is None
    assert err.redirect_host is None and err.summary is None
    assert err.attempts == 1 and err.retry_wait_seconds == 0.0 and err.attempt_log == ()
    err = e.ProviderTimeout("t", phase="read", request_sent=True)
    assert err.phase == "read" and err.phase is e.FailurePhase.READ


def _all_instances() -> list[e.AgentLoopError]:
    err = e.RateLimited("slow", provider="openai", status_code=429, retry_after=7.0, phase="status")
    err.attempts = 3
    err.attempt_log = (e.AttemptRecord(1, "RateLimited", 429, e.FailurePhase.STATUS, True, 0.1, 7),)
    err.summary = ConversationSummary("r", 1, 2, 3, 4, 5, "m")
    return [*RECOVERABLE, err, e.StreamError("s", partial="half")]


@pytest.mark.parametrize("error", _all_instances(), ids=repr)
def test_every_error_pickles_with_its_attributes(error: e.AgentLoopError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__.keys() == error.__dict__.keys()
    assert copy.args == error.args
    assert copy.is_recoverable() == error.is_recoverable()
    for key, value in error.__dict__.items():
        if not isinstance(value, BaseException):
            assert getattr(copy, key) == value


def test_seed_002_example_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from agentloop import Settings, build_client

    with pytest.raises(e.ProviderError) as info:
        build_client(Settings(provider="openai"))
    error = info.value
    assert f"{type(error).__name__} {error}" == "AuthError OPENAI_API_KEY is not set"
    assert (error.status_code, error.request_id, error.summary) == (None, None, None)
