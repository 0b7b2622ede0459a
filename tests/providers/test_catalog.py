"""The providers table of docs/providers.md is the profile table's (SPEC 24, issue 33).

The table between the ``provider-table`` markers must be what ``provider_table()`` makes from
``profiles.profile_for``; when a profile or a provider changes, this test fails and prints the
new table to paste.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agentloop.providers._catalog import provider_table
from agentloop.providers.settings import PROVIDERS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "providers.md"
START, END = "<!-- provider-table:start -->\n", "<!-- provider-table:end -->"


def test_the_page_table_is_the_profile_table() -> None:
    text = PAGE.read_text(encoding="utf-8")
    shown = text.split(START, 1)[1].split(END, 1)[0]
    made = provider_table()
    assert shown == made, f"docs/providers.md's table is stale; paste this one:\n\n{made}"


def test_every_provider_has_a_row() -> None:
    rows = provider_table().splitlines()[2:]
    assert {row.split(" | ")[0].lstrip("| ") for row in rows} == set(PROVIDERS)


def test_import_agentloop_loads_neither_botocore_nor_google_auth() -> None:
    code = (
        "import sys, agentloop, agentloop.providers\n"
        "from agentloop.providers import Settings, build_client\n"
        "import agentloop.providers.bedrock, agentloop.providers.vertex\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] == 'botocore'"
        " or m.startswith('google.auth')]\n"
        "print(loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
