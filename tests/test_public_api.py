"""The public API, pinned: ``agentloop.__all__`` and the ``__all__`` of every documented module.

``API`` is the top-level surface as a sorted literal: adding or removing a name is a change to
this file, on purpose. Each name must import from ``agentloop`` and be documented where it lives:
a module the API reference renders (a ``::: module`` line in ``docs/api/*.md``) lists it in its
``__all__``. Every public module is in the reference (the CLI is a command, in ``docs/cli.md``),
and every documented module's ``__all__`` is isort-sorted (ruff's RUF022 order: constants,
classes, the rest), without duplicates, each name importable.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

import agentloop

ROOT = Path(__file__).parent.parent
SRC = ROOT / "src" / "agentloop"

API = [
    "Agent",
    "AgentLoopError",
    "Allow",
    "Answer",
    "Approve",
    "Ask",
    "BatchWait",
    "Block",
    "Budget",
    "CancelToken",
    "ConversationSummary",
    "Deny",
    "Edit",
    "FallbackClient",
    "Hook",
    "Message",
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Observer",
    "PendingCall",
    "PolicyHook",
    "RetryingClient",
    "Run",
    "RunConfig",
    "RunContext",
    "Session",
    "Settings",
    "StreamEvent",
    "TextPart",
    "Tool",
    "ToolCallPart",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "ToolResultPart",
    "Turn",
    "Usage",
    "build_client",
    "handoff",
    "tool",
]

# SPEC section 2: the top-level exports every release has (at least).
SPEC_TOP_LEVEL = {
    "Agent", "RunConfig", "Run", "Turn", "ConversationSummary", "CancelToken", "tool", "Tool",
    "ToolRegistry", "ToolContext", "ToolOutput", "Settings", "build_client", "RetryingClient",
    "FallbackClient", "ModelSettings",
}  # fmt: skip

NOT_IN_THE_REFERENCE = {"agentloop.cli"}  # a command: docs/cli.md
# Packages whose modules are private rooms: the package re-exports its public names
# (docs/architecture.md), so the package is what the reference renders.
ROOMS = (
    "agentloop.engine.",
    "agentloop.cli.",
    "agentloop.mcp.",
    "agentloop.testing.",
    "agentloop.providers.openai.",
    "agentloop.providers.anthropic.",
    "agentloop.providers.gemini.",
    "agentloop.providers.bedrock.",
    "agentloop.providers.vertex.",
)


def documented_modules() -> list[str]:
    """The modules the API reference renders, in page order."""
    found = []
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        found += re.findall(r"^:::\s+([\w.]+)\s*$", page.read_text(), flags=re.MULTILINE)
    return found


def public_modules() -> list[str]:
    """Every module under src/agentloop without a private (``_``) part in its dotted name."""
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if not any(part.startswith("_") for part in parts) and not name.startswith(ROOMS):
            names.append(name)
    return names


def load(name: str) -> ModuleType:
    """Import a documented module; skip when an optional extra it needs is not installed."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("agentloop"):
            pytest.skip(f"{name} needs {exc.name} (an optional extra)")
        raise


def isort_key(name: str) -> tuple[int, list[int | str]]:
    """RUF022's order: SCREAMING_SNAKE_CASE, then CamelCase, then the rest; natural within."""
    bare = name.lstrip("_")
    group = 0 if bare.isupper() else 1 if bare[:1].isupper() else 2
    natural = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]
    return group, natural


def test_the_top_level_api_is_pinned_and_sorted() -> None:
    assert sorted(API) == API
    assert agentloop.__all__ == API
    assert sorted(agentloop.__all__, key=isort_key) == agentloop.__all__


def test_the_spec_names_are_exported() -> None:
    assert SPEC_TOP_LEVEL <= set(API)


def test_every_top_level_name_imports_and_is_listed_in_dir() -> None:
    namespace: dict[str, object] = {}
    exec("from agentloop import *", namespace)  # the star import is what is checked
    assert set(API) <= set(namespace)
    assert set(API) <= set(dir(agentloop))


@pytest.mark.parametrize("name", API)
def test_each_top_level_name_is_documented_where_it_lives(name: str) -> None:
    value = getattr(agentloop, name)
    documented = set(documented_modules())
    module = value.__module__
    homes = []
    while module:  # agentloop.errors._base -> agentloop.errors
        if module in documented and module != "agentloop":
            home = importlib.import_module(module)
            if name in getattr(home, "__all__", ()) and getattr(home, name) is value:
                homes.append(module)
        module = module.rpartition(".")[0]
    assert homes, f"{name} ({value.__module__}) is in no documented module's __all__"


def test_every_public_module_is_in_the_api_reference() -> None:
    documented = documented_modules()
    assert len(documented) == len(set(documented)), "a module documented twice"
    assert set(public_modules()) - NOT_IN_THE_REFERENCE == set(documented)


@pytest.mark.parametrize("name", documented_modules())
def test_each_documented_module_has_a_sorted_importable_all(name: str) -> None:
    module = load(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list), f"{name} has no __all__ list"
    assert len(exported) == len(set(exported)), f"{name}.__all__ has duplicates"
    assert sorted(exported, key=isort_key) == exported
    assert [attribute for attribute in exported if not hasattr(module, attribute)] == []
