"""SPEC 22's skills: SKILL.md folders, the instructions lines, reading on demand, confinement."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, tool
from agentloop.errors import ConfigurationError
from agentloop.skills import SkillSet
from agentloop.testing import ScriptedModel, call, reply


def skill(root: Path, name: str, description: str = "Does a thing.", body: str = "Step 1.") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"
    )
    return folder


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    pdf = skill(root, "pdf-forms", "Fill PDF forms.", "# PDF forms\nUse forms.md.")
    (pdf / "forms.md").write_text("field names")
    (pdf / "scripts").mkdir()
    (pdf / "scripts" / "fill.py").write_text("print('x')")
    (pdf / "blob.bin").write_bytes(b"\xff\xfe\x00")
    skill(root, "release-notes", "Write release notes.")
    (tmp_path / "secret.txt").write_text("top secret")
    return root


def results(run: Any) -> list[str]:
    return [p.content for m in run.messages for p in m.tool_results_parts]


async def test_the_instructions_list_names_and_descriptions_only(library: Path) -> None:
    model = ScriptedModel([reply("ok")])
    await Agent(model, system="Be brief.", toolsets=[SkillSet(library)]).run("go")
    request = model.requests[0]
    assert request.system == (
        "Be brief.\n\nSkills (call load_skill to read one):\n"
        "- pdf-forms: Fill PDF forms.\n- release-notes: Write release notes."
    )
    assert sorted(s.name for s in request.tools) == ["load_skill", "read_skill_file"]


async def test_load_skill_gives_the_body_and_files_and_is_recorded(library: Path) -> None:
    model = ScriptedModel(
        [
            call("load_skill", {"name": "pdf-forms"}),
            call("load_skill", {"name": "pdf-form"}),
            reply("ok"),
        ]
    )
    run = await Agent(model, toolsets=[SkillSet(library)]).run("go")
    body, unknown = results(run)
    assert body == "# PDF forms\nUse forms.md.\n\nfiles: blob.bin, forms.md, scripts/fill.py"
    available = "Available: pdf-forms, release-notes"
    assert unknown == f"no skill named 'pdf-form'. {available}. Did you mean 'pdf-forms'?"
    assert run.skills_read == ["pdf-forms"]
    assert type(run).from_dict(run.to_dict()).skills_read == ["pdf-forms"]


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("forms.md", "field names"),
        ("../../secret.txt", "'../../secret.txt' is outside skill 'pdf-forms'"),
        ("/etc/passwd", "'/etc/passwd' is outside skill 'pdf-forms'"),
        ("nope.md", "skill 'pdf-forms' has no file 'nope.md'"),
        ("blob.bin", "'blob.bin' is not a UTF-8 text file"),
    ],
)
async def test_read_skill_file_is_confined(library: Path, path: str, text: str) -> None:
    model = ScriptedModel(
        [call("read_skill_file", {"skill": "pdf-forms", "path": path}), reply("ok")]
    )
    run = await Agent(model, toolsets=[SkillSet(library)]).run("go")
    assert results(run) == [text]


async def test_a_symlink_out_of_the_folder_is_outside(library: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "secret.txt", library / "pdf-forms" / "link.txt")
    model = ScriptedModel(
        [call("read_skill_file", {"skill": "pdf-forms", "path": "link.txt"}), reply("ok")]
    )
    run = await Agent(model, toolsets=[SkillSet(library)]).run("go")
    assert results(run) == ["'link.txt' is outside skill 'pdf-forms'"]


async def test_a_file_too_big_is_refused(library: Path) -> None:
    (library / "pdf-forms" / "big.txt").write_text("x" * 100)
    model = ScriptedModel(
        [call("read_skill_file", {"skill": "pdf-forms", "path": "big.txt"}), reply("ok")]
    )
    run = await Agent(model, toolsets=[SkillSet(library, max_read_bytes=10)]).run("go")
    assert results(run) == ["'big.txt' is 100 bytes, more than the 10 this tool reads"]


async def test_scripts_run_only_through_the_runner(library: Path) -> None:
    seen: list[tuple[Path, list[str], Path]] = []

    def runner(script: Path, args: list[str], *, cwd: Path) -> str:
        seen.append((script, args, cwd))
        return "filled"

    args = {"skill": "pdf-forms", "path": "scripts/fill.py", "args": ["a"]}
    model = ScriptedModel(
        [
            call("run_skill_script", args),
            call("run_skill_script", {**args, "path": "../x"}),
            reply("ok"),
        ]
    )
    run = await Agent(model, toolsets=[SkillSet(library, runner=runner)]).run("go")
    assert results(run) == ["filled", "'../x' is outside skill 'pdf-forms'"]
    root = (library / "pdf-forms").resolve()
    assert seen == [(root / "scripts" / "fill.py", ["a"], root)]


async def test_without_a_runner_no_script_tool_is_offered(library: Path) -> None:
    model = ScriptedModel(
        [call("run_skill_script", {"skill": "pdf-forms", "path": "scripts/fill.py"}), reply("ok")]
    )
    run = await Agent(model, toolsets=[SkillSet(library)]).run("go")
    assert results(run)[0].startswith("tool 'run_skill_script' is not available")


def test_one_skill_folder_is_a_path_too(library: Path) -> None:
    assert list(SkillSet(library / "release-notes").skills) == ["release-notes"]


@pytest.mark.parametrize(
    ("front", "match"),
    [
        ("name: bad--name\ndescription: d", "name 'bad--name'"),
        ("name: -lead\ndescription: d", "name '-lead'"),
        ("name: Upper\ndescription: d", "name 'Upper'"),
        ("name: other\ndescription: d", "must be its folder's name"),
        ("name: thing\ndescription: ''", "description must be 1-1024"),
        ("name: thing\ndescription: " + "x" * 1025, "description must be 1-1024"),
        ("name: [unclosed", "not valid YAML"),
    ],
)
def test_a_malformed_skill_is_a_configuration_error_naming_the_file(
    tmp_path: Path, front: str, match: str
) -> None:
    folder = tmp_path / "thing"
    folder.mkdir()
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\nbody")
    with pytest.raises(ConfigurationError, match=match) as info:
        SkillSet(folder)
    assert "SKILL.md" in info.value.message


def test_two_skills_with_one_name_are_an_error(tmp_path: Path) -> None:
    skill(tmp_path / "a", "same")
    skill(tmp_path / "b", "same")
    with pytest.raises(ConfigurationError, match="two skills are named 'same'"):
        SkillSet(tmp_path / "a", tmp_path / "b")


def test_a_user_tool_named_load_skill_is_an_error(library: Path) -> None:
    mine = tool(name="load_skill", description="mine")(lambda: "x")
    with pytest.raises(ConfigurationError, match="two tools are named 'load_skill'"):
        Agent(ScriptedModel([]), tools=[mine], toolsets=[SkillSet(library)])
