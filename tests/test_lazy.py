"""The lazy exports of ``agentloop`` and ``agentloop.providers`` (``agentloop._util.lazy``)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import agentloop
import agentloop.providers
import agentloop.safety
import agentloop.store

PACKAGES = [agentloop, agentloop.providers, agentloop.safety, agentloop.store]


def table(package: ModuleType) -> dict[str, str]:
    """The package's lazy names and their modules."""
    found: dict[str, str] = vars(package).get("_EXPORTS") or vars(package)["_LAZY"]
    return found


def type_checking_imports(module: ModuleType) -> dict[str, str]:
    """Name -> module of every ``from m import name`` under the package's ``if TYPE_CHECKING``."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module
                found.update({alias.name: statement.module for alias in statement.names})
    return found


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_every_public_name_resolves_to_its_definition(package: ModuleType) -> None:
    for name in package.__all__:
        value = getattr(package, name)
        home = table(package).get(name) or value.__module__
        assert getattr(importlib.import_module(home), name) is value, name


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_mypy_sees_exactly_the_lazy_names(package: ModuleType) -> None:
    """The ``TYPE_CHECKING`` imports name the same modules as the runtime table."""
    assert type_checking_imports(package) == table(package)
    assert set(table(package)) <= set(package.__all__)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_dir_lists_every_public_name(package: ModuleType) -> None:
    assert set(package.__all__) <= set(dir(package))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_an_unknown_name_is_an_attribute_error(package: ModuleType) -> None:
    with pytest.raises(
        AttributeError, match=f"module '{package.__name__}' has no attribute 'Nope'"
    ):
        getattr(package, "Nope")  # noqa: B009


def test_the_all_list_is_sorted() -> None:
    assert agentloop.__all__ == sorted(agentloop.__all__)


def test_the_providers_load_one_safety_module_and_no_pydantic() -> None:
    code = (
        "import sys, agentloop.providers\n"
        "print('pydantic' in sys.modules, 'agentloop.safety.reflector' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False False"


def test_the_engine_does_not_load_a_store_backend() -> None:
    code = "import sys, agentloop.engine; print('agentloop.store.sqlite' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_import_agentloop_imports_no_heavy_dependency() -> None:
    code = (
        "import sys, agentloop\n"
        "print(sorted(m for m in ('asyncio', 'pydantic', 'aiohttp') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


FIRST_LINE = """
import sys
from agentloop import Agent, tool

class Client:
    model = "m"
    provider = "p"
    async def complete(self, request): ...

@tool
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return key

agent = Agent(Client(), tools=[lookup])
heavy = ("agentloop.store", "agentloop.durable", "agentloop.mcp", "agentloop.otel",
         "agentloop.ui", "rich", "mcp", "opentelemetry", "aiohttp")
print(sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + "." for h in heavy))))
events = sys.modules.get("agentloop.events")
print(events is None or type(events).__name__ == "_LazyModule")
"""


def test_a_first_agent_imports_no_store_durable_mcp_otel_ui_or_rich() -> None:
    """Issue 26: ``from agentloop import Agent, tool`` and one agent with one tool load none of
    the optional rooms, and the event classes only once somebody listens."""
    done = subprocess.run(
        [sys.executable, "-c", FIRST_LINE], capture_output=True, text=True, check=True
    )
    assert done.stdout.split("\n")[:2] == ["[]", "True"]


def test_star_import_binds_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from agentloop import *", namespace)
    assert set(agentloop.__all__) <= set(namespace)


def test_a_public_submodule_loads_on_access_as_it_did_when_imported_eagerly() -> None:
    code = (
        "import agentloop, agentloop.safety, agentloop.store\n"
        "print(agentloop.errors.ToolError.__name__, agentloop.safety.loops.__name__,"
        " agentloop.store.sqlite.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["ToolError", "agentloop.safety.loops", "agentloop.store.sqlite"]


def test_a_submodule_missing_its_extra_is_an_attribute_error() -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "import agentloop\n"
        "print(hasattr(agentloop, 'otel'), hasattr(agentloop, '_turn'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False False"
