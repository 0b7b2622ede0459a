"""``agentloop runs export RUN_ID --as-test FILE``: a stored run becomes a pytest regression test.

The file uses public names only. The model's replies become a ``ScriptedModel`` (tool call ids
kept); with ``--agent MODULE:NAME`` the test runs that agent, its real tools, through
``agent.override(model=...)``, else every tool returns the result recorded for its call. Each
step after the first compares the newest tool results with the recorded ones and names a call
whose result changed; the test then asserts the trajectory (tool names, arguments, order) and
the output. Decisions recorded for a paused run (section 17) are replayed with
``continue_run``; a run still paused is exported with its paused turn, and the test asserts it
pauses there again on the same pending calls (ids, tools, arguments). A run that handed off
(section 26) scripts every agent it reached with the same ``ScriptedModel`` (each receiver
overridden too, found by name in the agent's module), so no receiver's real model answers the
replay. Every text goes through the package's redactor, and nothing in the file names a store
or an absolute path. An unknown id, or a run with parts
this export cannot replay (provider-native tool parts, section 24), is exit 2.
"""

from __future__ import annotations

import argparse
import json
import pprint
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.errors import InvalidInput
from agentloop.media import AudioPart, DocumentPart, ImagePart
from agentloop.messages import TextPart, ThinkingPart, ToolCallPart, ToolResultPart, input_text
from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:
    from agentloop import Run, Turn

__all__ = ["add_export", "export"]

_REPLAYABLE = (
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ImagePart,
    DocumentPart,
    AudioPart,
)
_FINAL = "final_result"

_HEAD = '''"""Regression test: stored run {run_id} replayed (written by `agentloop runs export`).

The model's replies are scripted as recorded; the test fails if a tool result, the trajectory
(tool names, arguments, order) or the output changes.
"""

import asyncio
import json
from typing import Any

import pydantic_core

from agentloop import Agent, Answer, Approve, Deny, Edit, Tool, ToolError
from agentloop.testing import ScriptedModel, call
'''

_BODY = '''
INPUT = {input}
REPLIES: list[Any] = {replies}
RESULTS: dict[str, tuple[str, str, bool]] = {results}
STEP_CALLS: list[list[str]] = {step_calls}
DECISIONS: list[dict[str, dict[str, Any]]] = {decisions}
TRAJECTORY: list[tuple[str, dict[str, Any]]] = {trajectory}
OUTPUT: Any = {output}
PENDING: list[tuple[str, str, dict[str, Any]]] = {pending}


def script(changed: list[str]) -> list[Any]:
    """The replies; each step first checks the results of the calls the last one made."""

    def step(index: int) -> Any:
        def answer(request: Any) -> Any:
            got = {{p.call_id: (p.content, p.is_error) for p in request.messages[-1].parts
                   if hasattr(p, "call_id")}}
            for call_id in STEP_CALLS[index - 1]:
                name, content, is_error = RESULTS[call_id]
                if got.get(call_id) != (content, is_error):
                    changed.append(f"{{name}} ({{call_id}}): recorded {{(content, is_error)!r}}, "
                                   f"got {{got.get(call_id)!r}}")
            return REPLIES[index]

        return answer

    return [REPLIES[0], *(step(i) for i in range(1, len(REPLIES)))]


def decision(data: dict[str, Any]) -> Any:
    kind = data["kind"]
    if kind == "approve":
        return Approve()
    if kind == "edit":
        return Edit(data["arguments"])
    if kind == "deny":
        return Deny(data.get("message"))
    return Answer(data["content"])


def trajectory(run: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, dict(c.arguments)) for t in run.turns for c in t.tool_calls
            if c.name != "final_result"]


def pending(run: Any) -> list[tuple[str, str, dict[str, Any]]]:
    return [(p.id, p.call.name, dict(p.call.arguments)) for p in run.pending]


async def replay(agent: Any) -> Any:
    run = await agent.run(INPUT)
    for decided in DECISIONS:
        assert run.paused, "the run no longer pauses where it did"
        run = await agent.continue_run(decisions={{k: decision(v) for k, v in decided.items()}})
    return run
'''

_RECORDED_TOOLS = '''

class Recorded(Tool):
    """A tool that returns, for each call id, the result recorded for it."""

    parameters = {{"type": "object", "properties": {{}}, "additionalProperties": True}}

    def __init__(self, name: str, approval: bool, external: bool) -> None:
        self.name, self.description = name, f"{{name}} (recorded)"
        self.requires_approval, self.external = approval, external

    def validate(self, arguments: Any) -> Any:
        return arguments

    async def call(self, arguments: Any, ctx: Any) -> Any:
        _, content, is_error = RESULTS[ctx.call_id]
        if is_error:
            raise ToolError(content)
        return content


TOOLS = {tools}


def test_{test}() -> None:
    changed: list[str] = []
    agent = Agent(ScriptedModel(script(changed)),
                  tools=[Recorded(n, a, e) for n, a, e in TOOLS])
    run = asyncio.run(replay(agent))
    assert changed == [], "tool results changed:\\n" + "\\n".join(changed)
    assert trajectory(run) == TRAJECTORY
    assert pending(run) == PENDING
    {output_check}
'''

_WITH_AGENT = """

from {module} import {name} as agent_under_test  # noqa: E402
{receivers}

def test_{test}() -> None:
    changed: list[str] = []
    model = ScriptedModel(script(changed))  # one script: the replies in the order they came
    with {overrides}:
        run = asyncio.run(replay(agent_under_test))
    assert changed == [], "tool results changed:\\n" + "\\n".join(changed)
    assert trajectory(run) == TRAJECTORY
    assert pending(run) == PENDING
    assert pydantic_core.to_jsonable_python(run.output, fallback=str) == OUTPUT
"""


def add_export(runs_commands: Any) -> None:
    """Add ``export`` to ``agentloop runs``' subcommands."""
    export_cmd = runs_commands.add_parser("export", help="write a stored run as a pytest test")
    export_cmd.add_argument("run_id", metavar="RUN_ID", help="a run id or a unique prefix")
    export_cmd.add_argument("--as-test", required=True, metavar="FILE", help="the test file")
    export_cmd.add_argument("--store", default=argparse.SUPPRESS, help="as for 'runs'")
    export_cmd.add_argument(
        "--agent", metavar="MODULE:NAME", help="replay with this Agent and its real tools"
    )


def export(args: argparse.Namespace) -> int:
    """Write the test file; 0, or an ``InvalidInput`` (exit 2) naming the problem."""
    from agentloop.cli.runs import _open_store, find_run

    store = _open_store(args.store)
    try:
        run = find_run(store, args.run_id).run
    finally:
        store.close()
    _check(run)
    text = render(run, args.agent)
    Path(args.as_test).write_text(text, encoding="utf-8")
    print(f"wrote {args.as_test}: run {run.id} as a test ({len(_turns(run))} turns)")
    return 0


def _check(run: Run[Any]) -> None:
    for message in run.messages:
        for part in message.parts:
            if not isinstance(part, _REPLAYABLE):
                raise InvalidInput(
                    f"run {run.id} has a {type(part).__name__} part, which an exported test "
                    "cannot replay (provider-native tools run at the provider)"
                )
    if not _turns(run):
        raise InvalidInput(f"run {run.id} has no completed turn to replay")


def _turns(run: Run[Any]) -> list[Turn]:
    """The run's turns, a paused run's paused turn last (with the results of calls that ran)."""
    from agentloop import Message, Turn

    paused = run.paused_turn if run.paused else None
    if not paused or not isinstance(paused.get("turn"), dict):
        return list(run.turns)
    try:
        turn = Turn.from_dict(paused["turn"])
        ran = paused.get("results")
        if ran is not None:
            turn.tool_results = list(Message.from_dict(ran).tool_results_parts)
    except (KeyError, TypeError, ValueError, InvalidInput) as exc:
        raise InvalidInput(f"run {run.id}: its paused turn is unreadable: {exc}") from exc
    return [*run.turns, turn]


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _literal(value: Any) -> str:
    return pprint.pformat(value, width=96, sort_dicts=False)


_Script = tuple[list[Any], list[list[str]], dict[str, tuple[str, str, bool]]]


def _script(run: Run[Any], output: Any, typed: bool) -> _Script:
    """The replies, each step's call ids and the recorded results.

    Without the agent (``typed`` False, so no output type), the typed answer's ``final_result``
    call becomes the answer's JSON as text.
    """
    replies: list[Any] = []
    step_calls: list[list[str]] = []
    results: dict[str, tuple[str, str, bool]] = {}
    for turn in _turns(run):
        items: list[Any] = [_clean(turn.text)] if turn.text else []
        for c in turn.tool_calls:
            if typed or c.name != _FINAL:
                items.append(_Call(c.name, _clean(dict(c.arguments)), c.id))
            else:
                items = [json.dumps(output)]
                break
        replies.append(items)
        step_calls.append([c.id for c in turn.tool_calls if c.name != _FINAL])
        for result in turn.tool_results:
            results[result.call_id] = (result.name, _clean(result.content), result.is_error)
    return replies, step_calls, results


def render(run: Run[Any], agent: str | None) -> str:
    """The test file's text for ``run`` (``agent``: ``MODULE:NAME`` or None)."""
    from pydantic_core import to_jsonable_python

    output = _clean(to_jsonable_python(run.output, fallback=str))
    replies, step_calls, results = _script(run, output, typed=agent is not None)
    decisions = [_clean(d.get("decisions", {})) for d in run.decisions]
    trajectory = [
        (c.name, _clean(dict(c.arguments)))
        for t in run.turns  # a paused turn's calls: PENDING (and the calls that ran, RESULTS)
        for c in t.tool_calls
        if c.name != _FINAL
    ]
    fields = {
        "input": _literal(_clean(input_text(run.input))),
        "replies": _literal(replies),
        "results": _literal(results),
        "step_calls": _literal(step_calls),
        "decisions": _literal(decisions),
        "trajectory": _literal(trajectory),
        "output": _literal(output),
        "pending": _literal(
            [(p.id, p.call.name, _clean(dict(p.call.arguments))) for p in run.pending]
        ),
    }
    test = "run_" + re.sub(r"\W", "_", run.id[:12])
    text = _HEAD.format(run_id=run.id) + _BODY.format(**fields)
    if agent is not None:
        module, _, name = agent.partition(":")
        overrides, imports = ["agent_under_test.override(model=model)"], []
        for index, (where, attribute) in enumerate(_receivers(run, agent), 1):
            overrides.append(f"receiver_{index}.override(model=model)")
            imports.append(f"from {where} import {attribute} as receiver_{index}  # noqa: E402")
        receivers = "\n".join(imports) + "\n" if imports else ""
        return text + _WITH_AGENT.format(
            module=module, name=name, test=test, receivers=receivers, overrides=", ".join(overrides)
        )
    typed = any(c.name == _FINAL for t in run.turns for c in t.tool_calls)
    check = "assert json.loads(run.output) == OUTPUT" if typed else "assert run.output == OUTPUT"
    tools = _literal(_tools(run))
    return text + _RECORDED_TOOLS.format(tools=tools, test=test, output_check=check)


def _receivers(run: Run[Any], agent: str) -> list[tuple[str, str]]:
    """``(module, name)`` of each agent ``run`` handed off to (SPEC 26), found beside ``agent``.

    The test scripts them too (one ``ScriptedModel`` for every agent of the run, in the order
    the replies came), else a receiver's real model would answer the replayed run. A receiver
    that is not a module-level name of the agent's module is ``InvalidInput`` (exit 2).
    """
    handed = list(dict.fromkeys(t.agent for t in _turns(run) if t.agent is not None))
    if not handed:
        return []
    import sys

    from agentloop.cli.named import named_object
    from agentloop.engine.handoffs import active_agent

    start = named_object(agent, "--agent")
    module = sys.modules[agent.partition(":")[0]]
    found: list[tuple[str, str]] = []
    for handoff in handed:
        receiver = active_agent(start, handoff)
        names = [k for k, v in vars(module).items() if v is receiver and receiver is not start]
        if not names:
            raise InvalidInput(
                f"run {run.id} handed off to {handoff!r}, and the agent it reaches is not a "
                f"name of module {module.__name__}: the exported test must script it too; name "
                "it there (ops = Agent(...)), or export without --agent (tools then return "
                "their recorded results)"
            )
        found.append((module.__name__, names[0]))
    return found


def _tools(run: Run[Any]) -> list[tuple[str, bool, bool]]:
    kinds: dict[str, str] = {p.id: p.kind for p in run.pending}
    for decided in run.decisions:
        for call_id, data in (decided.get("decisions") or {}).items():
            kinds[call_id] = "external" if data.get("kind") == "answer" else "approval"
    found: dict[str, tuple[str, bool, bool]] = {}
    for turn in _turns(run):
        for call in turn.tool_calls:
            if call.name == _FINAL:
                continue
            kind = kinds.get(call.id)
            old = found.get(call.name, (call.name, False, False))
            found[call.name] = (
                call.name,
                old[1] or kind == "approval",
                old[2] or kind == "external",
            )
    return list(found.values())


class _Call:
    """Prints as the ``call(...)`` that makes the recorded tool call."""

    def __init__(self, name: str, arguments: dict[str, Any], call_id: str) -> None:
        self.text = f"call({name!r}, {arguments!r}, id={call_id!r})"

    def __repr__(self) -> str:
        return self.text
