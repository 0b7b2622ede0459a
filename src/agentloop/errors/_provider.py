"""``ProviderError`` and its family: where a request failed and whether it was sent."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, ClassVar

from agentloop.errors._base import AgentLoopError


class FailurePhase(enum.StrEnum):
    """Where a provider request failed."""

    CONNECT = "connect"
    TLS = "tls"
    PROXY = "proxy"
    SEND = "send"
    READ = "read"
    STATUS = "status"
    REDIRECT = "redirect"
    BODY = "body"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """What one attempt of a provider request did."""

    attempt: int
    error_type: str | None
    status_code: int | None
    phase: FailurePhase | None
    request_sent: bool | None
    duration_seconds: float
    wait_seconds: float = 0.0


class ProviderError(AgentLoopError):
    """The provider or HTTP layer failed; attributes say where and whether it was sent."""

    retryable: ClassVar[bool] = False
    recoverability = "no"
    should_retry: bool | None = None
    """The server's ``x-should-retry`` answer (True/False); None when it sent none."""

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
        phase: FailurePhase | str | None = None,
        request_sent: bool | None = None,
        redirect_host: str | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code
        self.retry_after = retry_after
        self.request_id = request_id
        self.phase = FailurePhase(phase) if phase is not None else None
        self.request_sent = request_sent
        self.redirect_host = redirect_host
        self.body = body
        self.attempts = 1
        self.retry_wait_seconds = 0.0
        self.attempt_log: tuple[AttemptRecord, ...] = ()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, provider={self.provider!r}, "
            f"status_code={self.status_code!r}, phase={self.phase!r}, "
            f"request_sent={self.request_sent!r})"
        )

    def is_recoverable(self) -> bool:
        """Retryable classes, and ``StreamError`` (table of SPEC section 4)."""
        return type(self).retryable or self._always_recoverable


class AuthError(ProviderError):
    """The credentials are missing or were rejected (401/403)."""

    recoverability = "config"


class BadRequestError(ProviderError):
    """The provider rejected the request as malformed (400); retrying repeats it."""


class ContextLengthExceeded(BadRequestError):
    """The provider rejected the prompt as too long for the model's context."""

    recoverability = "depends"


class ModelNotFound(ProviderError):
    """The model or endpoint does not exist (404)."""

    recoverability = "config"


class InsufficientCredits(ProviderError):
    """The account is out of credit or quota (402, or a quota 429); never retried."""

    recoverability = "human"


class UnexpectedRedirect(ProviderError):
    """The server answered with a 3xx; redirects are never followed."""

    recoverability = "config"


class RateLimited(ProviderError):
    """The provider throttled the request (429)."""

    retryable = True
    recoverability = "wait"


class RateLimitEscalation(RateLimited):
    """Rate limits persisted past the retry ladder; the request gave up on this model."""

    def __init__(
        self,
        attempts: int,
        retry_after: float | None = None,
        *,
        provider: str | None = None,
        status_code: int | None = 429,
        request_id: str | None = None,
    ) -> None:
        hint = "none" if retry_after is None else f"{retry_after:g}s"
        super().__init__(
            f"Rate-limit escalation after {attempts} retries (retry-after {hint})",
            provider=provider,
            status_code=status_code,
            retry_after=retry_after,
            request_id=request_id,
            phase=FailurePhase.STATUS,
            request_sent=True,
        )
        self.args = (attempts, retry_after)
        self.attempts = attempts


class ProviderUnavailable(ProviderError):
    """The provider could not be reached or failed on its side (refused, reset, 5xx)."""

    retryable = True
    recoverability = "yes"


class ProviderUnreachable(ProviderUnavailable):
    """A fault in the environment (DNS, TLS verification, proxy refusal): a retry fails alike."""

    retryable = False
    recoverability = "config"


class ProviderTimeout(ProviderError):
    """A connect or read timeout, or a 408."""

    retryable = True
    recoverability = "yes"


class ResponseInvalid(ProviderError):
    """The reply was unparseable or schema-invalid, or a stream ended without its terminal event.

    ``body`` keeps the raw text received.
    """

    retryable = True
    recoverability = "yes"


class StreamError(ProviderError):
    """A stream failed mid-way; ``partial`` holds the last complete message, if any."""

    recoverability = "yes"
    _always_recoverable = True

    def __init__(self, message: str, *, partial: Any = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.partial = partial
