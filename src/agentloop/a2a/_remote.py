"""``RemoteA2AAgent``: a remote A2A agent as one tool of a run (SPEC 26), on the official client.

It is a tool source (``agentloop.tools.Toolset``): its card is read with the SDK's
``A2ACardResolver`` when the first run starts (unreachable or invalid: ``ConfigurationError``
naming the url), and it lists one tool, ``input`` its one parameter, named by ``name`` or the
card. Each call is a fresh remote context, streamed when the card says it can be. How a call
ends::

    COMPLETED                        the output artifact's text (data parts as JSON), and
                                     its files as media parts (``_files``: else named)
    FAILED / REJECTED / CANCELED     soft: agent '<name>' stopped: <state>: <status text>
    INPUT_REQUIRED                   the remote task is cancelled, then the same soft text
    a JSON-RPC error                 soft: agent '<name>' stopped: error <code>: <message>
    connection or stream cut         one GetTask; unless the task ended there, soft and sick:
                                     agent '<name>' is unavailable: <why>
    HTTP 401 / 403                   hard: RemoteAuthError(<name>, status)
    parent cancel or tool timeout    CancelTask for the remote task, before the call ends
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError

from agentloop.errors import ConfigurationError, RemoteAuthError, ToolError
from agentloop.safety.redact import redact_secrets
from agentloop.tools import Tool, ToolContext

from . import _wire as wire
from ._files import answer

__all__ = ["RemoteA2AAgent"]

_CANCEL_SECONDS = 5.0
"""How long a CancelTask sent on the way out may take."""


class RemoteA2AAgent:
    """A remote A2A agent in ``tools=[...]``: one tool whose ``input`` is the remote's prompt.

    Args:
        url: The agent's base URL (its card is at ``/.well-known/agent-card.json``).
        name: The tool's name; default: the card's ``name`` (made a valid tool name).
        description: What the model reads; default: the card's description.
        headers: Sent with every request (credentials: ``{"Authorization": ...}``).
        timeout: The tool's timeout in seconds (replaces ``RunConfig.tool_timeout``); the
            remote task is cancelled when it passes.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 300.0,
    ) -> None:
        self.url = url.rstrip("/")
        self._name = name
        self._description = description
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.card: pb.AgentCard | None = None
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None

    @property
    def name(self) -> str:
        """The tool's name (before the card is read: the given one, else the url)."""
        if self._name:
            return self._name
        if self.card is not None:
            return re.sub(r"[^A-Za-z0-9_-]", "_", self.card.name)[:64] or "remote_agent"
        return self.url

    @property
    def version(self) -> int:
        """Listed once: the card is read when the first run starts."""
        return 1

    async def list_tools(self) -> Sequence[Tool]:
        """Read the card (``ConfigurationError`` naming the url) and give the one tool."""
        if self._client is None:
            http = httpx.AsyncClient(headers=self.headers, timeout=httpx.Timeout(self.timeout))
            try:
                card = await A2ACardResolver(http, self.url).get_agent_card()
                config = ClientConfig(streaming=card.capabilities.streaming, httpx_client=http)
                client = ClientFactory(config).create(card)
            except (A2AError, ValueError) as exc:
                await http.aclose()
                why = redact_secrets(str(exc))
                raise ConfigurationError(
                    f"the A2A agent at {self.url} has no usable agent card: {why}", field="tools"
                ) from exc
            self.card, self._http, self._client = card, http, client
        assert self.card is not None
        description = self._description or self.card.description or f"The agent {self.name}."
        return [_RemoteTool(self, self.name, description)]

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._http is not None:
            await self._http.aclose()
        self._http = self._client = None

    async def ask(self, text: str) -> str | list[Any]:
        """One call: a fresh context with ``text``; the output, or ``ToolError`` (module)."""
        client = self._client
        assert client is not None, "list_tools() reads the card first"
        message = pb.Message(message_id=_new_id(), role=pb.ROLE_USER, parts=[pb.Part(text=text)])
        call = _Call(self.name)
        reader = asyncio.ensure_future(call.consume(client, pb.SendMessageRequest(message=message)))
        try:
            await asyncio.shield(reader)  # our cancel must not cut the stream before CancelTask
        except asyncio.CancelledError:
            await asyncio.shield(asyncio.ensure_future(self._cancel_remote(call, reader)))
            raise
        except A2AError as exc:
            await self._failed(call, exc)
        if call.state == pb.TASK_STATE_INPUT_REQUIRED:
            await self._cancel_remote(call, reader)
        return call.result()

    async def _failed(self, call: _Call, exc: A2AError) -> None:
        """A failure on the wire: auth (hard), a JSON-RPC error, or a cut (one GetTask)."""
        cause = exc.__cause__
        if isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code in (401, 403):
            raise RemoteAuthError(self.name, cause.response.status_code) from None
        code = JSON_RPC_ERROR_CODE_MAP.get(type(exc))
        if code is not None:
            message = redact_secrets(exc.message or str(exc))
            raise ToolError(f"agent '{self.name}' stopped: error {code}: {message}") from None
        why = redact_secrets(str(exc)) or type(exc).__name__
        if call.task_id and self._client is not None:
            with contextlib.suppress(A2AError):
                task = await self._client.get_task(pb.GetTaskRequest(id=call.task_id))
                call.read_task(task)
                if call.state in wire.TERMINAL:
                    return
        raise ToolError(f"agent '{self.name}' is unavailable: {why}", sick=True) from None

    async def _cancel_remote(self, call: _Call, reader: asyncio.Future[None]) -> None:
        """CancelTask for the call's task once its id is known (best effort, bounded)."""
        client = self._client
        try:
            async with asyncio.timeout(_CANCEL_SECONDS):
                if not call.task_id and not reader.done():
                    known: asyncio.Future[Any] = asyncio.ensure_future(call.known.wait())
                    either: list[asyncio.Future[Any]] = [reader, known]
                    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                    known.cancel()
                if call.task_id and client is not None and call.state not in wire.TERMINAL:
                    await client.cancel_task(pb.CancelTaskRequest(id=call.task_id))
        except (A2AError, TimeoutError):
            pass
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader


class _Call:
    """What one call has seen of its remote task."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.task_id = ""
        self.state: pb.TaskState = pb.TASK_STATE_SUBMITTED
        self.status = ""
        self.chunks: list[pb.Part] = []
        self.final: list[pb.Part] | None = None
        self.known = asyncio.Event()

    async def consume(self, client: Client, request: pb.SendMessageRequest) -> None:
        """Read the responses of one ``SendMessage`` (streamed or not) as they come."""
        async for response in client.send_message(request):
            self.read(response)

    def read(self, response: pb.StreamResponse) -> None:
        kind = response.WhichOneof("payload")
        if kind == "task":
            self.read_task(response.task)
        elif kind == "status_update":
            self.task_id = self.task_id or response.status_update.task_id
            self.known.set()
            self._status(response.status_update.status)
        elif kind == "artifact_update":
            update = response.artifact_update
            parts = list(update.artifact.parts)
            if update.append:
                self.chunks += parts
            else:
                self.final = parts
        elif kind == "message":  # a remote that answers with a message, not a task
            self.final = list(response.message.parts)
            self.state = pb.TASK_STATE_COMPLETED

    def read_task(self, task: pb.Task) -> None:
        self.task_id = task.id
        self.known.set()
        self._status(task.status)
        outputs = [a for a in task.artifacts if a.artifact_id == wire.OUTPUT] or list(
            task.artifacts
        )
        if outputs:
            self.final = [p for a in outputs for p in a.parts]

    def _status(self, status: pb.TaskStatus) -> None:
        self.state = status.state
        self.status = wire.text_of(status.message) if status.HasField("message") else ""

    def result(self) -> str | list[Any]:
        if self.state == pb.TASK_STATE_COMPLETED:
            if self.final is not None:
                return answer(self.final)  # a file as its media part (SPEC 16), or named
            return answer(self.chunks, "")
        state = wire.state_name(self.state)
        raise ToolError(f"agent '{self.name}' stopped: {state}: {redact_secrets(self.status)}")


def _new_id() -> str:
    return uuid.uuid4().hex


class _RemoteTool(Tool):
    """The one tool a ``RemoteA2AAgent`` lists."""

    def __init__(self, remote: RemoteA2AAgent, name: str, description: str) -> None:
        self.remote = remote
        self.name = name
        self.description = description
        self.timeout = remote.timeout
        self.parameters = {
            "type": "object",
            "properties": {"input": {"type": "string", "description": f"The request for {name}."}},
            "required": ["input"],
        }

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Ask the remote agent."""
        text = arguments.get("input")
        if not isinstance(text, str):
            raise ToolError(
                f"Invalid arguments for tool '{self.name}': input: Input should be a string"
            )
        return await self.remote.ask(text)
