"""Every code block of README.md and docs/*.md runs as written, so the docs cannot rot.

Each ```python block is its own script: it is written to a file and run by a fresh interpreter
in an empty working directory (a page's blocks share one, in page order, so a later block may
read what an earlier one stored), with no provider keys in the environment. A block that needs an
event loop says so itself (``asyncio.run(main())``); top-level ``await`` is a ``SyntaxError``
here, as it is in a script. A block may import only public names: no ``agentloop._x`` module and
no ``_name`` from an agentloop module. ```json and ```toml blocks must parse. Anything not meant
to run is fenced as ``text``; an untagged fence is an error (it would skip a block silently).
New pages are picked up by the glob: nothing here lists them.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/*.md"))]
FENCE = re.compile(r"^```(\S*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
TAGS = {"python", "text", "sh", "json", "toml"}
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY")
BLOCK_TIMEOUT = 60.0


def blocks(page: str, tag: str | None = None) -> list[tuple[int, str, str]]:
    """(first line of the body, tag, source) of every fenced block of ``page``."""
    text = (ROOT / page).read_text(encoding="utf-8")
    found = [
        (text.count("\n", 0, m.start()) + 2, m.group(1), m.group(2)) for m in FENCE.finditer(text)
    ]
    return [b for b in found if tag is None or b[1] == tag]


def _fenced(tag: str) -> list[Any]:
    return [
        pytest.param(page, line, source, id=f"{page}:{line}")
        for page in PAGES
        for line, _, source in blocks(page, tag)
    ]


def private_imports(source: str) -> list[str]:
    """The private agentloop names ``source`` imports or reaches (``agentloop._x``, ``_name``)."""

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            found += [m for m in modules if m.split(".")[0] == "agentloop"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "agentloop":
            found += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute) and _from_agentloop(node.value):
            found.append(f"agentloop...{node.attr}")
    return [name for name in found if any(map(private, name.split("."))) or in_a_room(name)]


# Packages whose modules are private rooms (docs/architecture.md): import from the package.
ROOMS = ("agentloop.engine.", "agentloop.cli.", "agentloop.mcp.", "agentloop.testing.")


def in_a_room(name: str) -> bool:
    """True for ``agentloop.engine.turn`` (a room), false for ``agentloop.testing.X`` (a name)."""
    if not name.startswith(ROOMS):
        return False
    package, _, rest = name.partition(".")[2].partition(".")
    module = rest.split(".")[0]
    return (ROOT / "src" / "agentloop" / package / f"{module}.py").exists()


def _from_agentloop(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "agentloop"


def run_script(source: str, line: int, page: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``source`` as a script; padding keeps traceback line numbers equal to the page's."""
    script = cwd / f"{page.replace('/', '_')}.py"
    script.write_text("\n" * (line - 1) + source, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_KEYS}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run_as_scripts(page: str, tmp_path: Path) -> None:
    """Each block is its own script; a page's blocks share one directory, in page order."""
    failures = []
    for line, _, source in blocks(page, "python"):
        if private := private_imports(source):
            failures.append(f"{page}:{line} uses private names: {', '.join(private)}")
            continue
        done = run_script(source, line, page, tmp_path)
        if done.returncode != 0:
            failures.append(f"{page}:{line} failed:\n{done.stderr}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(("page", "line", "source"), _fenced("json"))
def test_json_block_parses(page: str, line: int, source: str) -> None:
    json.loads(source)


@pytest.mark.parametrize(("page", "line", "source"), _fenced("toml"))
def test_toml_block_parses(page: str, line: int, source: str) -> None:
    tomllib.loads(source)


@pytest.mark.parametrize("page", PAGES)
def test_every_fence_is_tagged(page: str) -> None:
    """An untagged fence would silently skip a block: tag it ``python``, ``text``, ..."""
    tags = {tag for _, tag, _ in blocks(page)}
    assert tags <= TAGS, (page, tags - TAGS)


def test_the_private_import_check() -> None:
    assert private_imports("from agentloop.testing.fake_server import FakeProviderServer")
    assert private_imports("import agentloop.engine.turn")
    assert private_imports("from agentloop.cli.commands import _fault_list")
    assert private_imports("import agentloop\nagentloop.testing._Base")
    assert not private_imports("from __future__ import annotations\nimport os\nos._exit")
    assert not private_imports("from agentloop.testing import FakeProviderServer")


def test_printed_output_matches_the_page(tmp_path: Path) -> None:
    """The seed-002 example prints exactly what errors.md says it prints."""
    text = (ROOT / "docs/errors.md").read_text(encoding="utf-8")
    line, _, source = next(b for b in blocks("docs/errors.md", "python") if "build_client" in b[2])
    expected = re.search(re.escape(source) + r"```\n\n```text\n(.*?)```", text, re.DOTALL)
    assert expected is not None
    done = run_script(source, line, "docs/errors.md", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected.group(1)


def test_the_fake_server_scripts_load_and_agree() -> None:
    """The example script of fake-server.md is a real one, the same in TOML and in JSON."""
    from agentloop.testing import load_fake_script

    page = "docs/fake-server.md"
    [(_, _, toml_source)] = blocks(page, "toml")
    [(_, _, json_source)] = blocks(page, "json")
    parsed = load_fake_script(tomllib.loads(toml_source))
    assert parsed == load_fake_script(json.loads(json_source))
    assert len(parsed.steps) == 5 and parsed.models == ("fake-model",)
