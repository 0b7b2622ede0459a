"""OpenAI-compatible model families as rows (SPEC 24): where each lives and what it refuses.

Mistral, Groq, xAI, DeepSeek, Together, Fireworks, Cerebras and Hugging Face's router speak
Chat Completions; ``Settings(provider="groq")`` or ``Agent("groq:llama-3.3-70b-versatile")``
builds a ``CompatibleClient`` from the family's row: its base URL, its key variable, its default
model. What a family's models refuse (DeepSeek's reasoner and its sampling settings, xAI's
grok-4 and ``stop``) is in ``profiles.py`` under the family's name; what the family's API
refuses whatever the model is here, checked before anything is sent:

- ``seed``: Mistral names it ``random_seed`` and DeepSeek has none; a ``ConfigurationError``
  names the way (``extra_body={"random_seed": N}`` on Mistral).
- Mistral's tool-call ids are 9 characters of ``[a-zA-Z0-9]`` (provider-rules "Mistral" 1,
  reported: 400 "Tool call id was <id> but must be a-z, A-Z, 0-9, with a length of 9."). Its
  own ids already are; another provider's (``call_...`` after a fallback, ``toolu_...``) are
  sent as 9 alphanumerics derived from a hash of the id, so a call and its result keep the same
  one on every request and in every process. The transcript keeps the original ids; only the
  wire form changes, and it is computed once per message (``Message.encoded``).
- Reasoning: Chat Completions has no field for it, so no family gets reasoning back (DeepSeek
  refuses a ``reasoning_content`` sent back, which is never sent).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError
from agentloop.messages import Message, Part, ToolCallPart, ToolResultPart
from agentloop.model import ModelRequest
from agentloop.providers.openai.chat import OpenAIClient

__all__ = ["FAMILIES", "CompatibleClient", "Family", "mistral_call_id"]


@record
class Family:
    """One OpenAI-compatible provider: where it is, its key, and what its API refuses."""

    name: str
    title: str
    base_url: str
    key_var: str
    default_model: str
    refused: Mapping[str, str]
    """``ModelSettings`` fields the API refuses or ignores, each with the way out."""
    short_call_ids: bool = False
    """Tool-call ids must be 9 alphanumerics (Mistral)."""


FAMILIES: Mapping[str, Family] = {
    family.name: family
    for family in (
        Family(
            "mistral",
            "Mistral",
            "https://api.mistral.ai/v1",
            "MISTRAL_API_KEY",
            "mistral-small-latest",
            {"seed": 'Mistral calls it random_seed: extra_body={"random_seed": N}'},
            short_call_ids=True,
        ),
        Family(
            "groq",
            "Groq",
            "https://api.groq.com/openai/v1",
            "GROQ_API_KEY",
            "llama-3.3-70b-versatile",
            {},
        ),
        Family("xai", "xAI", "https://api.x.ai/v1", "XAI_API_KEY", "grok-3-mini", {}),
        Family(
            "deepseek",
            "DeepSeek",
            "https://api.deepseek.com/v1",
            "DEEPSEEK_API_KEY",
            "deepseek-chat",
            {"seed": "DeepSeek's API has no seed"},
        ),
        Family(
            "together",
            "Together AI",
            "https://api.together.xyz/v1",
            "TOGETHER_API_KEY",
            "meta-llama/Llama-3.3-70B-Instruct-Turbo",
            {},
        ),
        Family(
            "fireworks",
            "Fireworks AI",
            "https://api.fireworks.ai/inference/v1",
            "FIREWORKS_API_KEY",
            "accounts/fireworks/models/llama-v3p3-70b-instruct",
            {},
        ),
        Family(
            "cerebras",
            "Cerebras",
            "https://api.cerebras.ai/v1",
            "CEREBRAS_API_KEY",
            "llama-3.3-70b",
            {},
        ),
        Family(
            "huggingface",
            "Hugging Face (router)",
            "https://router.huggingface.co/v1",
            "HF_TOKEN",
            "openai/gpt-oss-120b",
            {},
        ),
    )
}
"""Every OpenAI-compatible family ``Settings.provider`` names, by name."""

_SHORT_ID = re.compile(r"[A-Za-z0-9]{9}")
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def mistral_call_id(call_id: str) -> str:
    """``call_id`` if it is 9 alphanumerics, else 9 derived from its SHA-256 (stable)."""
    if _SHORT_ID.fullmatch(call_id):
        return call_id
    number = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big")
    digits = []
    for _ in range(9):
        number, digit = divmod(number, 62)
        digits.append(_ALPHABET[digit])
    return "".join(digits)


def _short_part(part: Part) -> Part:
    if isinstance(part, ToolCallPart) and not _SHORT_ID.fullmatch(part.id):
        return ToolCallPart(mistral_call_id(part.id), part.name, part.arguments)
    if isinstance(part, ToolResultPart) and not _SHORT_ID.fullmatch(part.call_id):
        return ToolResultPart(
            mistral_call_id(part.call_id),
            part.name,
            part.content,
            part.is_error,
            media=part.media,
        )
    return part


def _short_ids(message: Message) -> Message:
    """``message`` with Mistral-shaped call ids (itself when every id already fits)."""
    parts = tuple(_short_part(part) for part in message.parts)
    if all(a is b for a, b in zip(parts, message.parts, strict=True)):
        return message
    return Message(message.role, parts, phase=message.phase)


class CompatibleClient(OpenAIClient):
    """Chat Completions at an OpenAI-compatible family's API, held to the family's rules.

    Args:
        model: The default model name.
        family: The family's row (``FAMILIES["groq"]``).
        **options: ``OpenAIClient``'s keywords (``api_key``, ``base_url``, ``timeout``...);
            ``base_url`` defaults to the family's and ``provider`` is the family's name.
    """

    def __init__(self, model: str, *, family: Family, **options: Any) -> None:
        self.family = family
        if options.get("base_url") is None:
            options["base_url"] = family.base_url
        super().__init__(model, provider=family.name, **options)

    def _payload(self, request: ModelRequest, model: str, stream: bool) -> tuple[bytes, bool]:
        settings = request.settings
        for name, way in self.family.refused.items():
            if getattr(settings, name) is not None:
                raise ConfigurationError(
                    f"{self.family.title} does not take ModelSettings.{name}: {way}", field=name
                )
        if self.family.short_call_ids:
            key = "mistral-call-ids"
            messages = tuple(m.encoded(key, _short_ids) for m in request.messages)
            request = replace(request, messages=messages)
        return super()._payload(request, model, stream)
