"""The Converse request body: agentloop messages, tools and settings in Bedrock's shapes.

Converse (``POST /model/{modelId}/converse``) takes ``messages`` of ``user``/``assistant``
content blocks (``text``, ``image``, ``document``, ``toolUse``, ``toolResult``,
``reasoningContent``), a top-level ``system`` list, ``inferenceConfig`` (``maxTokens``,
``temperature``, ``topP``, ``stopSequences``), ``toolConfig`` (``toolSpec`` with
``inputSchema.json``, ``toolChoice`` ``auto``/``any``/``tool``) and what one model family
takes beyond that in ``additionalModelRequestFields``. Rules kept here, before anything is sent:

- Claude names (``anthropic.claude-...``, ``us.anthropic.claude-...``) are held to Anthropic's
  rules through the same code the Anthropic adapter uses (``anthropic._settings``): the output
  limit by model, ``thinking`` (enabled with a budget up to 4.6, adaptive with
  ``output_config.effort`` from 4.7) in ``additionalModelRequestFields``, and what thinking
  cannot be combined with. Other models get their Bedrock profile row (``profiles.py``).
- Reasoning goes back as it came: a ``ThinkingPart`` this adapter wrote (``provider ==
  "bedrock"``) with a signature is a ``reasoningContent.reasoningText`` block, a redacted one a
  ``redactedContent`` block, in its place; one without a signature (a model that signs nothing)
  and every other provider's reasoning stay out.
- Roles alternate: a ``tool`` message is a ``user`` message of ``toolResult`` blocks and a
  neighbour of the same role joins it; blank text is left out (Converse refuses it).
- Media: images (png, jpeg, gif, webp) and documents (pdf, txt, ...) as bytes, in user messages
  and tool results, where the model's profile takes them; a URL (Converse takes S3 locations
  only), audio, or a kind the model lacks is a ``ConfigurationError`` naming the part.
- ``tool_choice="none"`` has no Converse form: a ``ConfigurationError``; ``seed`` too.
- Prompt caching (``ModelSettings.cache``, on by default) on the models that have it (Claude
  3.7 and later, Amazon Nova): ``cachePoint`` blocks where the Anthropic adapter puts its
  ``cache_control`` breakpoints (``_mark``); ``cache=False`` sends none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentloop.errors import ConfigurationError
from agentloop.media import AudioPart, DocumentPart, ImagePart
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.model import ModelRequest, ModelSettings, ToolSpec, with_tool_changes
from agentloop.providers._provider_tools import refuse_all
from agentloop.providers.anthropic._entries import last_entry
from agentloop.providers.anthropic._settings import check_payload, settings_fields
from agentloop.providers.profiles import check_settings, merge_body, profile_for

if TYPE_CHECKING:
    from agentloop.provider_tools import ProviderTool

__all__ = [
    "NO_PROVIDER_TOOLS",
    "PROVIDER",
    "build_payload",
    "caches",
    "is_claude",
    "refuse_provider_tools",
]

PROVIDER = "bedrock"
_IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/plain": "txt",
    "text/markdown": "md",
    "text/html": "html",
    "text/csv": "csv",
}


def is_claude(model: str) -> bool:
    """Whether a Bedrock model id names Claude (its rules are Anthropic's)."""
    return "anthropic.claude" in model.lower() or model.lower().startswith("claude")


def _media_block(part: ImagePart | DocumentPart | AudioPart, model: str, number: int) -> Any:
    kinds = profile_for(PROVIDER, model).media
    if isinstance(part, AudioPart) or part.kind not in kinds:
        taken = ", ".join(sorted(kinds)) or "text only"
        raise ConfigurationError(
            f"{model} on Bedrock cannot take {part.describe()} (it takes {taken})",
            field="messages",
        )
    if part.data is None:
        raise ConfigurationError(
            f"Bedrock Converse takes media as bytes (or S3 locations), not a URL: "
            f"{part.describe()}; load it with {type(part).__name__}.from_path or bytes",
            field="messages",
        )
    formats = _IMAGE_FORMATS if isinstance(part, ImagePart) else _DOCUMENT_FORMATS
    form = formats.get(part.media_type or "")
    if form is None:
        raise ConfigurationError(
            f"Bedrock Converse cannot take {part.describe()}: {part.kind}s are "
            f"{', '.join(sorted(formats))}",
            field="messages",
        )
    source = {"bytes": part.base64()}
    if isinstance(part, ImagePart):
        return {"image": {"format": form, "source": source}}
    return {"document": {"format": form, "name": f"document-{number}", "source": source}}


class _Encoder:
    """One request's messages: numbering of documents, the model's rules."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.claude = is_claude(model)
        self.documents = 0

    def media(self, part: Any) -> dict[str, Any]:
        self.documents += isinstance(part, DocumentPart)
        block: dict[str, Any] = _media_block(part, self.model, self.documents)
        return block

    def thinking(self, part: ThinkingPart) -> dict[str, Any] | None:
        if part.provider != PROVIDER or not part.signature:
            return None
        if part.redacted:
            return {"reasoningContent": {"redactedContent": part.signature}}
        text = {"text": part.text, "signature": part.signature}
        return {"reasoningContent": {"reasoningText": text}}

    def result(self, part: ToolResultPart) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"text": part.content or "(no output)"}]
        content.extend(self.media(m) for m in part.media)
        result: dict[str, Any] = {"toolUseId": part.call_id, "content": content}
        if self.claude:  # the status field is Claude's alone on Converse
            result["status"] = "error" if part.is_error else "success"
        return {"toolResult": result}

    def block(self, part: Any) -> dict[str, Any] | None:
        if isinstance(part, TextPart):
            return {"text": part.text} if part.text.strip() else None
        if isinstance(part, ToolCallPart):
            use = {"toolUseId": part.id, "name": part.name, "input": dict(part.arguments)}
            return {"toolUse": use}
        if isinstance(part, ToolResultPart):
            return self.result(part)
        if isinstance(part, ThinkingPart):
            return self.thinking(part)
        if isinstance(part, ImagePart | DocumentPart | AudioPart):
            return self.media(part)
        raise ConfigurationError(f"bedrock cannot send a {type(part).__name__}", field="messages")

    def messages(self, messages: Sequence[Message], bare_before: int = -1) -> list[dict[str, Any]]:
        """The Converse messages; the thinking of those before ``bare_before`` is left out.

        Converse folds system entries into ``system`` (SPEC 28), which changes the prefix of
        every block before the last entry: on an append-only model those are left out.
        """
        out: list[dict[str, Any]] = []
        for index, message in enumerate(messages):
            if message.role == "system":
                continue
            role = "assistant" if message.role == "assistant" else "user"
            parts = message.parts
            if index < bare_before:
                parts = tuple(p for p in parts if not isinstance(p, ThinkingPart))
            blocks = [b for b in map(self.block, parts) if b is not None]
            if not blocks:
                continue
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": blocks})
        return out


def _system(request: ModelRequest) -> list[dict[str, str]]:
    texts = [request.system] if request.system else []
    texts += [m.text for m in request.messages if m.role == "system" and m.text]
    return [{"text": text} for text in texts]


def _tools(tools: Sequence[ToolSpec], choice: str | None) -> dict[str, Any]:
    specs = [
        {
            "toolSpec": {
                "name": t.name,
                "description": t.description or t.name,
                "inputSchema": {"json": dict(t.parameters)},
            }
        }
        for t in tools
    ]
    config: dict[str, Any] = {"tools": specs}
    if choice in (None, "auto"):
        return config
    if choice in ("required", "any"):
        config["toolChoice"] = {"any": {}}
    else:
        config["toolChoice"] = {"tool": {"name": choice}}
    return config


def _claude_fields(settings: ModelSettings, model: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Anthropic's fields for a Claude model, as ``inferenceConfig`` and additional fields."""
    fields = settings_fields(settings, model, None)
    check_payload(fields, model)
    config: dict[str, Any] = {"maxTokens": fields.pop("max_tokens")}
    for ours, theirs in (("temperature", "temperature"), ("top_p", "topP")):
        if ours in fields:
            config[theirs] = fields.pop(ours)
    if "stop_sequences" in fields:
        config["stopSequences"] = fields.pop("stop_sequences")
    fields.pop("tool_choice", None)  # toolConfig carries it
    return config, fields


def _generic_fields(settings: ModelSettings, model: str) -> dict[str, Any]:
    profile = profile_for(PROVIDER, model)
    check_settings(profile, model, settings)
    config: dict[str, Any] = {}
    limit = settings.max_tokens or profile.max_output_tokens
    if limit:
        config["maxTokens"] = limit
    if settings.temperature is not None:
        config["temperature"] = settings.temperature
    if settings.top_p is not None:
        config["topP"] = settings.top_p
    if settings.stop:
        config["stopSequences"] = list(settings.stop)
    return config


NO_PROVIDER_TOOLS = (
    "Bedrock Converse has no provider tools; use the model's own API (anthropic, openai with "
    "api='responses', gemini or vertex), or a function tool of your own"
)


def refuse_provider_tools(tools: Sequence[ProviderTool], model: str) -> None:
    """``ConfigurationError`` for any provider tool: Converse has none (SPEC 24)."""
    refuse_all(tools, "bedrock (Converse)", model, NO_PROVIDER_TOOLS)


def _refused(request: ModelRequest, name: str) -> None:
    """``ConfigurationError`` for what Converse has no field for."""
    settings = request.settings
    if request.provider_tools:  # a direct ModelRequest too: refused, never dropped
        refuse_provider_tools(request.provider_tools, name)
    if settings.seed is not None:
        raise ConfigurationError("Bedrock Converse has no seed", field="seed")
    if settings.tool_choice == "none":
        raise ConfigurationError(
            "Bedrock Converse has no tool_choice 'none': offer no tools instead",
            field="tool_choice",
        )


def build_payload(request: ModelRequest, model: str) -> dict[str, Any]:
    """The Converse body for ``request`` (the model goes in the URL, not the body).

    Raises ``ConfigurationError`` for anything the model or Converse refuses, before sending.
    """
    settings, name = request.settings, request.model or model
    _refused(request, name)
    extra: dict[str, Any] = {}
    if is_claude(name):
        config, extra = _claude_fields(settings, name)
    else:
        config = _generic_fields(settings, name)
    request = with_tool_changes(request)  # SPEC 28: an entry's tool change joins toolConfig
    bare = last_entry(request.messages) if profile_for(PROVIDER, name).append_only else -1
    messages = _Encoder(name).messages(request.messages, bare_before=bare)
    payload: dict[str, Any] = {"messages": messages}
    system = _system(request)
    if system:
        payload["system"] = system
    if config:
        payload["inferenceConfig"] = config
    if request.tools:
        payload["toolConfig"] = _tools(request.tools, settings.tool_choice)
    if extra:
        payload["additionalModelRequestFields"] = extra
    if settings.cache and caches(name):
        _mark(payload, tools=is_claude(name))
    if settings.extra_body:
        merge_body(payload, settings.extra_body)
    return payload


def caches(model: str) -> bool:
    """Whether the model has Bedrock's prompt caching: Claude 3.7 and later, Amazon Nova."""
    if "amazon.nova" in model.lower():
        return True
    profile = profile_for(PROVIDER, model)
    return is_claude(model) and (profile.thinking_budget or profile.adaptive_thinking)


def _mark(payload: dict[str, Any], *, tools: bool) -> None:
    """``cachePoint`` blocks where the Anthropic adapter puts its breakpoints (four at most).

    After the system text and (Claude only: Nova caches no tools) the tools, at the end of the
    transcript (the next request reads it) and of the message before the last assistant turn
    (where the previous request ended). Never right after reasoning: that would put
    ``cache_control`` on a thinking block, which Claude refuses.
    """
    if payload.get("system"):
        payload["system"].append({"cachePoint": {"type": "default"}})
    specs = payload.get("toolConfig", {}).get("tools")
    if tools and specs:
        specs.append({"cachePoint": {"type": "default"}})
    messages = payload["messages"]
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    ends = {len(messages) - 1, *([assistants[-1] - 1] if assistants else [])} - {-1}
    for index in ends:
        content = messages[index]["content"]
        if "reasoningContent" not in content[-1]:
            content.append({"cachePoint": {"type": "default"}})
