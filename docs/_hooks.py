"""mkdocs hooks for the docs site: README.md is its home page; repository links keep their text.

``docs/index.md`` only points at the README (so it reads right on GitHub too); at build time its
text is replaced by README.md's, whose ``docs/`` links are made relative to the site. A page's
link to a repository file outside ``docs/`` (``../examples/long_run.py``) works on GitHub but
has no target in the site: there it becomes its text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"
_DOCS_LINK = re.compile(r"\]\(docs/")
_OUTSIDE_LINK = re.compile(r"\[([^\]]+)\]\(\.\./(?!README\.md\))[^)\s]+\)")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """The home page is the README; links that leave ``docs/`` become their text."""
    if page.file.src_uri == "index.md":
        markdown = _DOCS_LINK.sub("](", README.read_text(encoding="utf-8"))
    return _OUTSIDE_LINK.sub(r"\1", markdown)
