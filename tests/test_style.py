"""House rules that tools do not check: short functions in the engine, layering of imports.

The architecture (docs/architecture.md) is checked here: no import circle among our modules and
no import up the layer table, ``if TYPE_CHECKING`` imports included. An import is an edge to the
module that defines the name: ``from agentloop.x import y`` reaches ``agentloop.x.y`` when that
is a submodule, and a name a package re-exports reaches the submodule it comes from.
"""

import ast
from collections.abc import Iterator
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


def imported_names(path: Path) -> set[tuple[str, str]]:
    """``(module, name)`` of every import in ``path`` (``name`` is "" for ``import module``)."""
    package = path.relative_to(SRC.parent).with_suffix("").parts[:-1]
    tree = ast.parse(path.read_text())
    names: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names.update((module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update((alias.name, "") for alias in node.names)
    return names


def source_of(module: str) -> Path | None:
    """The file of one of our modules (``agentloop.x`` is ``x.py`` or ``x/__init__.py``)."""
    base = SRC.parent.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def defining_module(module: str, name: str) -> str:
    """Where ``from module import name`` really reaches: a submodule, or a re-export's source."""
    if not (module == "agentloop" or module.startswith("agentloop.")) or not name:
        return module
    if source_of(f"{module}.{name}") is not None:
        return f"{module}.{name}"
    path = source_of(module)
    if path is not None and path.name == "__init__.py":
        for origin, exported in imported_names(path):
            if exported == name and origin.startswith(f"{module}."):
                return defining_module(origin, name)
    return module


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``if TYPE_CHECKING`` too), resolved by ``defining_module``."""
    return {defining_module(module, name) for module, name in imported_names(path)}


def module_of(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each of our modules and the modules of ours it imports.

    A package's ``__init__`` re-exporting its own submodules is not an edge (``agentloop``'s own
    ``__init__`` re-exports from every layer and so has none).
    """
    graph: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        me = module_of(path)
        own = f"{me}." if path.name == "__init__.py" else None
        graph[me] = {
            target
            for target in imports(path)
            if target.startswith("agentloop.")
            and target != me
            and not (own and target.startswith(own))
        }
    return graph


# Imports allowed to close a circle, each (importer, imported), with a one-line reason why the
# circle is the right shape. None today: keep it that way.
CIRCLE_ALLOWANCES: set[tuple[str, str]] = {
    # agent.to_a2a(), the peers' habit (SPEC 26): imported inside the method, when called
    ("agentloop.engine.habits", "agentloop.a2a._app"),
}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_resolves_names_to_defining_modules() -> None:
    """The resolution the architecture tests rely on, on imports that exist today."""
    graph = import_graph()
    assert len(graph) > 50
    assert graph["agentloop"] == set()  # the public surface re-exports, it is not an edge
    assert "agentloop.testing.fake_wire" in graph["agentloop.testing.fake_server"]  # a submodule
    assert "agentloop.errors._base" in graph["agentloop.messages"]  # a re-exported name
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle() -> None:
    """No module imports, even for type checking, one that imports it back (directly or not)."""
    graph = import_graph()
    for importer, imported in CIRCLE_ALLOWANCES:
        graph.get(importer, set()).discard(imported)
    assert circles(graph) == []


# The layers, lowest first (docs/architecture.md): a room imports its own layer or lower ones.
# Derived from the code, not wished for: every room is listed, and a new room picks its layer.
LAYERS = {
    # 0. the leaf: every exception, importing nothing of ours
    "errors": 0,
    # 1. helpers with no knowledge of agents
    "_util": 1,
    # 2. the vocabulary: messages and the model protocol, time, cancellation, prices, transcripts
    "clock": 2,
    "cancel": 2,
    "messages": 2,
    "_tool_parts": 2,  # ToolSpec and ToolChangePart, below messages and model (SPEC 28)
    "_provider_parts": 2,  # the provider tools' transcript parts, re-exported by messages
    "provider_tools": 2,  # SPEC 24's declarations: WebSearch, CodeExecution, ...
    "media": 2,
    "_run_input": 2,  # a run's input checked and shown as a line (re-exported by messages)
    "model": 2,
    "pricing": 2,
    "transcript": 2,
    "pausing": 2,
    "batching": 2,  # what a batch run waits on (SPEC 25): BatchWait, the Waiting signal
    "_wire_text": 2,  # the text a message puts on the wire, measured (tokens re-exports it)
    # 3. public records and extension points built from those words
    "run": 3,
    "handoffs": 3,  # the public words of handoffs (the engine's side is engine/handoffs.py)
    "events": 3,
    "tools": 3,
    "_schema": 3,
    "_tool_output": 3,  # a tool's return value as text and media (tools re-exports it)
    "_plain_args": 3,  # tool arguments pydantic need not see (issue 39), beside _schema
    "_error_records": 3,  # errors and messages as records keep them (run.py re-exports)
    "hooks": 3,
    "observers": 3,
    "tokens": 3,
    "context": 3,
    # 4. pure policy over the data, and the data's persistence
    "safety": 4,
    "store": 4,
    "guardrails": 4,  # beside safety: its ready checks reuse the one redactor (safety.redact)
    "memory": 4,  # long-term memory: stores beside store/, tools screened by safety.redact
    "toolsets": 4,  # composable tool sources (SPEC 22): tools, specs and a run's context only
    "skills": 4,  # SKILL.md folders as a toolset, over toolsets
    # 5. a run's settings (the policies gathered), and the HTTP clients of the model protocol
    "config": 5,
    "providers": 5,
    "fleet": 5,  # the rate governor: under the engine, beside the clients it governs
    # 6. the engine: Agent and the private rooms of a run
    "engine": 6,
    # 7. wings that plug into the engine or wrap it
    "builtin_tools": 7,
    "mcp": 7,
    "otel": 7,
    "_otel_events": 7,
    "_otel_shapes": 7,
    "testing": 7,
    "durable": 7,
    "cassettes": 7,  # hangs on the HTTP layer's hook (providers._tape)
    "evals": 7,  # runs agents and reads their runs
    "batch": 7,  # batch runs (SPEC 25): start_many and poll drive the engine's sessions
    # 8. the terminal
    "cli": 8,
    "ui": 8,
    "a2a": 8,  # a face, beside ui: an agent served over A2A, a remote A2A agent as a tool
    "__main__": 8,
    # 9. the package's public surface: lazy re-exports from every layer
    "__init__": 9,
}

# Imports up the table, each (importer, imported) with the reason it is still there.
LAYER_ALLOWANCES: dict[tuple[str, str], str] = {
    ("agentloop.engine.habits", "agentloop.a2a._app"): (
        "agent.to_a2a(), the peers' habit: the face is imported inside the method"
    ),
}


def room(module: str) -> str:
    """``agentloop.engine.turn`` is in room ``engine``; the package's ``__init__`` is its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward_imports(graph: dict[str, set[str]]) -> Iterator[tuple[str, str]]:
    for importer, targets in sorted(graph.items()):
        for imported in sorted(targets):
            if LAYERS[room(imported)] > LAYERS[room(importer)]:
                yield importer, imported


def test_every_room_has_a_layer() -> None:
    assert {room(module) for module in import_graph()} == set(LAYERS)


def test_imports_point_down_the_layers() -> None:
    upward = [edge for edge in upward_imports(import_graph()) if edge not in LAYER_ALLOWANCES]
    assert upward == []


def test_the_layer_allowances_are_still_needed() -> None:
    """An allowance whose import is gone goes too: the list only shrinks."""
    upward = set(upward_imports(import_graph()))
    assert [edge for edge in LAYER_ALLOWANCES if edge not in upward] == []


def test_the_engine_never_imports_durable() -> None:
    """``durable/`` wraps the engine (journals, workflows); the engine knows nothing of it."""
    graph = import_graph()
    engine = [m for m in graph if room(m) == "engine"]
    assert len(engine) > 10
    assert [(m, t) for m in engine for t in sorted(graph[m]) if room(t) == "durable"] == []


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
    for path in (SRC / "providers").rglob("*.py"):
        # the transport, its failures and its SSE reader
        if path.name not in ("_http.py", "_http_errors.py", "_sse_stream.py"):
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
