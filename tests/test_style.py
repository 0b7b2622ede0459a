"""House rules that tools do not check: short functions in the engine, layering of imports."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src" / "agentloop"
ENGINE_MODULES = sorted(
    str(p.relative_to(SRC)) for p in (SRC / "engine").glob("*.py") if p.name != "__init__.py"
)


def functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


@pytest.mark.parametrize("module", ENGINE_MODULES)
def test_no_function_over_50_lines_in_the_engine(module: str) -> None:
    long = [(name, n) for name, n in functions(SRC / module) if n > 50]
    assert long == []


def test_no_module_over_500_lines() -> None:
    """One concept per module (aim for 400 lines): none of ours passes 500, and none is exempt."""
    sizes = {str(p.relative_to(SRC)): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}
    assert len(sizes) > 50  # the walk found the package
    assert {module: n for module, n in sizes.items() if n > 500} == {}


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``if TYPE_CHECKING`` too), relative imports resolved."""
    package = path.relative_to(SRC.parent).with_suffix("").parts[:-1]
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            if node.module:
                names.add(".".join([*base, node.module]))
            else:  # from . import x
                names.update(".".join([*base, alias.name]) for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_errors_is_a_leaf() -> None:
    """``agentloop.errors`` imports nothing of ours outside itself, not even for type checking."""
    modules = sorted((SRC / "errors").glob("*.py"))
    assert modules
    for path in modules:
        ours = {n for n in imports(path) if n == "agentloop" or n.startswith("agentloop.")}
        assert all(n.startswith("agentloop.errors") for n in ours), (path.name, ours)


@pytest.mark.parametrize(
    "module",
    [*ENGINE_MODULES, "run.py", "cancel.py", "hooks.py", "observers.py", "context.py", "tokens.py"],
)
def test_the_engine_never_imports_providers_or_aiohttp(module: str) -> None:
    names = imports(SRC / module)
    assert not any(n.startswith(("agentloop.providers", "aiohttp", "rich")) for n in names)


def test_safety_is_pure_logic() -> None:
    for path in (SRC / "safety").glob("*.py"):
        names = imports(path)
        assert not any(n.startswith(("agentloop.providers", "aiohttp", "rich")) for n in names), (
            path
        )


def test_only_http_module_imports_aiohttp_in_providers() -> None:
    for path in (SRC / "providers").glob("*.py"):
        if path.name != "_http.py":
            assert not any(n.startswith("aiohttp") for n in imports(path)), path


def test_import_agentloop_does_not_import_aiohttp() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentloop, agentloop.testing, agentloop.providers\n"
        "print('aiohttp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
