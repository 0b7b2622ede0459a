"""The README is the map a newcomer reads first: every page of docs/ is in its table, every
command of the CLI in its command-line block."""

from __future__ import annotations

import re
from pathlib import Path

from agentloop.cli.commands import _parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    """The README's text under ``## title``, up to the next heading of that level."""
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_every_docs_page_is_in_the_documentation_table() -> None:
    rows = [line for line in section("Documentation").splitlines() if line.startswith("| [")]
    linked = {m.group(1) for row in rows if (m := re.match(r"\| \[[^]]+\]\((docs/[^)#]+)\)", row))}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")} - {"docs/index.md"}
    assert pages - linked == set()  # index.md is the README itself on the docs site
    assert linked - pages == set()


def test_the_command_line_block_names_every_command() -> None:
    block = section("Command line").split("```text\n", 1)[1].split("```", 1)[0]
    subcommands = next(a for a in _parser()._actions if a.dest == "command").choices
    assert subcommands  # demo, fake-server, run, continue, runs, ui
    missing = [name for name in subcommands if f"agentloop {name}" not in block]
    assert missing == []
