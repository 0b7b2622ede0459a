"""A file part sent to an A2A agent is refused, never dropped (SPEC 26 x 16), official client.

``A2AApp`` runs a message's text parts (its card's ``defaultInputModes`` is ``text/plain``). A
message that also carried a file (an image as ``raw`` bytes, or a ``url``) ran on its text
alone: the model answered "what is in this picture?" without the picture, and the client had no
sign its file was never seen. Now such a message is the protocol's own
``ContentTypeNotSupportedError`` (-32005) naming the part's media type, nothing runs, and the
context takes the next message as usual. Official a2a-sdk client over uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import ContentTypeNotSupportedError

from agentloop import Agent
from agentloop.testing import ScriptedModel, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.mark.parametrize("kind", ["raw", "url"])
async def test_a_message_with_a_file_is_refused_and_runs_nothing(kind: str) -> None:
    model = ScriptedModel([reply("It is a cat.")])
    async with serving(Agent(model).to_a2a(name="vision")) as url, client(url) as made:
        request = user("What is in this picture?")
        part = pb.Part(media_type="image/png", filename="cat.png")
        if kind == "raw":
            part.raw = PNG
        else:
            part.url = "https://example.com/cat.png"
        request.message.parts.append(part)
        with pytest.raises(ContentTypeNotSupportedError, match="image/png"):
            await send(made, request)
        assert model.requests == []
        [done] = await send(made, user("Say something."))  # the agent still serves
    assert done.task.status.state == pb.TASK_STATE_COMPLETED
