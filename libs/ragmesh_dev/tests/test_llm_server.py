"""The dev stack's model server (llama_cpp.server with SmolLM2) through the official `openai` client: it lists
the model under its alias, greedy decoding with a seed repeats itself, and a second request waits its turn
instead of cutting the first one off (`--interrupt_requests False`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import openai
import pytest

from ragmesh_dev.llm_server import MODEL_NAME, LlamaServer

MESSAGES: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    llama = LlamaServer().start()
    try:
        yield llama
    finally:
        llama.stop()


def test_lists_the_model_under_its_alias(server: LlamaServer) -> None:
    with openai.OpenAI(base_url=server.base_url, api_key="unused", timeout=30) as client:
        assert MODEL_NAME in {m.id for m in client.models.list().data}


async def test_greedy_answers_repeat_and_concurrent_streams_both_finish(server: LlamaServer) -> None:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="unused", timeout=120) as client:

        async def ask() -> tuple[str, str | None]:
            stream = await client.chat.completions.create(
                model=MODEL_NAME, messages=MESSAGES, stream=True, max_tokens=16, temperature=0.0, seed=3
            )
            text, reason = "", None
            async for chunk in stream:
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    reason = choice.finish_reason or reason
            return text, reason

        first, second = await asyncio.gather(ask(), ask())
    assert first[0] and first == second
    assert first[1] in ("stop", "length")  # finished, not interrupted by the other request
