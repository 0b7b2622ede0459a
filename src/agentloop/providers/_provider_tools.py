"""Which provider tools a wire and a model take (SPEC 24): one check every adapter runs.

Each adapter states what its wire has (``Wire``: the kinds and, per kind, the options it can
write) and asks ``check`` before it builds a request, and again when an agent is made
(``check_provider_tools`` on the client). Whatever it cannot write is a
``ConfigurationError(field="provider_tools")`` naming the kind, the option and the model, before
anything is sent: never dropped. The model's profile narrows the kinds (``provider_tools``) and
says whether they may go beside function tools (``provider_tools_with_functions``: Gemini 2.x
answers 400 "Tool use with function calling is unsupported").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError
from agentloop.provider_tools import ProviderTool, options_of
from agentloop.providers.profiles import ModelProfile

__all__ = ["Wire", "check", "refuse", "refuse_all"]

_FIELD = "provider_tools"
_CLASS = {
    "web_search": "WebSearch",
    "code_execution": "CodeExecution",
    "web_fetch": "WebFetch",
    "file_search": "FileSearch",
}
_ELSEWHERE = {
    "file_search": "FileSearch runs on OpenAI's Responses API only",
    "web_fetch": "WebFetch runs on Anthropic and Gemini",
}


@record
class Wire:
    """What one wire can write: ``options[kind]`` are the options it has a field for."""

    label: str
    options: Mapping[str, frozenset[str]]
    fix: str = ""
    """What to do instead when the wire has no provider tools at all (e.g. ``api="responses"``)."""


def refuse(message: str) -> ConfigurationError:
    """The ``ConfigurationError`` of a provider tool that cannot be sent."""
    return ConfigurationError(message, field=_FIELD)


def refuse_all(tools: Sequence[ProviderTool], label: str, model: str, fix: str) -> None:
    """For a wire without provider tools (Bedrock Converse, ...): the first one is refused."""
    if tools:
        check(tools, Wire(label, {}, fix), model, ModelProfile(label), functions=False)


def check(
    tools: Sequence[ProviderTool],
    wire: Wire,
    model: str,
    profile: ModelProfile,
    *,
    functions: bool,
) -> None:
    """Raise ``ConfigurationError`` for the first of ``tools`` that ``wire``/``model`` lacks."""
    for tool in tools:
        kind, name = tool.kind, _CLASS[tool.kind]
        allowed = wire.options.get(kind)
        if allowed is None:
            why = _ELSEWHERE.get(kind, "")
            if not wire.options:
                why = wire.fix or f"{wire.label} has no provider tools"
            raise refuse(f"{name} ({kind}) is not available on {wire.label} for {model}: {why}")
        if profile.provider_tools is not None and kind not in profile.provider_tools:
            raise refuse(f"{model} ({profile.family}) cannot use {name} ({kind}) on {wire.label}")
        for option in options_of(tool):
            if option not in allowed:
                raise refuse(
                    f"{name}.{option} is not available on {wire.label} for {model}: "
                    f"leave it unset there"
                )
    if tools and functions and not profile.provider_tools_with_functions:
        raise refuse(
            f"{model} ({profile.family}) cannot use provider tools beside function tools "
            "(final_result included): use a Gemini 3 model, or an agent with provider tools only"
        )
