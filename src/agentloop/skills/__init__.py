"""Skills (SPEC 22): Anthropic's ``SKILL.md`` folders as a toolset, read on demand.

``SkillSet(*paths, runner=None)`` reads each skill's front matter (``name``, ``description``) when
it is built; the instructions list only names and descriptions, and the model reads a body with
``load_skill`` and a file with ``read_skill_file``, both confined to the skill's folder. Scripts
run only through the ``runner`` the application passes (``run_skill_script``). Needs the
``skills`` extra (PyYAML).
"""

from __future__ import annotations

from agentloop.skills._skillset import Skill, SkillSet

__all__ = ["Skill", "SkillSet"]
