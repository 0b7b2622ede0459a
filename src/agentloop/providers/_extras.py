"""An adapter's optional extra, or a ``ConfigurationError`` naming the pip command (SPEC 24).

Bedrock needs botocore (SigV4 signing and the AWS event-stream decoder, never a boto3 client)
and Vertex AI google-auth (credentials only); both are extras, so ``import agentloop`` and every
other provider work without them. ``build_client`` asks here before building such a client, so
a missing package is a typed error at start-up, not an ``ImportError`` mid-run.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentloop._util.extras import MissingExtra, require_extra
from agentloop.errors import ConfigurationError

__all__ = ["need_extra"]


def need_extra(extra: str, packages: Sequence[str], what: str) -> None:
    """Raise ``ConfigurationError`` naming ``pip install 'agentloop[<extra>]'`` if one is absent."""
    try:
        require_extra(extra, packages, what)
    except MissingExtra as exc:
        raise ConfigurationError(str(exc), field="provider") from None
