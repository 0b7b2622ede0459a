"""The words people bring from other agent libraries, and ours (SPEC 21).

A keyword from pydantic-ai or the OpenAI Agents SDK on one of our calls is a ``TypeError`` that
names what to write here (``agentloop._util.peers.hinting`` applies these tables); a method of
theirs looked up on an ``Agent`` is an ``AttributeError`` that does the same. The mistakes and
their fixes are listed for people in ``docs/coming-from-peers.md``.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentloop._util.peers import no_attribute

__all__ = ["AGENT", "AS_TOOL", "RUN", "SESSION", "missing_attribute"]

_HISTORY = "history= (a list of Message; run.conversation is what to pass next time)"
_OUTPUT_TYPE = "output_type= (a pydantic model, a dataclass, a TypedDict or a type like int)"
_GUARDRAILS = "guardrails=[InputGuardrail(...), OutputGuardrail(...)]"

AGENT: Mapping[str, str] = {
    "model": "pass the model first, positionally: Agent('openai:gpt-5-mini') or Agent(client)",
    "system_prompt": "system= (or instructions=); a function (ctx) -> str is evaluated per run",
    "result_type": _OUTPUT_TYPE,
    "deps_type": "there is no deps_type: pass deps= to run() and annotate tools' "
    "ctx: ToolContext[MyDeps] (RunContext[MyDeps] in a system prompt function)",
    "message_history": _HISTORY,
    "model_settings": "config=RunConfig(model_settings=ModelSettings(...)), "
    "or run(..., model_settings=...) for one run",
    "retries": "config=RunConfig(recovery=...) retries tool calls, RunConfig(output_retries=) "
    "invalid output; a client built from a 'provider:model' string already retries requests",
    "output_retries": "config=RunConfig(output_retries=...)",
    "result_retries": "config=RunConfig(output_retries=...)",
    "mcp_servers": "toolsets=[MCPServer.stdio(...)] (or tools=[...]: tools and MCP servers alike)",
    "handoff_description": "handoff(agent, description=...) (from agentloop import handoff)",
    "input_guardrails": _GUARDRAILS,
    "output_guardrails": _GUARDRAILS,
    "instrument": "observers=[OtelObserver()] (agentloop.otel)",
    "event_stream_handler": "async with agent.stream(...) as events, or observers=[...]",
    "history_processors": "config=RunConfig(compactor=...) decides what is kept of a long history",
    "max_turns": "config=RunConfig(max_turns=...)",
    "usage_limits": "config=RunConfig(budget=Budget(...)), or run(..., usage_limits=Budget(...))",
    "reset_tool_choice": "ModelSettings(tool_choice=..., tool_choice_once=True)",
    "builtin_tools": "provider_tools=[WebSearch(), CodeExecution()] (agentloop.provider_tools)",
}
"""``Agent(...)`` keywords of pydantic-ai and the OpenAI Agents SDK."""

RUN: Mapping[str, str] = {
    "message_history": _HISTORY,
    "context": "deps= (tools read it as ctx.deps)",
    "max_turns": "Agent(config=RunConfig(max_turns=...)), or usage_limits=Budget(turns=...) "
    "for this run",
    "output_type": "the output type is the agent's: Agent(..., output_type=...)",
    "result_type": "the output type is the agent's: Agent(..., output_type=...)",
    "model": "the model is the agent's: Agent('provider:model'); in tests "
    "with agent.override(model=...)",
    "user_prompt": "input= (or pass it first, positionally)",
    "session": "run on a session: agent.session(session_id).run(...)",
    "run_config": "the config is the agent's: Agent(..., config=RunConfig(...))",
    "hooks": "hooks are the agent's: Agent(..., hooks=[...])",
    "previous_response_id": _HISTORY,
    "usage": "run.usage is what the run spent; usage_limits=Budget(...) caps it",
    "instructions": "the system prompt is the agent's: Agent(instructions=...) (a function "
    "(ctx) -> str is evaluated per run)",
    "event_stream_handler": "async with agent.stream(...) as events: async for event in events",
}
"""``run()`` / ``run_sync()`` / ``stream()`` keywords of the peers (Agent and Session alike)."""

AS_TOOL: Mapping[str, str] = {
    "tool_name": "name=",
    "tool_description": "description=",
}
"""``as_tool()`` keywords of the OpenAI Agents SDK."""

SESSION: Mapping[str, str] = {
    "message_history": "history= (seeds a new session)",
    "db_path": "store=SQLiteStore(path) (agentloop.store.sqlite)",
}
"""``agent.session()`` keywords people try."""

_ATTRIBUTES: Mapping[str, str] = {
    "run_stream": "use `async with agent.stream(input) as events: async for event in events`",
    "iter": "use `async with agent.stream(input) as events: async for event in events`",
    "run_stream_events": "use `async with agent.stream(input) as events`",
    "tool_plain": "use @agent.tool (a ctx parameter is optional)",
    "system_prompt": "pass a function as the prompt: Agent(model, system=fn), fn(ctx) -> str",
    "instructions": "pass the prompt at construction: Agent(model, instructions=...); read it "
    "back as agent.system",
    "output_validator": "validate with the output type itself (a pydantic validator), or an "
    "OutputGuardrail in Agent(guardrails=[...])",
    "clone": "use agent.fork()",
    "run_streamed": "use `async with agent.stream(input) as events`",
    "as_handoff": "use agentloop.handoff(agent, name=..., description=...)",
}
"""Methods and attributes of the peers' agents, and ours."""


def missing_attribute(owner: object, name: str, ours: list[str]) -> AttributeError:
    """The ``AttributeError`` for ``owner.name``: our word for a peer's, or a close name."""
    return no_attribute(owner, name, ours, _ATTRIBUTES)
