"""Tools the provider runs on its own servers: web search, code execution, web fetch, file search.

SPEC 24. A declaration names what the model may use; the adapter of each wire writes its own
form (Anthropic ``web_search_20250305``..., the Responses API's ``web_search``/
``code_interpreter``/``file_search``, Gemini's ``google_search``/``code_execution``/
``url_context``). Nothing runs on our side: the server's calls and results come back as
``ProviderToolCallPart``/``ProviderToolResultPart`` on the assistant message.

Everything is checked where it is made (``ConfigurationError``, never at the first request):

- ``max_uses``/``max_results``: an int >= 1 (a bool is not one);
- ``allowed_domains`` and ``blocked_domains`` not both; a domain is a bare host (``example.com``,
  ``docs.example.com/path`` is refused: no scheme, no path);
- ``UserLocation.country``: two letters (ISO 3166-1 alpha-2);
- ``FileSearch``: at least one vector store id.

``checked_provider_tools`` is what ``Agent(provider_tools=...)`` runs: one tool per kind, and no
function tool named like a provider tool's wire name. What a provider or a model cannot take is
the adapter's check (``ConfigurationError(field="provider_tools")``, before any request).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import field
from typing import Any, ClassVar, Literal, TypeAlias

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError

__all__ = [
    "KINDS",
    "WIRE_NAMES",
    "CodeExecution",
    "FileSearch",
    "ProviderTool",
    "ProviderToolKind",
    "UserLocation",
    "WebFetch",
    "WebSearch",
    "check_client",
    "checked_provider_tools",
    "options_of",
]

ProviderToolKind: TypeAlias = Literal["web_search", "code_execution", "web_fetch", "file_search"]
KINDS: tuple[ProviderToolKind, ...] = ("web_search", "code_execution", "web_fetch", "file_search")
"""Every provider tool kind, in the order the docs list them."""

WIRE_NAMES: dict[str, frozenset[str]] = {
    "web_search": frozenset({"web_search", "google_search"}),
    "code_execution": frozenset({"code_execution", "code_interpreter"}),
    "web_fetch": frozenset({"web_fetch", "url_context"}),
    "file_search": frozenset({"file_search"}),
}
"""Each kind's names on the wires: a function tool may not take one of a declared kind."""

_FIELD = "provider_tools"
_DOMAIN = re.compile(r"^(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::\d+)?$")


def _bad(message: str) -> ConfigurationError:
    return ConfigurationError(message, field=_FIELD)


def _count(owner: str, name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(f"{owner}.{name} must be an int >= 1 (or None), got {value!r}")


def _domains(owner: str, name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raise _bad(f"{owner}.{name} must be a list of domains, got the string {value!r}")
    if not isinstance(value, Iterable):
        raise _bad(f"{owner}.{name} must be a list of domains, got {value!r}")
    domains = tuple(value)
    for domain in domains:
        if not isinstance(domain, str) or "://" in domain or "/" in domain:
            raise _bad(
                f"{owner}.{name}: {domain!r} is not a bare domain; write 'example.com' "
                "(no scheme, no path)"
            )
        if not _DOMAIN.match(domain):
            raise _bad(f"{owner}.{name}: {domain!r} is not a domain (e.g. 'example.com')")
    return domains


def _filters(owner: str, tool: Any) -> None:
    allowed = _domains(owner, "allowed_domains", tool.allowed_domains)
    blocked = _domains(owner, "blocked_domains", tool.blocked_domains)
    if allowed and blocked:
        raise _bad(
            f"{owner} takes allowed_domains or blocked_domains, not both "
            "(no provider accepts the two together)"
        )
    object.__setattr__(tool, "allowed_domains", allowed)
    object.__setattr__(tool, "blocked_domains", blocked)


@record(kw_only=True)
class UserLocation:
    """Where the user roughly is, to localise web search results (every field optional)."""

    city: str | None = None
    region: str | None = None
    country: str | None = None
    """Two letters, ISO 3166-1 alpha-2 (``"GB"``)."""
    timezone: str | None = None
    """An IANA time zone (``"Europe/London"``)."""

    def __post_init__(self) -> None:
        for name in ("city", "region", "country", "timezone"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise _bad(f"UserLocation.{name} must be a str, got {value!r}")
        country = self.country
        if country is not None and not (len(country) == 2 and country.isalpha()):
            raise _bad(
                f"UserLocation.country must be two letters (ISO 3166-1, e.g. 'US'), got {country!r}"
            )

    def to_dict(self) -> dict[str, str]:
        """The fields that are set."""
        data = {"city": self.city, "region": self.region, "country": self.country}
        data["timezone"] = self.timezone
        return {k: v for k, v in data.items() if v is not None}


class ProviderTool:
    """A tool the provider runs on its servers; ``kind`` names it across providers."""

    __slots__ = ()
    kind: ClassVar[ProviderToolKind]

    def deferred(self) -> ProviderTool:
        """Refused: the provider runs it, so it cannot be loaded later by tool search."""
        raise _bad(f"a provider tool ({self.kind}) cannot be deferred: the provider runs it")

    def approval_required(self, fn: object = None) -> ProviderTool:
        """Refused: the provider runs it at once, so nobody could approve a call first."""
        raise _bad(
            f"a provider tool ({self.kind}) cannot require approval: the provider runs it "
            "before agentloop sees the call"
        )


@record(kw_only=True)
class WebSearch(ProviderTool):
    """Let the model search the web (Anthropic, OpenAI Responses, Gemini).

    ``max_uses`` caps searches per request (Anthropic); ``allowed_domains`` or
    ``blocked_domains`` narrow them; ``user_location`` localises the results.
    """

    kind: ClassVar[ProviderToolKind] = "web_search"
    max_uses: int | None = None
    allowed_domains: Sequence[str] = ()
    blocked_domains: Sequence[str] = ()
    user_location: UserLocation | None = None

    def __post_init__(self) -> None:
        _count("WebSearch", "max_uses", self.max_uses)
        _filters("WebSearch", self)
        location = self.user_location
        if location is not None and not isinstance(location, UserLocation):
            raise _bad(f"WebSearch.user_location must be a UserLocation, got {location!r}")


@record(kw_only=True)
class CodeExecution(ProviderTool):
    """Let the model run code in the provider's sandbox (Anthropic, OpenAI Responses, Gemini)."""

    kind: ClassVar[ProviderToolKind] = "code_execution"


@record(kw_only=True)
class WebFetch(ProviderTool):
    """Let the model read a web page by URL (Anthropic ``web_fetch``, Gemini ``url_context``)."""

    kind: ClassVar[ProviderToolKind] = "web_fetch"
    max_uses: int | None = None
    allowed_domains: Sequence[str] = ()
    blocked_domains: Sequence[str] = ()

    def __post_init__(self) -> None:
        _count("WebFetch", "max_uses", self.max_uses)
        _filters("WebFetch", self)


@record
class FileSearch(ProviderTool):
    """Let the model search your OpenAI vector stores (OpenAI Responses only)."""

    kind: ClassVar[ProviderToolKind] = "file_search"
    vector_store_ids: Sequence[str]
    max_results: int | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        ids = self.vector_store_ids
        if isinstance(ids, str):
            ids = (ids,)
        if not isinstance(ids, Iterable):
            raise _bad(f"FileSearch.vector_store_ids must be a list of ids, got {ids!r}")
        ids = tuple(ids)
        if not ids or not all(isinstance(i, str) and i for i in ids):
            raise _bad(
                "FileSearch needs at least one vector store id: FileSearch(['vs_...'])"
                f", got {self.vector_store_ids!r}"
            )
        object.__setattr__(self, "vector_store_ids", ids)
        _count("FileSearch", "max_results", self.max_results)


_DEFAULTS: dict[str, object] = {
    "max_uses": None,
    "allowed_domains": (),
    "blocked_domains": (),
    "user_location": None,
    "max_results": None,
}


def options_of(tool: ProviderTool) -> tuple[str, ...]:
    """The options ``tool`` sets (a field away from its default), in field order."""
    names = [n for n in _DEFAULTS if hasattr(tool, n) and getattr(tool, n) != _DEFAULTS[n]]
    return tuple(names)


def checked_provider_tools(
    tools: Iterable[object], function_names: Iterable[str] = ()
) -> tuple[ProviderTool, ...]:
    """``Agent(provider_tools=...)`` as a tuple, checked (``ConfigurationError``).

    Refused: something that is not a ``ProviderTool``, a kind twice, and a function tool whose
    name is a provider tool's wire name (the model could not tell them apart).
    """
    if isinstance(tools, ProviderTool):
        tools = (tools,)
    if isinstance(tools, str) or not isinstance(tools, Iterable):
        raise _bad(f"provider_tools must be a list of provider tools, got {tools!r}")
    checked: list[ProviderTool] = []
    for tool in tools:
        if not isinstance(tool, ProviderTool):
            raise _bad(
                f"provider_tools takes WebSearch(), CodeExecution(), WebFetch() or "
                f"FileSearch([...]), got {tool!r}"
            )
        if any(t.kind == tool.kind for t in checked):
            raise _bad(f"provider tool {tool.kind!r} is declared twice; declare each kind once")
        checked.append(tool)
    taken = frozenset().union(*(WIRE_NAMES[t.kind] for t in checked))
    clash = sorted(taken.intersection(function_names))
    if clash:
        raise _bad(
            f"function tool {clash[0]!r} has the name of a provider tool; rename it "
            "(the model could not tell the two apart)"
        )
    return tuple(checked)


def check_client(client: object, tools: Sequence[ProviderTool], *, functions: bool) -> None:
    """Raise ``ConfigurationError`` unless ``client`` takes every one of ``tools``.

    A client says so with ``check_provider_tools(tools, functions)`` (each adapter from its
    profile; ``FallbackClient`` asks every model; the test doubles take all); a wrapper without
    one answers for the client it wraps (``inner``). A client that says nothing cannot be
    trusted to send them: refused (fails closed), never dropped. ``functions``: function tools
    (``final_result`` included) go beside them.
    """
    current = client
    for _ in range(8):
        check = getattr(current, "check_provider_tools", None)
        if check is not None:
            check(tools, functions)
            return
        current = getattr(current, "inner", None)
        if current is None:
            break
    kinds = ", ".join(t.kind for t in tools)
    named = f"{getattr(client, 'provider', '?')} ({getattr(client, 'model', '?')})"
    raise _bad(
        f"{named} cannot take provider tools ({kinds}): {type(client).__name__} has no "
        "check_provider_tools(tools, functions); use a provider client (anthropic, openai with "
        "api='responses', gemini) or give yours that method"
    )
