"""How a Bedrock request proves who sends it: SigV4 through botocore, or a Bedrock API key.

- ``AWS_BEARER_TOKEN_BEDROCK`` (or ``Settings.api_key``): a Bedrock API key, sent as
  ``Authorization: Bearer``; nothing is signed.
- Otherwise AWS credentials: ``Settings.credentials`` (a botocore ``Credentials``) or botocore's
  credential chain (environment, shared files and profiles, SSO, container and instance roles),
  resolved once at ``build_client`` time; none found is ``AuthError`` before any request. Each
  request is signed with botocore's ``SigV4Auth`` for service ``bedrock`` over the exact bytes,
  URL and headers sent (``Content-Type``, ``Accept``, ``X-Amz-Date``,
  ``X-Amz-Security-Token`` with session credentials). Refreshable credentials refresh in a
  worker thread, never on the event loop; a refresh that fails is ``AuthError`` with
  ``request_sent`` False.

botocore is imported here only, and only when a Bedrock client is built.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

from agentloop.errors import AuthError, ConfigurationError
from agentloop.providers._extras import need_extra
from agentloop.safety.redact import redact_secrets

__all__ = ["SERVICE", "AwsAuth", "resolve_auth"]

SERVICE = "bedrock"
"""The SigV4 service name of ``bedrock-runtime``."""


class AwsAuth:
    """The headers that authenticate one request (a bearer key, or a SigV4 signature)."""

    def __init__(self, region: str, *, bearer: str | None, credentials: Any) -> None:
        self.region = region
        self.bearer = bearer
        self.credentials = credentials
        self._watchers: list[Callable[[str], None]] = []

    def watch(self, add_secret: Callable[[str], None]) -> None:
        """Tell ``add_secret`` (a transport's) each credential value a request signs with.

        A refresh mints new ones (a renewed role's session token): redacted from then on.
        """
        self._watchers.append(add_secret)

    @property
    def secrets(self) -> tuple[str, ...]:
        """What to redact from errors (the key, the secret key, the session token)."""
        if self.bearer:
            return (self.bearer,)
        frozen = self.frozen()
        return tuple(s for s in (frozen.secret_key, frozen.token, frozen.access_key) if s)

    async def headers(self, url: str, body: bytes, accept: str) -> Mapping[str, str]:
        """The request's auth headers (with the ``Content-Type``/``Accept`` they sign)."""
        base = {"Content-Type": "application/json", "Accept": accept}
        if self.bearer:
            return {**base, "Authorization": f"Bearer {self.bearer}"}

        refresh = getattr(self.credentials, "refresh_needed", None)
        if refresh is not None and refresh():
            frozen = await asyncio.to_thread(self.frozen)
        else:
            frozen = self.frozen()
        for add_secret in self._watchers:
            for value in (frozen.secret_key, frozen.token, frozen.access_key):
                add_secret(value or "")
        return sign(frozen, self.region, url, body, base)

    def frozen(self) -> Any:
        """The credentials of this moment; a failed refresh is ``AuthError`` (nothing sent)."""
        from botocore.exceptions import BotoCoreError

        try:
            return self.credentials.get_frozen_credentials()
        except BotoCoreError as exc:  # a refresh that failed (SSO expired, no role...)
            said = redact_secrets(str(exc))[:300]
            raise AuthError(
                f"bedrock: refreshing the AWS credentials failed ({type(exc).__name__}: {said})",
                provider=SERVICE,
                request_sent=False,
            ) from exc


def sign(
    frozen: Any, region: str, url: str, body: bytes, headers: Mapping[str, str]
) -> dict[str, str]:
    """Botocore's SigV4 headers for a POST of ``body`` to ``url`` (service ``bedrock``)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    SigV4Auth(frozen, SERVICE, region).add_auth(request)
    return {str(name): str(value) for name, value in request.headers.items()}


def resolve_auth(region: str, *, api_key: str | None, credentials: Any = None) -> AwsAuth:
    """The auth of a Bedrock client: a Bedrock API key, or AWS credentials (the chain).

    Raises:
        ConfigurationError: botocore is missing (``pip install 'agentloop[bedrock]'``), which
            signs requests and decodes ``ConverseStream``'s frames, so even a Bedrock API key
            needs it.
        AuthError: No API key and the credential chain finds no credentials.
    """
    # botocore also decodes ConverseStream's frames: a Bedrock API key needs it too
    need_extra("bedrock", ["botocore"], "the bedrock provider (SigV4 and AWS event streams)")
    key = api_key or os.environ.get("AWS_BEARER_TOKEN_BEDROCK", "").strip() or None
    if key is not None:
        return AwsAuth(region, bearer=key, credentials=None)
    if credentials is None:
        import botocore.session

        credentials = botocore.session.get_session().get_credentials()
    if credentials is None:
        raise AuthError(
            "no AWS credentials found (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
            "SSO, an instance or container role) and AWS_BEARER_TOKEN_BEDROCK is not set",
            provider=SERVICE,
        )
    if not hasattr(credentials, "get_frozen_credentials"):
        raise ConfigurationError(
            "credentials for bedrock must be botocore Credentials "
            "(botocore.credentials.Credentials(access_key, secret_key, token))",
            field="credentials",
        )
    auth = AwsAuth(region, bearer=None, credentials=credentials)
    auth.frozen()  # credentials that cannot be had (an expired SSO session) fail here, at build
    return auth
