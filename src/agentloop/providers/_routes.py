"""The providers of SPEC 24 as ``Settings`` rows: Azure, Bedrock, Vertex and the families.

``build_client`` hands these providers here. Each is built from the ``Settings`` fields it
uses, and a field it has no use for is a ``ConfigurationError`` naming the providers that take
it (fail closed: ``region`` on ``azure`` would otherwise be ignored in silence):

=============  =================================================  ========================
provider       reached through                                    fields
=============  =================================================  ========================
azure          ``AZURE_OPENAI_ENDPOINT`` (or ``base_url``)          ``api_version``
               + ``/openai/v1``, key ``AZURE_OPENAI_API_KEY``
               as ``api-key``
bedrock        ``bedrock-runtime.<region>.amazonaws.com``, SigV4     ``region``,
               (AWS credential chain) or ``AWS_BEARER_TOKEN_BEDROCK``  ``credentials``
vertex         ``<location>-aiplatform.googleapis.com``, ADC          ``region`` (location),
               bearer token                                         ``project``,
                                                                    ``credentials``
families       each family's base URL and ``<NAME>_API_KEY``
               (``HF_TOKEN``), Chat Completions
=============  =================================================  ========================

The region is ``region``, else ``AWS_REGION``, else ``AWS_DEFAULT_REGION`` (Bedrock; none is a
``ConfigurationError``), and ``region``, else ``GOOGLE_CLOUD_LOCATION``, else ``global``
(Vertex). botocore and google-auth load only here, when such a client is built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol

from agentloop.errors import ConfigurationError
from agentloop.model import ClosableModelClient
from agentloop.providers.openai.families import FAMILIES

__all__ = ["FAMILY_KEYS", "FAMILY_MODELS", "ROUTES", "build_route", "check_route_fields"]

ROUTES = frozenset({"azure", "bedrock", "vertex"})
"""Providers reached through a cloud's own endpoint and credentials."""
FAMILY_KEYS: Mapping[str, str] = {name: family.key_var for name, family in FAMILIES.items()}
FAMILY_MODELS: Mapping[str, str] = {name: family.default_model for name, family in FAMILIES.items()}


class Settings(Protocol):
    """What this module reads of ``providers.settings.Settings`` (which imports this one)."""

    @property
    def provider(self) -> str: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def timeout(self) -> float: ...
    @property
    def connect_timeout(self) -> float: ...
    @property
    def max_connections(self) -> int: ...
    @property
    def region(self) -> str | None: ...
    @property
    def project(self) -> str | None: ...
    @property
    def credentials(self) -> Any: ...
    @property
    def api_version(self) -> str | None: ...


_FIELDS: Mapping[str, frozenset[str]] = {
    "api_version": frozenset({"azure"}),
    "region": frozenset({"bedrock", "vertex"}),
    "project": frozenset({"vertex"}),
    "credentials": frozenset({"bedrock", "vertex"}),
}


def check_route_fields(settings: Settings) -> None:
    """Refuse a route field the provider has no use for, or one that is not a string."""
    for name, takers in _FIELDS.items():
        value = getattr(settings, name)
        if value is None:
            continue
        if settings.provider not in takers:
            raise ConfigurationError(
                f"Settings.{name} applies to {', '.join(sorted(takers))}, not to provider "
                f"{settings.provider!r}",
                field=name,
            )
        if name != "credentials" and (not isinstance(value, str) or not value.strip()):
            raise ConfigurationError(f"Settings.{name} must be a non-empty string", field=name)


def _common(settings: Settings) -> dict[str, Any]:
    return {
        "timeout": float(settings.timeout),
        "connect_timeout": float(settings.connect_timeout),
        "max_connections": settings.max_connections,
    }


def _bedrock(settings: Settings, model: str, key: str | None) -> ClosableModelClient:
    from agentloop.providers.bedrock._auth import resolve_auth
    from agentloop.providers.bedrock.client import BedrockClient, check_region

    env = os.environ
    region = (
        settings.region
        or env.get("AWS_REGION", "").strip()
        or env.get("AWS_DEFAULT_REGION", "").strip()
    )
    if not region:
        raise ConfigurationError(
            "bedrock needs a region: Settings(region='us-east-1'), AWS_REGION or "
            "AWS_DEFAULT_REGION",
            field="region",
        )
    check_region(region)
    auth = resolve_auth(region, api_key=key, credentials=settings.credentials)
    return BedrockClient(model, auth=auth, base_url=settings.base_url, **_common(settings))


def _vertex(settings: Settings, model: str) -> ClosableModelClient:
    from agentloop.providers.vertex._auth import resolve_vertex
    from agentloop.providers.vertex.client import VertexClient

    auth, place = resolve_vertex(
        credentials=settings.credentials,
        project=settings.project,
        region=settings.region,
        base_url=settings.base_url,
    )
    return VertexClient(model, auth=auth, place=place, **_common(settings))


def build_route(settings: Settings, model: str, key: str | None) -> ClosableModelClient:
    """The client of an Azure, Bedrock, Vertex or OpenAI-compatible family ``settings``."""
    if settings.provider == "bedrock":
        return _bedrock(settings, model, key)
    if settings.provider == "vertex":
        return _vertex(settings, model)
    if settings.provider == "azure":
        from agentloop.providers.openai.azure import AzureOpenAIClient

        return AzureOpenAIClient(
            model,
            api_key=key,
            endpoint=settings.base_url,
            api_version=settings.api_version,
            **_common(settings),
        )
    from agentloop.providers.openai.families import CompatibleClient

    return CompatibleClient(
        model,
        family=FAMILIES[settings.provider],
        api_key=key,
        base_url=settings.base_url,
        **_common(settings),
    )
