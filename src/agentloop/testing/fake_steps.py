"""What a fake server plays, as data: ``FakeReply``, ``Fault`` and ``FakeToolCall``.

A step of a script is a ``FakeReply``, a ``Fault`` or a callable ``body -> step`` (``Step``).
These frozen values are shared by the server that plays them (``fake_server``), the parser that
reads them from files (``fake_script``) and ``agentloop.testing``, which re-exports them; they
import only the wire formats (``fake_wire``), for the error bodies faults send.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, TypeAlias

from agentloop._util.slots import record
from agentloop.testing.fake_wire import openai_error

__all__ = ["FakeReply", "FakeToolCall", "Fault", "FaultKind", "Step"]

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 token

FaultKind: TypeAlias = Literal["status", "redirect", "reset", "hang", "truncate", "malformed"]


@record
class FakeToolCall:
    """A tool call the fake model makes (``id`` is generated when None)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def raw_arguments(self) -> str:
        """The argument text on the wire (a str is sent verbatim, e.g. invalid JSON)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments))


@record
class FakeReply:
    """A successful answer: text and/or tool calls, reasoning or a refusal, usage, and timing.

    ``thinking`` (None: no reasoning) is the model's reasoning, sent before everything else in
    each wire format's own form: Chat Completions ``reasoning_content``, an Anthropic
    ``thinking`` block signed with ``thinking_signature``, a Responses ``reasoning`` item whose
    ``encrypted_content`` is ``thinking_signature`` ("" gives an item with an empty summary). A
    None signature is made up per request. ``refusal`` (None: none) makes the reply a refusal:
    Chat Completions ``message.refusal``, a Responses ``refusal`` content part, an Anthropic
    text block with ``stop_reason: "refusal"``. ``delay`` waits before answering;
    ``chunk_delay`` paces a stream's chunks (a JSON answer pays it once).
    """

    text: str = ""
    tool_calls: Sequence[FakeToolCall] = ()
    finish_reason: str | None = None
    input_tokens: int = 10
    output_tokens: int = 5
    chunk_delay: float = 0.0
    delay: float = 0.0
    thinking: str | None = None
    thinking_signature: str | None = None
    refusal: str | None = None
    web_search: Sequence[str] = ()
    """Queries the provider searched itself before answering (SPEC 24): an Anthropic
    ``server_tool_use`` and ``web_search_tool_result`` pair, a Responses ``web_search_call``,
    each of which the server then checks comes back unchanged on later requests."""
    tool_search: Mapping[str, Any] | None = None
    """A search the provider ran itself (SPEC 22, native): ``{"query": ..., "found": [names]}``,
    an Anthropic ``server_tool_use`` and ``tool_search_tool_result`` naming the tools found."""
    batch_result: str = "succeeded"
    """How a batch API answers this step (SPEC 25): succeeded, errored, expired or canceled."""

    @property
    def finish(self) -> str:
        """The ``finish_reason`` sent: explicit, else ``tool_calls`` or ``stop``."""
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


@record
class Fault:
    """A failure injected into one request; build it with the class methods.

    ``delay`` (seconds before the fault strikes) is set with ``dataclasses.replace``.
    """

    kind: FaultKind
    status: int = 500
    body: str | Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    reply: FakeReply | None = None
    seconds: float = math.inf
    delay: float = 0.0
    batch_result: str = "errored"
    """How a batch API answers this step: errored (its status and body), expired or canceled."""

    def __post_init__(self) -> None:
        """Refuse what no HTTP server could send: a status outside 100-599, CR/LF in a header."""
        from agentloop.errors import ConfigurationError

        status = self.status
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            raise ConfigurationError(
                f"fake-server fault: status must be an HTTP status code (100-599), not {status!r}",
                field="status",
            )
        for name, value in self.headers.items():
            if not _HEADER_NAME.fullmatch(str(name)) or any(c in str(value) for c in "\r\n\0"):
                raise ConfigurationError(
                    f"fake-server fault: header {name!r} is not a valid header name and value "
                    "(a name is a token; a value holds no CR, LF or NUL)",
                    field="headers",
                )

    @classmethod
    def http(
        cls,
        status: int,
        body: str | Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Fault:
        """Answer with ``status``, ``body`` (default: an OpenAI error object) and ``headers``."""
        return cls("status", status=status, body=body, headers=dict(headers or {}))

    @classmethod
    def rate_limit(cls, retry_after: float | None = 1.0) -> Fault:
        """429 with ``Retry-After`` (seconds) when given."""
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        return cls.http(429, openai_error("Rate limit reached", "rate_limit_exceeded"), headers)

    @classmethod
    def auth(cls) -> Fault:
        """401 invalid key."""
        return cls.http(401, openai_error("Incorrect API key provided", "invalid_api_key"))

    @classmethod
    def insufficient_credits(cls) -> Fault:
        """OpenRouter's 402."""
        return cls.http(402, {"error": {"code": 402, "message": "Insufficient credits"}})

    @classmethod
    def quota(cls) -> Fault:
        """OpenAI's quota 429 (``insufficient_quota``), which is not a rate limit."""
        return cls.http(429, openai_error("You exceeded your current quota", "insufficient_quota"))

    @classmethod
    def context_overflow(cls) -> Fault:
        """400 ``context_length_exceeded``."""
        message = "This model's maximum context length is 8192 tokens."
        return cls.http(400, openai_error(message, "context_length_exceeded"))

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        """A 5xx (500, 503, 529...)."""
        return cls.http(status, openai_error("The server had an error", "server_error"))

    @classmethod
    def redirect(cls, location: str = "https://elsewhere.example/v1", status: int = 302) -> Fault:
        """A 3xx to ``location``."""
        return cls("redirect", status=status, headers={"Location": location})

    @classmethod
    def reset(cls) -> Fault:
        """Read the request, then drop the connection without answering."""
        return cls("reset")

    @classmethod
    def hang(cls, seconds: float = math.inf) -> Fault:
        """Read the request and answer nothing: the client's read timeout ends it.

        By default nothing comes until the client hangs up (or the server closes), so every
        client sees its own read timeout, whatever its length; with ``seconds`` the server drops
        the connection after that long (a client with a longer timeout sees that drop).
        """
        return cls("hang", seconds=seconds)

    @classmethod
    def truncate(cls, reply: FakeReply | None = None) -> Fault:
        """Stream part of ``reply`` and end cleanly without ``[DONE]`` (JSON: cut the body)."""
        return cls("truncate", reply=reply or FakeReply("partial answer"))

    @classmethod
    def malformed(cls) -> Fault:
        """200 with a body (or stream chunk) that is not valid JSON."""
        return cls("malformed")


Step: TypeAlias = FakeReply | Fault | Callable[[Mapping[str, Any]], "FakeReply | Fault"]
