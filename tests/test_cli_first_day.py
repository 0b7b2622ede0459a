"""What a newcomer meets first: ``--help``, a mistyped provider, a face whose extra is missing.

The missing extra is real, not patched: a subprocess starts with a ``sitecustomize`` that puts
a finder first on ``sys.meta_path`` refusing the hidden packages as an absent one is refused
(``ModuleNotFoundError`` naming it), so the check sees what a user without the extra sees.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentloop.cli.commands import _parser, main

SRC = Path(__file__).resolve().parents[1] / "src"

BLOCKER = '''
import os
import sys

HIDDEN = frozenset(os.environ["HIDE_PACKAGES"].split(","))


class Hide:
    """Refuse the hidden top-level packages, as an interpreter without them does."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Hide())
'''


def without(packages: str, code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` in an interpreter where ``packages`` (comma-separated) are gone."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{SRC}", "HIDE_PACKAGES": packages}
    command = [sys.executable, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)


# -- the ui extra --------------------------------------------------------------------------------

IMPORTS = ["agentloop.ui.ag_ui", "agentloop.ui.vercel", "agentloop.ui.viewer"]


@pytest.mark.parametrize("module", IMPORTS)
def test_importing_a_face_without_the_ui_extra_says_what_to_install(
    module: str, tmp_path: Path
) -> None:
    code = f"""
try:
    import {module}
except ImportError as error:
    assert isinstance(error, ModuleNotFoundError), type(error)
    print(type(error).__name__, error.name, error, sep="|")
"""
    done = without("starlette", code, tmp_path)
    assert done.returncode == 0, done.stderr
    kind, name, message = done.stdout.strip().split("|")
    assert (kind, name) == ("MissingExtra", "starlette")
    assert "pip install 'agentloop[ui]'" in message and "starlette" in message


def test_the_ag_ui_types_missing_say_the_same(tmp_path: Path) -> None:
    done = without("ag_ui", "import agentloop.ui.ag_ui", tmp_path)
    assert done.returncode == 1
    assert "MissingExtra: agentloop.ui needs the 'ui' extra (ag_ui not installed)" in done.stderr
    assert "pip install 'agentloop[ui]'" in done.stderr


@pytest.mark.parametrize("packages", ["starlette", "uvicorn", "starlette,uvicorn,ag_ui"])
def test_agentloop_ui_without_the_extra_exits_2_with_the_command(
    packages: str, tmp_path: Path
) -> None:
    code = "import sys; from agentloop.cli import main; sys.exit(main(['ui', '--store', 'x.db']))"
    done = without(packages, code, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("agentloop: agentloop ui needs the 'ui' extra (")
    assert done.stderr.rstrip().endswith("pip install 'agentloop[ui]'")
    assert packages.split(",")[0] in done.stderr


def test_with_the_extra_the_faces_import() -> None:
    import agentloop.ui.ag_ui
    import agentloop.ui.vercel
    import agentloop.ui.viewer

    apps = [agentloop.ui.ag_ui.AGUIApp, agentloop.ui.vercel.VercelAIApp]
    assert [app.__name__ for app in [*apps, agentloop.ui.viewer.ViewerApp]] == [
        "AGUIApp",
        "VercelAIApp",
        "ViewerApp",
    ]


# -- --help ---------------------------------------------------------------------------------------


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every command line that has a ``--help``: the top one, each subcommand, theirs."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


@pytest.mark.parametrize("command", list(commands(_parser())), ids=" ".join)
def test_help_is_plain_text(command: tuple[str, ...]) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    text = out.getvalue()
    assert "usage: agentloop" in text
    assert "``" not in text, text


def test_the_top_help_quotes_the_commands_it_names() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(out.getvalue().split())
    assert "'agentloop ui' serves the run viewer" in text and "(the 'ui' extra)" in text


# -- a mistyped provider ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "meant"), [("opnai", "openai"), ("antrhopic", "anthropic"), ("gemni", "gemini")]
)
def test_a_mistyped_provider_gets_a_did_you_mean(
    typed: str, meant: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["run", "hi", "--provider", typed, "--store", str(tmp_path / "a.db")]) == 2
    err = capsys.readouterr().err
    assert f"unknown provider {typed!r} (did you mean {meant!r}?)" in err
    assert not (tmp_path / "a.db").exists()


def test_a_provider_like_no_other_gets_the_list_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "hi", "--provider", "zzz", "--no-store"]) == 2
    err = capsys.readouterr().err
    assert "did you mean" not in err and "expected one of openai, openrouter" in err


def test_a_mistyped_provider_in_a_model_string_gets_one_too() -> None:
    from agentloop import Agent
    from agentloop.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"did you mean 'openai:gpt-4o'\?"):
        Agent("opnai:gpt-4o")
