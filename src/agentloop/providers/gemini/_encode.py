"""Gemini request encoding: agentloop messages and settings in, a ``generateContent`` body out.

Reasoning lives on the message (SPEC 16), so encoding is a pure function of the message and is
cached on it (``Message.encoded``); no client keeps signatures. Wire rules:

- ``request.system`` (and ``system`` messages) -> ``systemInstruction``; roles ``user`` and
  ``model``; a ``tool`` message -> one ``user`` turn of ``functionResponse`` parts
  (``{"result": text}``, or ``{"error": text}`` for a soft error), in the model's call order;
  consecutive same-role turns are merged. Only call ids Gemini issued are echoed back.
- Media (``_media``): ``inlineData`` (base64) or ``fileData`` (a URL) in place among the
  text; a type Gemini does not take, or a kind the model's profile does not list, is a
  ``ConfigurationError`` naming the part and the model before anything is sent. A tool's media
  go inside its ``functionResponse`` on Gemini 3 where Gemini takes them there, else in a
  ``user`` turn of their own right after the whole turn of responses.
- Gemini's own ``ThinkingPart``s (``provider="gemini"``) go back in place: a signature-only part
  (``text=""``) puts its ``thoughtSignature`` on the next wire part (on an empty text part when
  nothing follows, as Gemini sent it at the end of a stream); a thought goes back as
  ``{"text", "thought": true, "thoughtSignature"}``. Every other provider's reasoning is dropped,
  and so is another Gemini model's or another route's: each part records the model and route
  that wrote it (``origin``, ``reader``: the provider label and endpoint, Gemini API or Vertex),
  and a signature goes back only to that model there (after a fallback another model answers
  400 "Invalid thought signature."). Parts stored without an origin are sent as before, and
  parts stored with a model but no route go back to that model on any route.
- Gemini 3 validates a signature on the first ``functionCall`` of each model turn. A turn whose
  calls Gemini never signed (written by another provider or another Gemini model before a
  fallback, or by hand: signatures are checked within the current turn, so the turn a fallback
  interrupts needs one) gets
  Google's documented bypass value ``skip_thought_signature_validator`` on its first call, added
  to a copy so the cached encoding stays as received. Gemini 2.5 does not validate: none is added.
- ``ModelSettings`` -> ``generationConfig`` (temperature, topP, maxOutputTokens, seed,
  stopSequences); ``reasoning_effort`` -> ``thinkingConfig.thinkingLevel`` (Gemini 3),
  ``thinking_budget`` -> ``thinkingConfig.thinkingBudget`` (Gemini 2.5), with
  ``includeThoughts: true`` whenever thinking is asked for (not with a budget of 0, which turns
  it off), all inside the one ``generationConfig`` beside native output's ``responseJsonSchema``;
  ``tool_choice`` -> ``toolConfig``; ``extra_body`` merges key by key (``profiles.merge_body``),
  so ``{"generationConfig": {"thinkingConfig": ...}}`` adds to the config instead of replacing it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from functools import partial
from typing import Any

from agentloop.errors import ConfigurationError
from agentloop.messages import (
    AudioPart,
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ProviderPart,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolChangePart,
    ToolResultPart,
)
from agentloop.model import ModelRequest, ModelSettings, with_tool_changes
from agentloop.provider_tools import ProviderTool
from agentloop.providers._provider_tools import check
from agentloop.providers.gemini import _builtin
from agentloop.providers.gemini._media import ToolMedia, encode_media, refuse_kind, tool_media
from agentloop.providers.profiles import ModelProfile, check_settings, merge_body, profile_for

__all__ = ["BYPASS_SIGNATURE", "build_payload", "encode_contents", "gemini_profile", "reader"]

PROVIDER = "gemini"
SYNTHETIC = "gemini_"
"""The stem of call ids agentloop made up (Gemini sent none): never echoed back."""
BYPASS_SIGNATURE = "skip_thought_signature_validator"
"""Google's documented value for a function call Gemini did not sign (thought-signatures FAQ)."""


@functools.lru_cache(maxsize=64)
def gemini_profile(model: str) -> ModelProfile:
    """The profile of ``model`` (memoised: a request pays a dict lookup, not the regexes)."""
    return profile_for(PROVIDER, model)


def _validates_signatures(profile: ModelProfile) -> bool:
    """Gemini 3 and later (the families that think by ``thinkingLevel``) check signatures."""
    return bool(profile.efforts)


def _nests_media(profile: ModelProfile) -> bool:
    """Gemini 3 and later take a tool's media inside its ``functionResponse``."""
    return bool(profile.efforts)


# --- contents ---------------------------------------------------------------------------------


def _encode_part(part: Part) -> dict[str, Any] | None:
    """The wire form of one part (None: nothing to send; signature-only parts are the caller's)."""
    if isinstance(part, TextPart):
        return {"text": part.text} if part.text else None
    if isinstance(part, ToolCallPart):
        call: dict[str, Any] = {"name": part.name, "args": dict(part.arguments)}
        if not part.id.startswith(SYNTHETIC):
            call["id"] = part.id
        return {"functionCall": call}
    if isinstance(part, ThinkingPart):
        return _thought(part)
    if isinstance(part, ToolChangePart | ProviderPart):
        return None  # a tool change joins tools; another provider's block is never sent
    if isinstance(part, ProviderToolCallPart | ProviderToolResultPart):
        return _builtin.encode_part(part)
    if not isinstance(part, ToolResultPart):
        return encode_media(part)
    key = "error" if part.is_error else "result"
    response: dict[str, Any] = {"name": part.name, "response": {key: part.content}}
    if not part.call_id.startswith(SYNTHETIC):
        response["id"] = part.call_id
    return {"functionResponse": response}


def _thought(part: ThinkingPart) -> dict[str, Any] | None:
    """Our own reasoning as a thought part; another provider's is never sent to Gemini."""
    if part.provider != PROVIDER:
        return None
    thought: dict[str, Any] = {"text": part.text, "thought": True}
    if part.signature:
        thought["thoughtSignature"] = part.signature
    return thought


def _bare(signature: str) -> dict[str, Any]:
    """A signature with no part to sit on, as Gemini ends a stream: an empty text part."""
    return {"text": "", "thoughtSignature": signature}


_Media = tuple[frozenset[str], tuple[ToolMedia, ...]]
"""A message's media: the kinds it holds, and its tool results' media to place per model."""
_Encoded = tuple[str, tuple[dict[str, Any], ...], int, _Media | None]
"""A message's role, wire parts, the index of its first call when Gemini never signed it (-1
otherwise), and its media (None, the common case: one truth test per request)."""
_MEDIA = (ImagePart, DocumentPart, AudioPart)


def _note_media(part: Part, index: int, found: _Media | None) -> _Media:
    """Add ``part``'s media (wire part ``index``) to what the message holds so far."""
    kinds, media = found or (frozenset(), ())
    if isinstance(part, ToolResultPart):
        return kinds | {m.kind for m in part.media}, (*media, tool_media(index, part))
    assert isinstance(part, ImagePart | DocumentPart | AudioPart)
    return kinds | {part.kind}, media


def reader(model: str, route: str = "") -> str:
    """Who can read a signature: ``model``, and with ``route`` where it is served.

    ``route`` is the provider label and the endpoint (``gemini:generativelanguage.googleapis.
    com``, ``vertex:aiplatform.googleapis.com/<project>``): the same model name on the Gemini
    API and on Vertex is two readers. The form is ``<model>|<route>``.
    """
    return f"{model}|{route}" if route else model


def _unreadable(part: Part, target: str) -> bool:
    """A thought or signature (``origin``) another model or route wrote: ``target`` rejects it.

    ``target`` is ``reader(model, route)``. An origin without a route (recorded before routes
    were) or a target without one (``build_payload`` called with a model only) compares the
    model alone.
    """
    if not isinstance(part, ThinkingPart) or part.origin is None:
        return False
    if "|" in part.origin and "|" in target:
        return part.origin != target
    return part.origin.partition("|")[0] != target.partition("|")[0]


def _readable(message: Message, target: str) -> tuple[Part, ...]:
    return tuple(part for part in message.parts if not _unreadable(part, target))


def _encode_message(message: Message, model: str = "") -> _Encoded:
    """Encode one message, putting each signature-only ``ThinkingPart`` on the part after it.

    ``model``: the target's ``reader``; thoughts and signatures another model or route wrote
    are left out.
    """
    parts: list[dict[str, Any]] = []
    found: _Media | None = None
    pending: str | None = None  # a signature waiting for the part it signs
    for part in message.parts if not model else _readable(message, model):
        if isinstance(part, ThinkingPart) and not part.text:
            if part.provider == PROVIDER and part.signature:
                if pending is not None:  # two in a row: the first stands alone
                    parts.append(_bare(pending))
                pending = part.signature
            continue
        wire = _encode_part(part)
        if wire is None:
            continue
        if pending is not None:
            if "thoughtSignature" in wire:
                parts.append(_bare(pending))
            else:
                wire["thoughtSignature"] = pending
            pending = None
        if isinstance(part, _MEDIA) or (isinstance(part, ToolResultPart) and part.media):
            found = _note_media(part, len(parts), found)
        parts.append(wire)
    if pending is not None:
        parts.append(_bare(pending))
    role = "model" if message.role == "assistant" else "user"
    return role, tuple(parts), _unsigned_call(parts) if role == "model" else -1, found


def _unsigned_call(parts: list[dict[str, Any]]) -> int:
    """The index of the first ``functionCall`` when it carries no signature, else -1."""
    for index, wire in enumerate(parts):
        if "functionCall" in wire:
            return -1 if "thoughtSignature" in wire else index
    return -1


def _place_media(
    message: Message,
    kept: list[dict[str, Any]],
    media: _Media,
    profile: ModelProfile,
) -> list[dict[str, Any]]:
    """Check the kinds; nest what Gemini 3 takes in each ``functionResponse``; the rest.

    The nested ``functionResponse`` is a copy in ``kept``: the cached encoding stays as it is.
    """
    kinds, tool_media = media
    if not kinds <= profile.media:
        raise _refused(message, profile)
    nest = _nests_media(profile)
    after: list[dict[str, Any]] = []
    for item in tool_media:
        if nest and item.nested:
            wire = kept[item.index]
            response = {**wire["functionResponse"], "parts": list(item.nested)}
            kept[item.index] = {**wire, "functionResponse": response}
        after.extend(item.after if nest else item.after_all)
    return after


def _refused(message: Message, profile: ModelProfile) -> ConfigurationError:
    """The error for the first part of ``message`` whose kind ``profile`` does not list."""
    for part in message.parts:
        found = part.media if isinstance(part, ToolResultPart) else (part,)
        for media in found:
            if isinstance(media, _MEDIA):
                if media.kind not in profile.media:
                    return refuse_kind(profile.family, profile.media, media)
    raise AssertionError("a message whose kinds were refused holds such a part")  # pragma: no cover


def encode_contents(
    messages: Sequence[Message], *, sign_calls: bool = False, model: str = "", route: str = ""
) -> list[dict[str, Any]]:
    """The ``contents`` array: roles user/model, same-role neighbours merged.

    Each message is encoded once (``Message.encoded``). With ``sign_calls`` (Gemini 3), a model
    turn whose first call carries no signature gets ``BYPASS_SIGNATURE`` on a copy of that part.
    ``model`` picks the profile that says which media kinds it takes and whether a tool's media
    may go inside its ``functionResponse`` (Gemini 3); a part it cannot take is a
    ``ConfigurationError`` naming the part and the model. ``route``: where the request goes
    (``reader``): signatures written elsewhere are left out.
    """
    try:
        return _contents(messages, sign_calls, gemini_profile(model), reader(model, route))
    except ConfigurationError as exc:  # only media are refused in here, by part: add the model
        name = model or "this Gemini model"
        raise ConfigurationError(f"{name} {exc}", field=exc.field) from None


def _contents(
    messages: Sequence[Message], sign_calls: bool, profile: ModelProfile, model: str
) -> list[dict[str, Any]]:
    """``encode_contents`` for the target ``model`` (its ``reader``: model and route)."""
    out: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []  # tool media waiting for the end of the responses
    mine = partial(_encode_message, model=model)
    for message in messages:
        if message.role == "system":
            continue
        if (
            model
            and message.role == "assistant"
            and any(_unreadable(part, model) for part in message.parts)
        ):  # encoded for this model only; every other message's encoding is shared
            role, encoded, unsigned, media = message.encoded(f"{PROVIDER}@{model}", mine)
        else:
            role, encoded, unsigned, media = message.encoded(PROVIDER, _encode_message)
        if after and message.role != "tool":
            out.append({"role": "user", "parts": after})
            after = []
        if not encoded:
            continue
        kept = list(encoded)
        if unsigned >= 0 and sign_calls:
            kept[unsigned] = {**kept[unsigned], "thoughtSignature": BYPASS_SIGNATURE}
        if media is not None:
            after.extend(_place_media(message, kept, media, profile))
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(kept)
        else:
            out.append({"role": role, "parts": kept})
    if after:
        out.append({"role": "user", "parts": after})
    return out


# --- settings --------------------------------------------------------------------------------


def _tool_config(choice: str) -> dict[str, Any]:
    modes = {"auto": "AUTO", "required": "ANY", "any": "ANY", "none": "NONE"}
    if choice in modes:
        return {"functionCallingConfig": {"mode": modes[choice]}}
    return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice]}}


def _thinking_config(settings: ModelSettings) -> dict[str, Any] | None:
    """``thinkingConfig`` for the reasoning settings (the profile has already vetted them)."""
    effort, budget = settings.reasoning_effort, settings.thinking_budget
    if effort is None and budget is None:
        return None
    config: dict[str, Any] = {}
    if effort is not None:
        config["thinkingLevel"] = effort.upper()
    if budget is not None:
        config["thinkingBudget"] = budget
    if budget != 0:  # a budget of 0 turns thinking off: no thoughts to include
        config["includeThoughts"] = True
    return config


def _generation_config(settings: ModelSettings) -> dict[str, Any]:
    pairs = (
        ("temperature", settings.temperature),
        ("topP", settings.top_p),
        ("maxOutputTokens", settings.max_tokens),
        ("seed", settings.seed),
        ("stopSequences", list(settings.stop) if settings.stop else None),
    )
    config: dict[str, Any] = {key: value for key, value in pairs if value is not None}
    thinking = _thinking_config(settings)
    if thinking is not None:
        config["thinkingConfig"] = thinking
    return config


def check_tools(
    tools: Sequence[ProviderTool],
    model: str,
    *,
    functions: bool,
    profile: ModelProfile | None = None,
) -> None:
    """``ConfigurationError`` for a built-in tool ``model`` cannot take (SPEC 24)."""
    profile = profile or gemini_profile(model)
    check(tools, _builtin.WIRE, model or "this Gemini model", profile, functions=functions)


def _built_in_tools(
    payload: dict[str, Any], request: ModelRequest, model: str, profile: ModelProfile
) -> None:
    """The built-in tools beside the function declarations (Gemini 3: with the invocation flag)."""
    check_tools(request.provider_tools, model, functions=bool(request.tools), profile=profile)
    payload.setdefault("tools", []).extend(_builtin.encode_tools(request.provider_tools))
    if request.tools:
        config = payload.setdefault("toolConfig", {})
        config["includeServerSideToolInvocations"] = True


def build_payload(request: ModelRequest, model: str = "", route: str = "") -> dict[str, Any]:
    """The ``generateContent`` request body for ``request`` to ``model`` at ``route``.

    ``route`` (``reader``): the provider label and endpoint the body goes to, so a signature
    written at another route is left out.

    ``model`` (``request.model`` wins) picks the profile: a setting the model refuses is a
    ``ConfigurationError`` raised here, before anything is sent. Without a model name the
    catch-all Gemini profile applies.
    """
    request = with_tool_changes(request)  # SPEC 28: an entry's tool change joins tools
    name = (request.model or model).removeprefix("models/")
    profile = gemini_profile(name)
    check_settings(profile, name or "this Gemini model", request.settings)
    contents = encode_contents(
        tuple(request.messages),
        sign_calls=_validates_signatures(profile),
        model=name,
        route=route,
    )
    payload: dict[str, Any] = {"contents": contents}
    texts = [request.system] if request.system else []
    texts.extend(m.text for m in request.messages if m.role == "system" and m.text)
    if texts:
        payload["systemInstruction"] = {"parts": [{"text": "\n\n".join(texts)}]}
    if request.tools:
        declarations = [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in request.tools
        ]
        payload["tools"] = [{"functionDeclarations": declarations}]
    if request.settings.tool_choice is not None:
        payload["toolConfig"] = _tool_config(request.settings.tool_choice)
    if request.provider_tools:
        _built_in_tools(payload, request, name, profile)
    config = _generation_config(request.settings)
    if request.output is not None:  # native structured output (RunConfig.output_mode="native")
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = dict(request.output.schema)
    if config:
        payload["generationConfig"] = config
    if request.settings.extra_body:
        merge_body(payload, request.settings.extra_body)
    return payload
