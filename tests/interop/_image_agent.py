"""A remote A2A agent that is not agentloop: the official a2a-sdk server, answering with a file.

``image_agent(parts)`` is a Starlette app (``DefaultRequestHandler`` over an ``AgentExecutor``,
the SDK's own JSON-RPC and card routes) whose every task completes with one artifact holding
``parts``: what an image-generating or file-producing agent of another vendor sends.
"""

from __future__ import annotations

from typing import Any

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette

__all__ = ["image_agent"]


class _Drawer(AgentExecutor):
    def __init__(self, parts: list[pb.Part]) -> None:
        self.parts = parts

    async def execute(self, context: RequestContext, event_queue: Any) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact(list(self.parts), name="drawing")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: Any) -> None:
        raise NotImplementedError


def image_agent(parts: list[pb.Part], url: str) -> Starlette:
    """The app, its card naming ``url`` as its JSON-RPC endpoint."""
    card = pb.AgentCard(
        name="drawer",
        description="Draws what you ask for.",
        version="1.0",
        capabilities=pb.AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["image/png"],
    )
    card.supported_interfaces.append(
        pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
    )
    card.skills.append(pb.AgentSkill(id="draw", name="draw", description="Draws.", tags=["art"]))
    handler = DefaultRequestHandler(_Drawer(parts), InMemoryTaskStore(), card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
    return Starlette(routes=routes)
