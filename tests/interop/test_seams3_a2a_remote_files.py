"""A remote A2A agent's file answer reaches the model (SPEC 26 x 16); none is dropped unseen.

``RemoteA2AAgent`` made the remote task's output artifact into text: a ``raw`` or ``url`` file
part became "", so a remote image agent's drawing vanished and the model read only "Here is
your cat.", believing it had been shown one. Now an image, a document or audio comes back as
the media part SPEC 16 has for it (the tool's result is its text and the part, which the
provider takes in the tool result or right after it), and a file of any other type as a line
naming it (``[file report.zip (application/zip, 14 bytes) not shown]``, its URL when it has
one). The remote is not agentloop: the official a2a-sdk server (``DefaultRequestHandler`` over
an ``AgentExecutor``) on uvicorn on 127.0.0.1, read by agentloop's official-client tool.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb

from agentloop import Agent
from agentloop.a2a import RemoteA2AAgent
from agentloop.messages import ImagePart, ToolResultPart
from agentloop.testing import ScriptedModel, call, reply

from ._image_agent import image_agent
from ._serve import serving

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


class _Later:
    """An ASGI app whose inner app is made once the server's URL (the card's) is known."""

    app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


@contextlib.asynccontextmanager
async def remote(parts: list[pb.Part]) -> AsyncIterator[str]:
    later = _Later()
    async with serving(later) as url:
        later.app = image_agent(parts, url + "/")
        yield url


async def result_of(parts: list[pb.Part]) -> ToolResultPart:
    async with remote(parts) as url:
        model = ScriptedModel([call("drawer", {"input": "draw a cat"}), reply("done")])
        agent = Agent(model, tools=[RemoteA2AAgent(url)])
        assert (await agent.run("draw a cat")).output == "done"
        await agent.aclose()
    [result] = [p for m in model.requests[1].messages for p in m.tool_results_parts]
    return result


async def test_an_image_answer_is_an_image_part_beside_the_text() -> None:
    text = pb.Part(text="Here is your cat.")
    drawing = pb.Part(raw=PNG, media_type="image/png", filename="cat.png")
    result = await result_of([text, drawing])
    assert not result.is_error and result.content == "Here is your cat."
    [image] = result.media
    assert isinstance(image, ImagePart) and image.data == PNG
    assert image.media_type == "image/png"


async def test_an_image_by_url_is_an_image_part() -> None:
    link = pb.Part(url="https://example.com/cat.png", media_type="image/png")
    result = await result_of([link])
    [image] = result.media
    assert isinstance(image, ImagePart) and image.url == "https://example.com/cat.png"


async def test_another_file_is_named_never_dropped() -> None:
    parts: list[Any] = [
        pb.Part(text="Your report:"),
        pb.Part(raw=b"PK\x03\x04 zipped...", media_type="application/zip", filename="report.zip"),
        pb.Part(url="https://example.com/r.csv", media_type="text/csv"),
    ]
    result = await result_of(parts)
    assert result.content == (
        "Your report:\n[file report.zip (application/zip, 14 bytes) not shown]\n"
        "[file https://example.com/r.csv (text/csv) not shown]"
    )
    assert result.media == ()
