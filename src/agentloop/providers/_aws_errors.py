"""AWS's error types onto our error tree (Bedrock, SPEC 24; provider-rules "Amazon Bedrock").

AWS names each failure in the ``x-amzn-ErrorType`` header (``ThrottlingException:http://
internal.amazon.com/coral/...``) with a body ``{"message": "..."}``; ``ConverseStream`` sends the
same failures mid-stream as exception frames whose ``:exception-type`` is the lower-camel name
(``throttlingException``, ``modelStreamErrorException``). The type decides the class, not the
status: a ``ServiceQuotaExceededException`` is a 400 that no retry mends, a
``ModelNotReadyException`` a 429 that is no rate limit. Pure: ``_classify`` calls it for every
reply that carries the header, the Bedrock stream for every exception frame.

======================================  ===========================================
ThrottlingException                      ``RateLimited``
ValidationException                      ``BadRequestError`` ("too long" and its kin:
                                         ``ContextLengthExceeded``)
ServiceQuotaExceededException            ``BadRequestError`` (a quota, not a rate)
AccessDeniedException, signature and     ``AuthError``
token errors (IncompleteSignature,
InvalidClientTokenId, InvalidSignature-
Exception, UnrecognizedClientException,
ExpiredTokenException)
ResourceNotFoundException                ``ModelNotFound``
ModelTimeoutException                    ``ProviderTimeout``
ModelErrorException, ModelStreamError-   ``ProviderUnavailable`` (retryable)
Exception, ModelNotReadyException,
InternalServerException,
ServiceUnavailableException
anything else                            the status table
======================================  ===========================================
"""

from __future__ import annotations

from collections.abc import Mapping

from agentloop.errors import (
    AuthError,
    BadRequestError,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)

__all__ = ["AWS_ERROR_TYPES", "aws_error_type", "class_for_aws_type"]

AWS_ERROR_TYPES: Mapping[str, type[ProviderError]] = {
    "ThrottlingException": RateLimited,
    "ValidationException": BadRequestError,
    "ServiceQuotaExceededException": BadRequestError,
    "AccessDeniedException": AuthError,
    "IncompleteSignature": AuthError,
    "InvalidClientTokenId": AuthError,
    "InvalidSignatureException": AuthError,
    "UnrecognizedClientException": AuthError,
    "ExpiredTokenException": AuthError,
    "MissingAuthenticationTokenException": AuthError,
    "ResourceNotFoundException": ModelNotFound,
    "ModelTimeoutException": ProviderTimeout,
    "ModelErrorException": ProviderUnavailable,
    "ModelStreamErrorException": ProviderUnavailable,
    "ModelNotReadyException": ProviderUnavailable,
    "InternalServerException": ProviderUnavailable,
    "ServiceUnavailableException": ProviderUnavailable,
}
"""Each AWS error type (as ``x-amzn-ErrorType`` names it) and its class."""


def aws_error_type(headers: Mapping[str, str]) -> str | None:
    """The error type of ``x-amzn-errortype`` (lower-cased header names), without its URI."""
    value = headers.get("x-amzn-errortype")
    if not value:
        return None
    name = value.split(":", 1)[0].strip()
    return name or None


def class_for_aws_type(name: str) -> type[ProviderError] | None:
    """The class of an AWS error type, header form or stream form (``throttlingException``)."""
    return AWS_ERROR_TYPES.get(name[:1].upper() + name[1:])
