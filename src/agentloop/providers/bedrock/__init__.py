"""Amazon Bedrock's Converse API (extra ``bedrock``: botocore for SigV4 and event streams).

``BedrockClient`` is built by ``build_client(Settings(provider="bedrock", ...))`` or
``Agent("bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0")``; the wire rules are in
``client``'s docstring, encoding in ``_encode``, replies and streams in ``_reply``, signing and
credentials in ``_auth``. Importing this package does not import botocore.
"""

from agentloop.providers.bedrock.client import EVENT_STREAM, BedrockClient, model_url_path

__all__ = ["EVENT_STREAM", "BedrockClient", "model_url_path"]
