"""A run the engine starts (``started_run``) is the record ``Run(...)`` builds (issue 39).

``started_run`` sets each field itself and leaves the lists most runs never read unset, made at
their first read: these tests hold it to ``Run(...)``'s defaults field by field (a field added to
``Run`` and forgotten there fails here), and show a late list behaves as a list of its own.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

from agentloop import Agent
from agentloop.run import _LATE, Run, started_run
from agentloop.testing import FunctionModel, reply


def test_every_field_is_the_default_run_builds() -> None:
    made = Run(id="r1", input="go", started_at=1.0, session_id="s1")
    started = started_run("r1", "go", 1.0, "s1")
    for field in dataclasses.fields(Run):
        assert getattr(started, field.name) == getattr(made, field.name), field.name
    assert started == made
    assert repr(started) == repr(made)


def test_a_late_list_is_made_once_and_is_the_runs_own() -> None:
    first, second = started_run("r1", "go", 1.0, "s1"), started_run("r2", "go", 1.0, "s1")
    assert _LATE <= {f.name for f in dataclasses.fields(Run)}
    first.loaded_tools.append("search")
    assert first.loaded_tools == ["search"]
    assert first.loaded_tools is first.loaded_tools
    assert second.loaded_tools == []
    first.messages = []
    assert first.messages == []


def test_a_started_run_copies_pickles_and_converts() -> None:
    run = started_run("r1", ("go",), 1.0, "s1")
    for twin in (copy.copy(run), copy.deepcopy(run), pickle.loads(pickle.dumps(run))):
        assert twin == run
        assert twin.decisions == []
    assert Run.from_dict(run.to_dict()) == run
    assert dataclasses.replace(run, output="x").output == "x"


async def test_an_engine_run_reads_as_before() -> None:
    agent = Agent(FunctionModel(lambda request: reply("done")))
    run = await agent.session().run("go")
    assert run.output == "done"
    assert [m.role for m in run.messages] == ["user", "assistant"]
    assert [m.role for m in run.conversation] == ["user", "assistant"]
    assert (run.decisions, run.loaded_tools, run.skills_read) == ([], [], [])
