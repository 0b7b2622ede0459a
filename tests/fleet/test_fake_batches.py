"""The fake server's batch APIs (SPEC 25), over real HTTP: OpenAI files + batches, Anthropic."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from agentloop.errors import ConfigurationError
from agentloop.testing import FakeProviderServer, FakeReply, Fault, load_fake_script

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def chat(custom_id: str, text: str) -> dict[str, Any]:
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": text}]}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


async def openai_batch(session: aiohttp.ClientSession, server: FakeProviderServer,
                       lines: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    form = aiohttp.FormData()
    form.add_field("purpose", "batch")
    jsonl = "\n".join(json.dumps(line) for line in lines).encode()
    form.add_field("file", jsonl, filename="batch.jsonl")
    async with session.post(f"{server.base_url}/files", data=form) as response:
        uploaded = await response.json()
    assert uploaded["purpose"] == "batch" and uploaded["id"].startswith("file-")
    create = {
        "input_file_id": uploaded["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    async with session.post(f"{server.base_url}/batches", json=create) as response:
        assert response.status == 200
        batch: dict[str, Any] = await response.json()
        return batch


async def test_an_openai_batch_answers_each_line_as_its_step_says() -> None:
    steps: list[FakeReply | Fault] = [
        FakeReply("first"),
        replace(Fault.rate_limit(retry_after=3), batch_result="errored"),
        FakeReply("never", batch_result="expired"),
    ]
    async with FakeProviderServer(steps) as server, aiohttp.ClientSession() as session:
        batch = await openai_batch(session, server, [chat(f"run_0_{n}", "hi") for n in range(3)])
        async with session.get(f"{server.base_url}/batches/{batch['id']}") as response:
            done = await response.json()
        assert done["status"] == "completed" and done["request_counts"]["completed"] == 1
        async with session.get(f"{server.base_url}/files/{done['output_file_id']}/content") as r:
            (output,) = [json.loads(line) for line in (await r.text()).splitlines()]
        async with session.get(f"{server.base_url}/files/{done['error_file_id']}/content") as r:
            errored, expired = [json.loads(line) for line in (await r.text()).splitlines()]
    assert output["custom_id"] == "run_0_0"
    assert output["response"]["body"]["choices"][0]["message"]["content"] == "first"
    assert errored["custom_id"] == "run_0_1" and errored["response"]["status_code"] == 429
    assert expired["response"] is None and expired["error"]["code"] == "batch_expired"


async def test_an_openai_batch_in_progress_can_be_cancelled() -> None:
    async with (
        FakeProviderServer(default=FakeReply("ok"), batch_after=3600) as server,
        aiohttp.ClientSession() as session,
    ):
        batch = await openai_batch(session, server, [chat("run_0_0", "hi")])
        assert batch["status"] == "in_progress" and batch["output_file_id"] is None
        async with session.post(f"{server.base_url}/batches/{batch['id']}/cancel") as response:
            assert (await response.json())["status"] == "cancelled"


async def test_a_bad_batch_request_is_refused() -> None:
    async with FakeProviderServer() as server, aiohttp.ClientSession() as session:
        create = {"input_file_id": "nope", "endpoint": "/v1/embeddings", "completion_window": "1h"}
        async with session.post(f"{server.base_url}/batches", json=create) as response:
            assert response.status == 400


async def test_an_anthropic_batch_ends_with_jsonl_results() -> None:
    steps = [FakeReply("yes"), FakeReply("no", batch_result="canceled")]
    requests = [
        {"custom_id": f"run_0_{n}", "params": {"model": "claude", "max_tokens": 5,
                                               "messages": [{"role": "user", "content": "q"}]}}
        for n in range(2)
    ]  # fmt: skip
    async with FakeProviderServer(steps) as server, aiohttp.ClientSession() as session:
        root = f"{server.root_url}/v1/messages/batches"
        async with session.post(root, json={"requests": requests}) as response:
            batch = await response.json()
        async with session.get(f"{root}/{batch['id']}") as response:
            ended = await response.json()
        assert ended["processing_status"] == "ended"
        async with session.get(ended["results_url"]) as response:
            lines = [json.loads(line) for line in (await response.text()).splitlines()]
    assert [line["result"]["type"] for line in lines] == ["succeeded", "canceled"]
    assert lines[0]["result"]["message"]["content"][0]["text"] == "yes"


def test_scripts_say_how_long_a_batch_takes_and_how_each_step_ends() -> None:
    script = load_fake_script(
        {"batch": {"complete_after": 2.5}, "steps": [{"text": "a", "batch_result": "expired"}]}
    )
    assert script.batch_after == 2.5
    assert isinstance(script.steps[0], FakeReply) and script.steps[0].batch_result == "expired"
    with pytest.raises(ConfigurationError, match="batch_result"):
        load_fake_script({"steps": [{"text": "a", "batch_result": "lost"}]})
    with pytest.raises(ConfigurationError):
        load_fake_script({"batch": {"after": 1}})
